import { topCharacter } from "./pair-order.js";
import { invalidArgument } from "../errors.js";

/** The agent a bare key belongs to when the caller names none. */
export const defaultAgentId = "main";

/** The namespace of a request that names none (SPEC §12.1); existing data was migrated into it. */
export const defaultNamespace = "default";

const namespacePattern = /^[a-z0-9][a-z0-9-]{0,62}$/u;

/** True for a well-formed namespace: `[a-z0-9][a-z0-9-]{0,62}`. */
export function isValidNamespace(name: string): boolean {
  return namespacePattern.test(name);
}

/**
 * A namespace as a request names it: absent or empty is `default`; anything not `[a-z0-9][a-z0-9-]{0,62}`
 * is INVALID_ARGUMENT naming `field` (no case folding: `Team-A` is refused, not taken for `team-a`).
 */
export function normalizeNamespace(field: string, raw: string | undefined): string {
  if (raw === undefined || raw === "") return defaultNamespace;
  if (!isValidNamespace(raw)) throw invalidArgument(field, "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit");
  return raw;
}

/** Longest session key, in UTF-8 bytes. */
export const maxKeyBytes = 512;
/** Longest agent id, in UTF-8 bytes. */
export const maxAgentIdBytes = 128;

/**
 * A normalised session identity: its namespace, and its agent id and key, both trimmed and lower-cased.
 * The same key in two namespaces is two sessions; a watcher and its target are always in one namespace.
 */
export interface SessionId {
  readonly namespace: string;
  readonly agentId: string;
  readonly key: string;
}

// C0 controls, DEL and C1 controls.
// eslint-disable-next-line no-control-regex -- control characters are what this finds
const controlCharacter = /[\u0000-\u001f\u007f-\u009f]/u;

/** True when `text` holds a control character (newlines and tabs included). */
export function hasControlCharacter(text: string): boolean {
  return controlCharacter.test(text);
}

/**
 * Trims, validates and lower-cases a session key. Throws `INVALID_ARGUMENT` naming `field` when the key
 * is empty, longer than 512 bytes, holds a control character, or starts with `agent:` without being a
 * well-formed agent-qualified key.
 */
export function normalizeKey(field: string, raw: string): string {
  const key = raw.trim().toLowerCase();
  if (key.length === 0) throw invalidArgument(field, "must not be empty");
  if (Buffer.byteLength(key, "utf8") > maxKeyBytes) throw invalidArgument(field, `must be at most ${maxKeyBytes} bytes`);
  if (hasControlCharacter(key)) throw invalidArgument(field, "must not contain control characters");
  if (key.startsWith("agent:") && agentIdFromKey(key) === undefined) {
    throw invalidArgument(field, "an agent-qualified key must have the form agent:<agentId>:<rest>");
  }
  return key;
}

/** A key prefix as keys are stored (trimmed, lower-cased); "" for none. INVALID_ARGUMENT naming `field` as for a key. */
export function normalizeKeyPrefix(field: string, raw: string): string {
  const prefix = raw.trim().toLowerCase();
  if (Buffer.byteLength(prefix, "utf8") > maxKeyBytes) throw invalidArgument(field, `must be at most ${maxKeyBytes} bytes`);
  if (hasControlCharacter(prefix)) throw invalidArgument(field, "must not contain control characters");
  return prefix;
}

/**
 * The agent id of a normalised agent-qualified key (`agent:<agentId>:<rest>`, every part non-empty), or
 * `undefined` for a bare key.
 */
export function agentIdFromKey(key: string): string | undefined {
  if (!key.startsWith("agent:")) return undefined;
  const second = key.indexOf(":", 6);
  if (second <= 6 || second === key.length - 1) return undefined;
  return key.slice(6, second);
}

/** True when a normalised key is agent-qualified, and so may be a watcher. */
export function isAgentQualified(key: string): boolean {
  return agentIdFromKey(key) !== undefined;
}

/** True for nested watchers (`agent:<id>:subagent:...`): their notices do not wake the session. */
export function isNestedWatcher(key: string): boolean {
  const agentId = agentIdFromKey(key);
  return agentId !== undefined && key.startsWith("subagent:", 7 + agentId.length);
}

