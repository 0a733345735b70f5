/**
 * The console's views, one per route (main.ts). Each reads through the API with the tab's token and
 * renders plain elements; none writes anything.
 */
import type { NamespaceSummary, SessionSummary } from "../../gen/sessionstate/v1/reconcile_pb.js";
import type { Cursor, StateEvent } from "../../gen/sessionstate/v1/types_pb.js";
import type { StaleNotice } from "../../gen/sessionstate/v1/watch_pb.js";
import { describeError } from "./api.js";
import { eventTimeline, minuteChart } from "./charts.js";
import { h, replace, table, type Child } from "./dom.js";
import { actorName, count, formatDuration, formatMs, formatTime, kindName, plural, provenanceName, sessionHref } from "./format.js";
import { recentSessions, scopedAgents, upstreamLinks, type ViewContext } from "./scope.js";

/** A labelled figure (term and value) for a summary list. */
function fact(term: string, value: Child): Child[] {
  return [h("dt", {}, term), h("dd", {}, value)];
}

/** A link to a session's view, showing its key. */
function sessionLink(namespace: string, session: SessionSummary["session"]): HTMLElement {
  return h("a", { href: sessionHref(namespace, session) }, session?.key ?? "?");
}

/** The rows of a sessions table. */
function sessionRows(namespace: string, sessions: readonly SessionSummary[]): Child[][] {
  return sessions.map((summary) => [
    sessionLink(namespace, summary.session),
    summary.session?.agentId ?? "",
    count(summary.stateVersion),
    formatTime(summary.updatedAt),
    count(summary.prunedThrough),
    summary.hasUpstream ? "linked" : "—",
  ]);
}

const sessionHeaders = ["Key", "Agent", "Version", "Last change", "Pruned through", "Upstream"];

/** An error said in a sentence, in a live region so assistive technology reads it. */
export function errorBox(error: unknown): HTMLElement {
  return h("p", { class: "error", role: "alert" }, describeError(error));
}

/** First page: every namespace the token may use with its counts, and its most recently changed sessions. */
export async function overviewView(context: ViewContext): Promise<Child> {
  const namespaces = await context.api.reconcile.listNamespaces({ pageSize: 100 }, { signal: context.signal });
  if (namespaces.namespaces.length === 0) {
    return [h("h1", {}, "Namespaces"), h("p", { class: "empty" }, "No namespace holds a session or a watch yet. Append an event and it shows here.")];
  }
  const cards = await Promise.all(namespaces.namespaces.map((namespace) => namespaceCard(context, namespace)));
  return [h("h1", {}, "Namespaces"), h("div", { class: "cards" }, cards)];
}

async function namespaceCard(context: ViewContext, namespace: NamespaceSummary): Promise<HTMLElement> {
  const scoped = { ...context, api: context.apiFor(namespace.name) };
  let recent: Child;
  try {
    const sessions = await recentSessions(scoped, 5);
    recent = table(`Most recently changed in ${namespace.name}`, ["Key", "Agent", "Version", "Last change"], sessionRows(namespace.name, sessions).map((row) => row.slice(0, 4)));
  } catch (error) {
    recent = errorBox(error);
  }
  const base = `#/ns/${encodeURIComponent(namespace.name)}`;
  return h(
    "section",
    { class: "card", "aria-labelledby": `ns-${namespace.name}` },
    h("h2", { id: `ns-${namespace.name}` }, h("a", { href: `${base}/sessions` }, namespace.name)),
    h(
      "dl",
      { class: "facts" },
      fact("Sessions", count(namespace.sessions)),
      fact("Events", count(namespace.events)),
      fact("Watches", count(namespace.watches)),
      fact("Pending notices", count(namespace.pendingNotices)),
      fact("Last append", formatTime(namespace.updatedAt)),
    ),
    recent,
    h("p", { class: "links" }, h("a", { href: `${base}/sessions` }, "All sessions"), " · ", h("a", { href: `${base}/live` }, "Live"), " · ", h("a", { href: `${base}/server` }, "Server")),
  );
}

