import { StatusError } from "../errors.js";
import type { Principal } from "../domain/principal.js";
import { agentIdFromKey, defaultAgentId, normalizeAgentId, type SessionId } from "../domain/session-key.js";
import { decodePageToken, pageSizeFromRequest } from "./page-token.js";
import type { CallContext } from "../rpc/service-adapter.js";

function deny(what: string, principal: Principal): never {
  throw new StatusError("PERMISSION_DENIED", `${what} is outside the scope of token "${principal.name}"`);
}

/** Refuses unless the caller may act for every agent in `agentIds` (always true with auth off or for admins). */
export function authorizeAgents(context: CallContext, agentIds: Iterable<string>): void {
  const principal = context.principal;
  if (principal === undefined || principal.admin) return;
  for (const agentId of agentIds) if (!principal.agents.has(agentId)) deny(`agent "${agentId}"`, principal);
}

/** Refuses unless the caller may act for the agent a key belongs to (bare keys belong to `main`). */
export function authorizeKeys(context: CallContext, keys: Iterable<string>): void {
  authorizeAgents(context, [...keys].map((key) => agentIdFromKey(key) ?? defaultAgentId));
}

/**
 * Refuses watcher key prefixes that could match watchers of agents outside the caller's scope: an
 * agent-scoped caller's prefixes must start with `agent:<one of its agents>:`.
 */
export function authorizePrefixes(context: CallContext, prefixes: Iterable<string>): void {
  const principal = context.principal;
  if (principal === undefined || principal.admin) return;
  for (const prefix of prefixes) {
    const agentId = agentIdFromKey(`${prefix}x`);
    if (agentId === undefined || !principal.agents.has(agentId)) deny(`watcher prefix "${prefix}"`, principal);
  }
}

/**
 * Reads the paging request of a listing by agent (ListSessions, ListUpstreamLinks): an agent filter needs
 * that agent's scope, no filter needs admin. Returns the filter, page size and position after which to start.
 */
export function agentPageFromRequest(
  context: CallContext,
  request: { agentId: string; pageSize: number; pageToken: string },
  what: string,
): { agentId: string | undefined; limit: number; after: SessionId | undefined } {
  const agentId = agentFilterFromRequest(context, request.agentId, what);
  const limit = pageSizeFromRequest("page_size", request.pageSize);
  const position = decodePageToken("page_token", request.pageToken, 2);
  const after = position === undefined ? undefined : { namespace: context.namespace, agentId: position[0]!, key: position[1]! };
  return { agentId, limit, after };
}

/** The agent a listing is filtered by (`agent_id`), `undefined` for all: that agent's scope, or admin for all. */
export function agentFilterFromRequest(context: CallContext, rawAgentId: string, what: string): string | undefined {
  const agentId = rawAgentId.trim() === "" ? undefined : normalizeAgentId("agent_id", rawAgentId);
  if (agentId === undefined) requireAdmin(context, `${what} across agents`);
  else authorizeAgents(context, [agentId]);
  return agentId;
}

/** Refuses unless the caller is an admin (or auth is off). */
export function requireAdmin(context: CallContext, what: string): void {
  const principal = context.principal;
  if (principal !== undefined && !principal.admin) deny(what, principal);
}