/**
 * Trims, validates and lower-cases an agent id: 1-128 bytes, no control characters, whitespace or colons.
 */
export function normalizeAgentId(field: string, raw: string): string {
  const agentId = raw.trim().toLowerCase();
  if (agentId.length === 0) throw invalidArgument(field, "must not be empty");
  if (Buffer.byteLength(agentId, "utf8") > maxAgentIdBytes) {
    throw invalidArgument(field, `must be at most ${maxAgentIdBytes} bytes`);
  }
  if (hasControlCharacter(agentId) || /[\s:]/u.test(agentId)) {
    throw invalidArgument(field, "must not contain whitespace, colons or control characters");
  }
  return agentId;
}

/**
 * Resolves a (key, agent id) pair into a session identity. An agent-qualified key carries its agent id
 * and a given `agentId` must match it; a bare key belongs to `agentId`, or `main` when none is given.
 * `field` names the SessionRef in error messages (for example `session` or `target`).
 */
export function resolveSessionId(field: string, rawKey: string, rawAgentId: string, namespace: string): SessionId {
  const key = normalizeKey(`${field}.key`, rawKey);
  const given = rawAgentId.trim() === "" ? undefined : normalizeAgentId(`${field}.agent_id`, rawAgentId);
  const fromKey = agentIdFromKey(key);
  if (fromKey !== undefined) {
    if (given !== undefined && given !== fromKey) {
      throw invalidArgument(`${field}.agent_id`, `"${given}" does not match the key's agent "${fromKey}"`);
    }
    return { namespace, agentId: fromKey, key };
  }
  return { namespace, agentId: given ?? defaultAgentId, key };
}

/** The identity of an agent-qualified watcher key in `namespace`, or `undefined` for a bare key. */
export function watcherIdFromKey(key: string, namespace: string): SessionId | undefined {
  const agentId = agentIdFromKey(key);
  return agentId === undefined ? undefined : { namespace, agentId, key };
}

/**
 * Where a page of sessions (or links) ordered by (agent id, key) starts, strictly after: a page of every
 * agent continues after the last (agent id, key); a page of one agent continues after the last key only
 * when that key was this agent's, and starts from the agent's first key otherwise.
 */
export function sessionPageStart(agentId: string | undefined, after: SessionId | undefined): { agentId: string; key: string } {
  if (agentId === undefined) return { agentId: after?.agentId ?? "", key: after?.key ?? "" };
  return { agentId, key: after !== undefined && after.agentId === agentId ? after.key : "" };
}

/**
 * How a page of sessions is ordered (ListSessions): by (agent id, key); by (key, agent id) among the keys
 * with a prefix; or most recently changed first, by (updated at, agent id, key) descending. `after` is the
 * last row of the previous page.
 */
export type SessionOrder =
  | { by: "agent"; after?: SessionId | undefined }
  | { by: "key"; prefix: string; after?: { key: string; agentId: string } | undefined }
  | { by: "recent"; after?: { updatedAtMs: number; agentId: string; key: string } | undefined };

/** The bounds of a page by key: keys from `prefix` through `last`, strictly after (`afterKey`, `afterAgentId`). */
export function keyPageBounds(order: Extract<SessionOrder, { by: "key" }>): { from: string; last: string; afterKey: string; afterAgentId: string } {
  return { from: order.prefix, last: `${order.prefix}${topCharacter}`, afterKey: order.after?.key ?? "", afterAgentId: order.after?.agentId ?? "" };
}

/**
 * Where a page of the most recently changed sessions starts, strictly before (updated at, agent id, key)
 * in descending order. A page of one agent continues only from that agent's own row, as in
 * sessionPageStart; the first page starts above every time.
 */
export function recentPageStart(
  agentId: string | undefined,
  after: { updatedAtMs: number; agentId: string; key: string } | undefined,
): { updatedAtMs: number; agentId: string; key: string } {
  const top = { updatedAtMs: Number.MAX_SAFE_INTEGER, agentId: agentId ?? "", key: "" };
  if (after === undefined || (agentId !== undefined && after.agentId !== agentId)) return top;
  return after;
}