/** Sessions of a namespace: search by key prefix, filter by agent, page forward. */
export async function sessionsView(context: ViewContext): Promise<Child> {
  const prefix = context.params.get("prefix") ?? "";
  const agents = scopedAgents(context.caller);
  const agentId = context.params.get("agent") ?? agents?.[0] ?? "";
  const pageToken = context.params.get("page") ?? "";
  const base = `#/ns/${encodeURIComponent(context.namespace)}/sessions`;
  const search = h(
    "form",
    {
      class: "search",
      role: "search",
      onsubmit: (event: Event) => {
        event.preventDefault();
        const form = new FormData(event.target as HTMLFormElement);
        const query = new URLSearchParams();
        for (const name of ["prefix", "agent"]) {
          const value = String(form.get(name) ?? "").trim();
          if (value !== "") query.set(name, value);
        }
        location.hash = `${base}?${query}`;
      },
    },
    h("label", { for: "prefix" }, "Key starts with"),
    h("input", { id: "prefix", name: "prefix", value: prefix, placeholder: "agent:main:", autocomplete: "off", spellcheck: "false" }),
    h("label", { for: "agent" }, "Agent"),
    agents === undefined
      ? h("input", { id: "agent", name: "agent", value: agentId, placeholder: "every agent", autocomplete: "off", spellcheck: "false" })
      : h("select", { id: "agent", name: "agent" }, agents.map((agent) => h("option", { value: agent, selected: agent === agentId }, agent))),
    h("button", { type: "submit" }, "Search"),
  );
  const page = await context.api.reconcile.listSessions({ keyPrefix: prefix, agentId, pageSize: 50, pageToken }, { signal: context.signal });
  const next = new URLSearchParams(context.params);
  next.set("page", page.nextPageToken);
  return [
    h("h1", {}, `Sessions in ${context.namespace}`),
    search,
    table(prefix === "" ? "Sessions, by agent and key" : `Sessions whose key starts with “${prefix}”`, sessionHeaders, sessionRows(context.namespace, page.sessions), "no session matches."),
    h(
      "p",
      { class: "links" },
      pageToken === "" ? null : h("a", { href: `${base}?${new URLSearchParams([...context.params].filter(([name]) => name !== "page"))}` }, "First page"),
      pageToken !== "" && page.nextPageToken !== "" ? " · " : null,
      page.nextPageToken === "" ? null : h("a", { href: `${base}?${next}`, rel: "next" }, "Next page"),
    ),
  ];
}

/** The events the session view shows: the newest up to 200, reading at most 1,000 forward from the start. */
async function newestEvents(context: ViewContext, session: { key: string; agentId: string }): Promise<{ events: StateEvent[]; version: bigint; gap: boolean; more: boolean }> {
  const events: StateEvent[] = [];
  let since = 0n;
  let version = 0n;
  let gap = false;
  for (let read = 0; read < 5; read++) {
    const status = await context.api.reconcile.sessionStatus({ session, changesSince: since, limit: 200 }, { signal: context.signal });
    version = status.stateVersion;
    gap ||= status.stateChanges?.historyGap ?? false;
    events.push(...(status.stateChanges?.events ?? []));
    if (!(status.stateChanges?.truncated ?? false) || events.length === 0) return { events: events.slice(-200), version, gap, more: false };
    since = events.at(-1)!.sequence;
  }
  return { events: events.slice(-200), version, gap, more: true };
}

/** Cursors of a watcher or on a target, up to 1,000. */
async function cursors(context: ViewContext, filter: { watcherSessionKey?: string; target?: { key: string; agentId: string } }): Promise<Cursor[]> {
  const found: Cursor[] = [];
  let pageToken = "";
  do {
    const page = await context.api.watch.listWatches({ ...filter, pageSize: 500, pageToken }, { signal: context.signal });
    found.push(...page.cursors);
    pageToken = page.nextPageToken;
  } while (pageToken !== "" && found.length < 1000);
  return found;
}

