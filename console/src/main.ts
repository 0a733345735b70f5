/**
 * The console (SPEC §13.2): a read-only view of a running sessionstate through its own API. Every view has
 * its own address (`#/ns/<namespace>/…`), so a view can be shared; a view's calls end when another view
 * opens.
 *
 *   #/                                  namespaces, each with its most recently changed sessions
 *   #/ns/N/sessions?prefix=&agent=&page= sessions of N, searchable by key prefix
 *   #/ns/N/session/AGENT/KEY            one session: events on a time axis, pairs with L, N, M and notice text
 *   #/ns/N/live                         notices as they open and are acknowledged; appends per minute
 *   #/ns/N/server                       version, backend, node id, database, retention, monitor and links
 *   #/token                             enter a token (kept in this tab's sessionStorage only)
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Caller } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { api, describeError, forgetToken, isUnauthenticated, saveToken, savedToken } from "./api.js";
import { h, replace, type Child } from "./dom.js";
import type { ViewContext } from "./scope.js";
import { errorBox, liveView, overviewView, serverView, sessionView, sessionsView } from "./views.js";

const view = document.getElementById("view")!;
const nav = document.getElementById("nav")!;
const who = document.getElementById("who")!;

/** A route: the view, its namespace when it has one, its other path parts and its query. */
interface Route {
  name: "overview" | "sessions" | "session" | "live" | "server" | "token";
  namespace: string | undefined;
  parts: string[];
  params: URLSearchParams;
}

function parseRoute(hash: string): Route {
  const [path = "", query = ""] = hash.replace(/^#/, "").split("?", 2);
  const parts = path.split("/").filter((part) => part !== "").map((part) => decodeURIComponent(part));
  const params = new URLSearchParams(query);
  if (parts[0] === "token") return { name: "token", namespace: undefined, parts: [], params };
  if (parts[0] === "ns" && parts[1] !== undefined) {
    const name = parts[2];
    if (name === "sessions" || name === "live" || name === "server") return { name, namespace: parts[1], parts: [], params };
    if (name === "session" && parts.length >= 5) return { name: "session", namespace: parts[1], parts: [parts[3]!, parts.slice(4).join("/")], params };
    return { name: "sessions", namespace: parts[1], parts: [], params };
  }
  return { name: "overview", namespace: undefined, parts: [], params };
}

/** The namespace views open in when the address names none: the last one used, else `default`. */
let lastNamespace = "default";
let current: AbortController | undefined;

/** Who the token is, learnt in `namespace`; a token barred from it learns in its first visible namespace. */
async function learnCaller(namespace: string, signal: AbortSignal): Promise<{ caller: Caller; namespace: string }> {
  try {
    const info = await api(namespace).reconcile.getServerInfo({}, { signal });
    return { caller: info.caller!, namespace };
  } catch (error) {
    if (ConnectError.from(error).code !== Code.PermissionDenied) throw error;
    const visible = await api(namespace).reconcile.listNamespaces({ pageSize: 1 }, { signal });
    const first = visible.namespaces[0]?.name;
    if (first === undefined || first === namespace) throw error;
    const info = await api(first).reconcile.getServerInfo({}, { signal });
    return { caller: info.caller!, namespace: first };
  }
}

function renderNav(namespace: string, route: Route, caller: Caller | undefined): void {
  const base = `#/ns/${encodeURIComponent(namespace)}`;
  const link = (href: string, label: string, active: boolean): HTMLElement =>
    h("a", { href, ...(active ? { "aria-current": "page" } : {}) }, label);
  replace(
    nav,
    link("#/", "Overview", route.name === "overview"),
    link(`${base}/sessions`, "Sessions", route.name === "sessions" || route.name === "session"),
    link(`${base}/live`, "Live", route.name === "live"),
    link(`${base}/server`, "Server", route.name === "server"),
    h("span", { class: "namespace" }, "Namespace ", h("strong", {}, namespace)),
  );
  const token = savedToken();
  replace(
    who,
    caller?.authenticated === true ? h("span", {}, "Token ", h("strong", {}, caller.tokenName)) : caller === undefined ? null : h("span", {}, "No authentication"),
    token === undefined
      ? h("a", { href: "#/token", class: "button" }, "Enter token")
      : h(
          "button",
          {
            type: "button",
            onclick: () => {
              forgetToken();
              location.hash = "#/token";
            },
          },
          "Forget token",
        ),
  );
}

/** The token form, with why it is shown. */
function tokenView(message: string | undefined, returnTo: string): Child {
  return [
    h("h1", {}, "Access token"),
    message === undefined ? null : h("p", { class: "error", role: "alert" }, message),
    h(
      "form",
      {
        class: "token",
        onsubmit: (event: Event) => {
          event.preventDefault();
          const value = String(new FormData(event.target as HTMLFormElement).get("token") ?? "").trim();
          if (value === "") return;
          saveToken(value);
          location.hash = returnTo === "" || returnTo.startsWith("#/token") ? "#/" : returnTo;
          if (location.hash === returnTo) void show();
        },
      },
      h("label", { for: "token" }, "Token"),
      h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" }),
      h("button", { type: "submit" }, "Use this token"),
    ),
    h("p", { class: "muted" }, "The token stays in this browser tab only (sessionStorage) and is sent to this server alone; closing the tab forgets it. The console sees exactly what the token may see."),
  ];
}

/** Shows the view the address names. */
async function show(): Promise<void> {
  current?.abort();
  const controller = new AbortController();
  current = controller;
  const { signal } = controller;
  const route = parseRoute(location.hash);
  if (route.name === "token") {
    renderNav(lastNamespace, route, undefined);
    replace(view, tokenView(undefined, ""));
    view.focus();
    return;
  }
  replace(view, h("p", { class: "muted", role: "status" }, "Loading…"));
  try {
    const learnt = await learnCaller(route.namespace ?? lastNamespace, signal);
    const namespace = route.namespace ?? learnt.namespace;
    lastNamespace = namespace;
    renderNav(namespace, route, learnt.caller);
    const context: ViewContext = { namespace, api: api(namespace), apiFor: api, caller: learnt.caller, params: route.params, signal };
    document.title = `${route.name === "overview" ? "Namespaces" : route.name} · ${namespace} · sessionstate`;
    if (route.name === "live") {
      view.focus();
      await liveView(context, view);
      return;
    }
    const content =
      route.name === "overview"
        ? await overviewView(context)
        : route.name === "sessions"
          ? await sessionsView(context)
          : route.name === "session"
            ? await sessionView(context, route.parts[0]!, route.parts[1]!)
            : await serverView(context);
    if (signal.aborted) return;
    replace(view, content);
    view.focus();
  } catch (error) {
    if (signal.aborted) return;
    if (isUnauthenticated(error)) {
      renderNav(lastNamespace, route, undefined);
      replace(view, tokenView(savedToken() === undefined ? "This server asks for a token." : describeError(error), location.hash));
    } else {
      replace(view, h("h1", {}, "Cannot show this view"), errorBox(error));
    }
    view.focus();
  }
}

window.addEventListener("hashchange", () => void show());
void show();
