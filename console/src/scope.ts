/** What the tab's token may see, and reads that respect it (an agent-scoped token lists agent by agent). */
import type { Caller, SessionSummary } from "../../gen/sessionstate/v1/reconcile_pb.js";
import type { UpstreamLink } from "../../gen/sessionstate/v1/upstream_pb.js";
import type { Api } from "./api.js";
import { msOf } from "./format.js";

/** Everything a view needs: its namespace, the caller, its route's parameters, and a signal that ends with the view. */
export interface ViewContext {
  namespace: string;
  api: Api;
  /** Clients for another namespace (the first page reads every namespace). */
  apiFor: (namespace: string) => Api;
  caller: Caller;
  params: URLSearchParams;
  signal: AbortSignal;
}

/** The agents a caller lists one by one, or `undefined` when it may list every agent at once (admin, or no authentication). */
export function scopedAgents(caller: Caller): readonly string[] | undefined {
  return !caller.authenticated || caller.admin ? undefined : caller.agents;
}

/** The `limit` most recently changed sessions of the namespace that the caller may see. */
export async function recentSessions(context: Pick<ViewContext, "api" | "caller" | "signal">, limit: number): Promise<SessionSummary[]> {
  const agents = scopedAgents(context.caller);
  const pages = await Promise.all(
    (agents ?? [""]).map((agentId) => context.api.reconcile.listSessions({ agentId, recentFirst: true, pageSize: limit }, { signal: context.signal })),
  );
  return pages
    .flatMap((page) => page.sessions)
    .sort((a, b) => msOf(b.updatedAt) - msOf(a.updatedAt))
    .slice(0, limit);
}

/** Up to `limit` upstream links of the namespace the caller may see. */
export async function upstreamLinks(context: Pick<ViewContext, "api" | "caller" | "signal">, limit: number): Promise<UpstreamLink[]> {
  const agents = scopedAgents(context.caller);
  const pages = await Promise.all(
    (agents ?? [""]).map((agentId) => context.api.upstream.listUpstreamLinks({ agentId, pageSize: limit }, { signal: context.signal })),
  );
  return pages.flatMap((page) => page.links).slice(0, limit);
}