/** A table of pairs: L, N, M, whether a notice is pending (and which consumer group's member holds it) and its exact text. */
function pairsTable(caption: string, rows: readonly Cursor[], other: (cursor: Cursor) => Child): HTMLElement {
  return table(
    caption,
    ["Session", "Provenance", "L (acked)", "N (notified)", "M (material)", "Pending", "Notice text the watcher gets"],
    rows.map((cursor) => [
      other(cursor),
      provenanceName(cursor.provenance),
      count(cursor.ackedVersion),
      count(cursor.notifiedVersion),
      count(cursor.materialVersion),
      cursor.notifiedVersion > cursor.ackedVersion
        ? [h("strong", { class: "pending" }, "pending"), ...(cursor.claimedBy === "" ? [] : [h("br", {}), `held by ${cursor.claimedBy.split("\n").join("; ")}`])]
        : "no",
      cursor.pendingNoticeText === "" ? "—" : h("code", { class: "notice" }, cursor.pendingNoticeText),
    ]),
    "none.",
  );
}

/** One session: its events on a time axis and in a table, and the pairs in both directions. */
export async function sessionView(context: ViewContext, agentId: string, key: string): Promise<Child> {
  const session = { key, agentId };
  const [history, watchedBy, watching] = await Promise.all([
    newestEvents(context, session),
    cursors(context, { target: session }),
    key.startsWith("agent:") ? cursors(context, { watcherSessionKey: key }) : Promise.resolve([]),
  ]);
  const { namespace } = context;
  return [
    h("h1", {}, h("span", { class: "muted" }, "Session "), key),
    h(
      "dl",
      { class: "facts" },
      fact("Namespace", namespace),
      fact("Agent", agentId),
      fact("State version", count(history.version)),
      fact("Events shown", count(history.events.length)),
      history.gap ? fact("History", "older events were pruned") : null,
    ),
    history.events.length === 0
      ? h("p", { class: "empty" }, "No events are retained for this session.")
      : [
          eventTimeline(history.events),
          h("p", { class: "legend" }, h("span", { class: "key actor-agent" }, "agent"), h("span", { class: "key actor-human" }, "human"), h("span", { class: "key actor-system" }, "system")),
        ],
    table(
      history.more ? "Events (the newest 200 of the first 1,000)" : "Events (the newest 200 at most)",
      ["Sequence", "Kind", "Actor", "Summary", "Time"],
      history.events
        .slice()
        .reverse()
        .map((event) => [
          count(event.sequence),
          kindName(event.kind),
          `${actorName(event.actorType)}${event.actorId === "" ? "" : ` ${event.actorId}`}`,
          h("span", { class: "text" }, event.summary),
          formatTime(event.occurredAt),
        ]),
    ),
    pairsTable(`Sessions watching ${key}`, watchedBy, (cursor) =>
      h("a", { href: sessionHref(namespace, { key: cursor.watcherSessionKey, agentId: cursor.watcherSessionKey.split(":")[1] ?? "" }) }, cursor.watcherSessionKey),
    ),
    key.startsWith("agent:") ? pairsTable(`Sessions ${key} watches`, watching, (cursor) => h("a", { href: sessionHref(namespace, cursor.target) }, cursor.target?.key ?? "?")) : null,
  ];
}

/** What the live view shows of one notice. */
interface LiveNotice {
  notice: StaleNotice;
  state: "pending" | "acknowledged";
  row: HTMLTableRowElement;
}

/** `no notice was pending`, `1 notice was pending`, `3 notices were pending`. */
export function pendingWhenOpened(n: number): string {
  if (n === 0) return "no notice was pending";
  return n === 1 ? "1 notice was pending" : `${count(n)} notices were pending`;
}

