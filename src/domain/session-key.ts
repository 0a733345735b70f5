import { invalidArgument } from "../errors.js";

/** The agent a bare key belongs to when the caller names none. */
export const defaultAgentId = "main";

/** Longest session key, in UTF-8 bytes. */
export const maxKeyBytes = 512;
/** Longest agent id, in UTF-8 bytes. */
export const maxAgentIdBytes = 128;

/** A normalised session identity: both parts trimmed and lower-cased. */
export interface SessionId {
  readonly agentId: string;
  readonly key: string;
}

// C0 controls, DEL and C1 controls.
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
  if (key.startsWith("agent:") && agentIdOfKey(key) === undefined) {
    throw invalidArgument(field, "an agent-qualified key must have the form agent:<agentId>:<rest>");
  }
  return key;
}

/**
 * The agent id of a normalised agent-qualified key (`agent:<agentId>:<rest>`, every part non-empty), or
 * `undefined` for a bare key.
 */
export function agentIdOfKey(key: string): string | undefined {
  if (!key.startsWith("agent:")) return undefined;
  const second = key.indexOf(":", 6);
  if (second <= 6 || second === key.length - 1) return undefined;
  return key.slice(6, second);
}

/** True when a normalised key is agent-qualified, and so may be a watcher. */
export function isAgentQualified(key: string): boolean {
  return agentIdOfKey(key) !== undefined;
}

/** True for nested watchers (`agent:<id>:subagent:...`): their notices do not wake the session. */
export function isNestedWatcher(key: string): boolean {
  const agentId = agentIdOfKey(key);
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
export function resolveSessionId(field: string, rawKey: string, rawAgentId: string): SessionId {
  const key = normalizeKey(`${field}.key`, rawKey);
  const given = rawAgentId.trim() === "" ? undefined : normalizeAgentId(`${field}.agent_id`, rawAgentId);
  const fromKey = agentIdOfKey(key);
  if (fromKey !== undefined) {
    if (given !== undefined && given !== fromKey) {
      throw invalidArgument(`${field}.agent_id`, `"${given}" does not match the key's agent "${fromKey}"`);
    }
    return { agentId: fromKey, key };
  }
  return { agentId: given ?? defaultAgentId, key };
}

/** The identity of an agent-qualified watcher key, or `undefined` for a bare key. */
export function watcherIdOfKey(key: string): SessionId | undefined {
  const agentId = agentIdOfKey(key);
  return agentId === undefined ? undefined : { agentId, key };
}
