/**
 * The console calls the API like any client: the generated service descriptions, through the Connect
 * protocol (JSON) to the origin that served it. The token lives in this tab's sessionStorage only and goes
 * out as `Authorization: Bearer`; the namespace as `sessionstate-namespace`.
 */
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { Upstream } from "../../gen/sessionstate/v1/upstream_pb.js";
import { Watch } from "../../gen/sessionstate/v1/watch_pb.js";

const tokenKey = "sessionstate.token";

/** The token entered in this tab, if any. */
export function savedToken(): string | undefined {
  return sessionStorage.getItem(tokenKey) ?? undefined;
}

export function saveToken(token: string): void {
  sessionStorage.setItem(tokenKey, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(tokenKey);
}

/** The three services the console reads, for one namespace. */
export interface Api {
  reconcile: Client<typeof Reconcile>;
  watch: Client<typeof Watch>;
  upstream: Client<typeof Upstream>;
}

/** Clients that call in `namespace` with the tab's token. */
export function api(namespace: string): Api {
  const identify: Interceptor = (next) => (request) => {
    const token = savedToken();
    if (token !== undefined) request.header.set("authorization", `Bearer ${token}`);
    request.header.set("sessionstate-namespace", namespace);
    return next(request);
  };
  const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [identify] });
  return { reconcile: createClient(Reconcile, transport), watch: createClient(Watch, transport), upstream: createClient(Upstream, transport) };
}

/** True when the server refused the call for want of a (valid) token. */
export function isUnauthenticated(error: unknown): boolean {
  return ConnectError.from(error).code === Code.Unauthenticated;
}

/** A plain sentence for a failed call: what happened, in the server's safe words. */
export function describeError(error: unknown): string {
  const err = ConnectError.from(error);
  switch (err.code) {
    case Code.Unauthenticated:
      return "The server did not accept the token. Enter a valid token to continue.";
    case Code.PermissionDenied:
      return `Your token may not see this: ${err.rawMessage}`;
    case Code.Unavailable:
      return `The server is not available now (${err.rawMessage}). The console tries again when you reload.`;
    case Code.Canceled:
      return "Stopped.";
    default:
      return `${Code[err.code]}: ${err.rawMessage}`;
  }
}
