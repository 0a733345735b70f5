import { ServiceError } from "../errors.js";
import type { Principal } from "../model/principal.js";
import { agentIdOfKey, defaultAgentId } from "../model/session-key.js";
import type { CallContext } from "../rpc/service-adapter.js";

function deny(what: string, principal: Principal): never {
  throw new ServiceError("PERMISSION_DENIED", `${what} is outside the scope of token "${principal.name}"`);
}

/** Refuses unless the caller may act for every agent in `agentIds` (always true with auth off or for admins). */
export function authorizeAgents(context: CallContext, agentIds: Iterable<string>): void {
  const principal = context.principal;
  if (principal === undefined || principal.admin) return;
  for (const agentId of agentIds) if (!principal.agents.has(agentId)) deny(`agent "${agentId}"`, principal);
}

/** Refuses unless the caller may act for the agent a key belongs to (bare keys belong to `main`). */
export function authorizeKeys(context: CallContext, keys: Iterable<string>): void {
  authorizeAgents(context, [...keys].map((key) => agentIdOfKey(key) ?? defaultAgentId));
}

/**
 * Refuses watcher key prefixes that could match watchers of agents outside the caller's scope: an
 * agent-scoped caller's prefixes must start with `agent:<one of its agents>:`.
 */
export function authorizePrefixes(context: CallContext, prefixes: Iterable<string>): void {
  const principal = context.principal;
  if (principal === undefined || principal.admin) return;
  for (const prefix of prefixes) {
    const agentId = agentIdOfKey(`${prefix}x`);
    if (agentId === undefined || !principal.agents.has(agentId)) deny(`watcher prefix "${prefix}"`, principal);
  }
}

/** Refuses unless the caller is an admin (or auth is off). */
export function requireAdmin(context: CallContext, what: string): void {
  const principal = context.principal;
  if (principal !== undefined && !principal.admin) deny(what, principal);
}