/** Live: notices as they open and as they are acknowledged, and the namespace's activity per minute. */
export async function liveView(context: ViewContext, root: HTMLElement): Promise<void> {
  const chart = h("div", { class: "chart-box" });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" }, "Connecting…");
  const body = h("tbody", {});
  const notices = h(
    "div",
    { class: "scroll" },
    h(
      "table",
      { class: "live" },
      h("caption", {}, "Notices, newest first"),
      h("thead", {}, h("tr", {}, ["Received", "Watcher", "Target", "L", "N", "State", "Text"].map((header) => h("th", { scope: "col" }, header)))),
      body,
    ),
  );
  replace(
    root,
    h("h1", {}, `Live in ${context.namespace}`),
    h("h2", {}, "Appends and notices per minute"),
    chart,
    h("p", { class: "legend" }, h("span", { class: "key bar" }, "appends"), h("span", { class: "key opened" }, "notices opened"), h("span", { class: "key acked" }, "acknowledged")),
    h("h2", {}, "Notices"),
    status,
    notices,
  );
  const shown: LiveNotice[] = [];
  const stateCell = (state: LiveNotice["state"]): HTMLElement =>
    state === "pending" ? h("strong", { class: "pending" }, "pending") : h("span", { class: "acknowledged" }, "acknowledged");
  const refreshChart = async (): Promise<void> => {
    try {
      const info = await context.api.reconcile.getServerInfo({}, { signal: context.signal });
      replace(chart, minuteChart(info.minutes));
    } catch (error) {
      if (!context.signal.aborted) replace(chart, errorBox(error));
    }
  };
  // A shown notice is acknowledged once its pair's cursor no longer holds it pending at its N.
  const checkAcks = async (): Promise<void> => {
    for (const item of shown.filter((entry) => entry.state === "pending").slice(0, 50)) {
      const { notice } = item;
      const page = await context.api.watch.listWatches({ watcherSessionKey: notice.watcherSessionKey, target: notice.target, pageSize: 1 }, { signal: context.signal });
      const cursor = page.cursors[0];
      if (cursor === undefined || cursor.ackedVersion >= notice.notifiedVersion) {
        item.state = "acknowledged";
        item.row.dataset.state = "acknowledged";
        replace(item.row.cells[5]!, stateCell("acknowledged"));
      }
    }
  };
  const timers = [setInterval(() => void refreshChart(), 5000), setInterval(() => void checkAcks().catch(() => undefined), 500)];
  context.signal.addEventListener("abort", () => timers.forEach(clearInterval));
  await refreshChart();
  const agents = scopedAgents(context.caller);
  const prefixes = (agents ?? [""]).map((agent) => (agent === "" ? "agent:" : `agent:${agent}:`));
  // Notices before `synced` were pending when the page opened: when they opened is not known here.
  let synced = false;
  try {
    for await (const message of context.api.watch.subscribeStaleNotices({ watcherKeyPrefixes: prefixes }, { signal: context.signal })) {
      if (message.message.case === "synced") {
        synced = true;
        replace(status, `Following every watcher of ${agents === undefined ? "every agent" : agents.join(", ")}: ${pendingWhenOpened(message.message.value.pendingDelivered)}; new ones appear as they open.`);
        continue;
      }
      if (message.message.case !== "notice") continue;
      const notice = message.message.value;
      // A notice that opens again on a pair replaces the pair's row.
      const before = shown.findIndex((entry) => entry.notice.watcherSessionKey === notice.watcherSessionKey && entry.notice.target?.key === notice.target?.key && entry.notice.target?.agentId === notice.target?.agentId);
      if (before !== -1) shown.splice(before, 1)[0]!.row.remove();
      const row = h(
        "tr",
        { "data-state": "pending" },
        h("td", {}, synced ? formatMs(Date.now()) : "already pending"),
        h("td", {}, notice.watcherSessionKey),
        h("td", {}, h("a", { href: sessionHref(context.namespace, notice.target) }, notice.target?.key ?? "?")),
        h("td", {}, count(notice.changesSince)),
        h("td", {}, count(notice.notifiedVersion)),
        h("td", {}, stateCell("pending")),
        h("td", {}, h("code", { class: "notice" }, notice.text)),
      );
      body.prepend(row);
      shown.unshift({ notice, state: "pending", row });
      for (const old of shown.splice(200)) old.row.remove();
    }
  } catch (error) {
    if (!context.signal.aborted) replace(status, errorBox(error));
  }
}

/** The server: version, backend, node id, database, retention, the monitor and its links. */
export async function serverView(context: ViewContext): Promise<Child> {
  const [info, links] = await Promise.all([context.api.reconcile.getServerInfo({}, { signal: context.signal }), upstreamLinks(context, 200)]);
  const retention = info.retention;
  const monitor = info.upstreamMonitor;
  return [
    h("h1", {}, "Server"),
    h(
      "dl",
      { class: "facts" },
      fact("Version", info.version),
      fact("Backend", info.backend),
      fact("Node id", info.nodeId),
      fact("Database", info.databaseReachable ? h("span", { class: "ok" }, "reachable") : h("strong", { class: "bad" }, "unreachable")),
      fact("Stored in", info.database === "" ? h("span", { class: "muted" }, "shown to an admin token only") : h("code", {}, info.database)),
      fact("Started", formatTime(info.startedAt)),
      fact("Your token", info.caller?.authenticated ? `${info.caller.tokenName}${info.caller.admin ? " (admin)" : ` (agents: ${info.caller.agents.join(", ")})`}` : "authentication is off"),
    ),
    h("h2", {}, "Retention"),
    h(
      "dl",
      { class: "facts" },
      fact("Keeps", `${plural(retention?.retentionDays ?? 0, "day")}, at most ${count(retention?.maxEvents ?? 0n)} events a namespace`),
      fact("Last pass here", retention?.lastPassAt === undefined ? "none since start" : formatTime(retention.lastPassAt)),
      fact("It removed", retention?.lastPassAt === undefined ? "—" : `${plural(retention.lastPassEventsRemoved, "event")}, ${plural(retention.lastPassCursorsRemoved, "cursor")}`),
      fact("Watermarks", "each session's pruned-through, in the sessions list"),
    ),
    h("h2", {}, "Upstream monitor"),
    h(
      "dl",
      { class: "facts" },
      fact("Ticks every", formatDuration(Number(monitor?.intervalMs ?? 0n))),
      fact("Last tick here", monitor?.lastTickAt === undefined ? "none since start" : formatTime(monitor.lastTickAt)),
      fact(
        "It",
        monitor?.lastTickAt === undefined
          ? "—"
          : `scanned ${plural(monitor.lastTickLinksScanned, "link")}, recorded ${plural(monitor.lastTickEventsRecorded, "event")}; ${monitor.lastTickLinksTimedOut} timed out, ${monitor.lastTickLinksFailed} failed`,
      ),
    ),
    table(
      "The CLIs' prompt hooks (since this server started, every namespace)",
      ["CLI", "Last call", "Matched", "Unmatched", "Refused"],
      info.hooks.map((hooks) => [hooks.cli, hooks.lastCallAt === undefined ? "never" : formatTime(hooks.lastCallAt), count(hooks.matched), count(hooks.unmatched), count(hooks.refused)]),
      "this server takes no hooks.",
    ),
    table(
      `Upstream links in ${context.namespace}`,
      ["Session", "Catalog", "Source", "Missed checks", "Last scanned", "Last outcome"],
      links.map((link) => [
        h("a", { href: sessionHref(context.namespace, link.session) }, link.session?.key ?? "?"),
        link.catalogId,
        h("span", { class: "text" }, link.source),
        String(link.missedChecks),
        formatTime(link.lastScannedAt),
        link.lastScanOutcome === "" ? "not checked since start" : link.lastScanOutcome.replace("_", " "),
      ]),
      "no session here is adopted.",
    ),
  ];
}
