/**
 * The rules of SPEC §5, §6 and §12 for cursors: what an event, a series of acknowledgements or a watch does
 * to the cursors of a target, as pure functions over the rows a backend has read. A backend reads what a
 * rule needs, calls it, and writes what it returns, inside its transaction; it decides nothing itself.
 */
import { applyAck, applyMaterialEvent, isPending, seedCursor } from "./cursor-machine.js";
import { effectFromKind, isExtraMaterialKind, type EventFields } from "./event.js";
import type { AckInput, AckOutcome, AppendInput, CursorRecord, PairChange, WatchRequest } from "./records.js";
import { isAgentQualified, type SessionId } from "./session-key.js";

/**
 * True when a session may be watched (SPEC §2): only agent-qualified sessions take part in watching. A bare
 * key (`global`, `main`) is never a target: a notice could not say which agent's session changed.
 */
export function isWatchable(target: SessionId): boolean {
  return isAgentQualified(target.key);
}

/** Why `watcherKey` may not watch `target` (SPEC §2, §5.2): the reason `Watch` answers, or `undefined`. */
export function watchRefusal(watcherKey: string, target: SessionId): string | undefined {
  if (!isAgentQualified(watcherKey)) return "watcher is not an agent-qualified session key (agent:<agentId>:<rest>)";
  if (!isWatchable(target)) return "target is a bare key: only agent-qualified sessions (agent:<agentId>:<rest>) are watched";
  if (isSessionItself(watcherKey, target)) return "a session cannot watch itself";
  return undefined;
}

/**
 * True when a cursor's notice is to be delivered: it is pending and its target may be watched. A cursor on
 * a bare target left by an earlier version is inert: no notice, and nothing changes it until it expires.
 */
export function hasLiveNotice(cursor: CursorRecord): boolean {
  return isPending(cursor) && isWatchable(cursor.target);
}

/** True when `watcherKey` is the session itself: agent-qualified keys carry their agent id. */
export function isSessionItself(watcherKey: string, session: SessionId): boolean {
  return watcherKey === session.key && watcherKey.startsWith(`agent:${session.agentId}:`);
}

/** The watchers an append names, less the session itself (a session never watches itself). */
export function watchersNamedBy(input: AppendInput): string[] {
  return input.notifyWatcherKeys.filter((key) => !isSessionItself(key, input.session));
}

/** Cursor rows to write, and the pairs whose pending notice they opened, changed or closed. */
export interface CursorEffects {
  cursorWrites: CursorRecord[];
  pairChanges: PairChange[];
  noticesOpened: number;
}

/**
 * The cursor effects of a new event (SPEC §5, §12). `cursorsOnTarget` must hold every cursor on the event's
 * session. A spawn seeds each named watcher's cursor at the event (closing a notice it had pending, and
 * making an ambient pair explicit); a notifying kind concerns the named watchers and every cursor holder,
 * except the actor itself: `M` moves to the event and a notice opens where none is pending. A ledger-only
 * kind touches nothing, except the explicit cursors that name it among their extra material kinds, which
 * it concerns as a notifying kind would. A cursor keeps its provenance; one made here is explicit. An
 * event on a bare-key session touches no cursor.
 */
export function cursorEffectsFromEvent(
  event: Pick<EventFields, "sequence" | "kind" | "actorId">,
  input: AppendInput,
  cursorsOnTarget: readonly CursorRecord[],
): CursorEffects {
  const target = input.session;
  const effects: CursorEffects = { cursorWrites: [], pairChanges: [], noticesOpened: 0 };
  // An event on a bare-key session is logged and versioned, and moves no cursor (SPEC §2).
  if (!isWatchable(target)) return effects;
  const notify = (watcherKey: string, cursor: CursorRecord | undefined): void => {
    if (event.actorId === watcherKey) return; // a watcher is never told about what it did itself
    const next = applyMaterialEvent(cursor, event.sequence);
    effects.cursorWrites.push({
      watcherKey,
      target,
      ...next.cursor,
      updatedAtMs: input.nowMs,
      provenance: cursor?.provenance ?? "explicit",
      extraKinds: cursor?.extraKinds ?? [],
    });
    if (next.opened) {
      effects.pairChanges.push({ watcherKey, target });
      effects.noticesOpened++;
    }
  };
  const kind = event.kind;
  const effect = effectFromKind(kind);
  switch (effect) {
    case "ledger":
      if (!isExtraMaterialKind(kind)) break;
      for (const cursor of cursorsOnTarget) {
        if (cursor.provenance === "explicit" && cursor.extraKinds.includes(kind)) notify(cursor.watcherKey, cursor);
      }
      break;
    case "seed": {
      const existing = new Map(cursorsOnTarget.map((cursor) => [cursor.watcherKey, cursor]));
      for (const watcherKey of new Set(watchersNamedBy(input))) {
        const previous = existing.get(watcherKey);
        effects.cursorWrites.push({
          watcherKey,
          target,
          ...seedCursor(event.sequence),
          updatedAtMs: input.nowMs,
          provenance: "explicit",
          extraKinds: previous?.extraKinds ?? [],
        });
        if (previous !== undefined && isPending(previous)) effects.pairChanges.push({ watcherKey, target });
      }
      break;
    }
    case "notify": {
      const concerned = new Map<string, CursorRecord | undefined>();
      for (const cursor of cursorsOnTarget) concerned.set(cursor.watcherKey, cursor);
      for (const watcherKey of watchersNamedBy(input)) if (!concerned.has(watcherKey)) concerned.set(watcherKey, undefined);
      for (const [watcherKey, cursor] of concerned) notify(watcherKey, cursor);
      break;
    }
    default: {
      const never: never = effect;
      throw new Error(`unknown kind effect ${String(never)}`);
    }
  }
  return effects;
}

/** The identity of a pair, for maps. */
export function pairKey(watcherKey: string, target: SessionId): string {
  return `${target.namespace}\u0000${watcherKey}\u0000${target.agentId}\u0000${target.key}`;
}

/** What a series of acknowledgements does: one outcome per ack, the rows to write and the pairs changed. */
export interface AckEffects {
  outcomes: AckOutcome[];
  cursorWrites: CursorRecord[];
  pairChanges: PairChange[];
}

/**
 * Applies acknowledgements in order (SPEC §6). `cursorOf` gives each named pair's cursor as read before
 * the first ack; an ack sees what earlier acks of the same call did. A stale ack changes nothing; a
 * matching one moves `L` and may reopen one notice. Each changed pair is written once, with its last state.
 */
export function applyAcks(
  acks: readonly AckInput[],
  cursorOf: (watcherKey: string, target: SessionId) => CursorRecord | undefined,
  nowMs: number,
): AckEffects {
  const current = new Map<string, CursorRecord | undefined>();
  const changed = new Map<string, PairChange>();
  const outcomes = acks.map((ack): AckOutcome => {
    const key = pairKey(ack.watcherKey, ack.target);
    const cursor = current.has(key) ? current.get(key) : cursorOf(ack.watcherKey, ack.target);
    current.set(key, cursor);
    if (cursor === undefined) return { acknowledged: false, reopened: false };
    // A cursor on a bare target is inert: an ack changes nothing (SPEC §2).
    if (!isWatchable(cursor.target)) return { acknowledged: false, reopened: false, cursor };
    const step = applyAck(cursor, ack.notifiedVersion, ack.reconciledThrough);
    if (!step.acknowledged) return { acknowledged: false, reopened: false, cursor };
    const next: CursorRecord = { ...cursor, ...step.cursor, updatedAtMs: nowMs };
    current.set(key, next);
    changed.set(key, { watcherKey: ack.watcherKey, target: ack.target });
    return { acknowledged: true, reopened: step.reopened, cursor: next };
  });
  return {
    outcomes,
    cursorWrites: [...changed.keys()].map((key) => current.get(key)!),
    pairChanges: [...changed.values()],
  };
}

/** What a watch does: the cursor after it, how to store it, and the pair if its notice changed. */
export interface WatchEffect {
  cursor: CursorRecord;
  /** `put`: write the whole cursor; `touch`: only refresh its lifetime; `none`: write nothing. */
  write: "put" | "touch" | "none";
  pairChanges: PairChange[];
}

/**
 * A watch (SPEC §5.2, §12.2, §12.3). A new cursor starts at the target's current version, with the
 * provenance and extra kinds asked for. On an existing pair: an explicit watch keeps the marks, makes an
 * ambient pair explicit (its pending notice wakes from then on: the pair changed) and sets the extra kinds
 * (a new set replaces the old), or, when nothing else changes, only refreshes the lifetime; an ambient
 * watch writes nothing, never downgrading an explicit pair.
 */
export function watchCursor(
  watcherKey: string,
  target: SessionId,
  existing: CursorRecord | undefined,
  targetVersion: number,
  nowMs: number,
  request: WatchRequest = { provenance: "explicit", extraKinds: [] },
): WatchEffect {
  const refusal = watchRefusal(watcherKey, target);
  if (refusal !== undefined) throw new Error(refusal);
  if (existing === undefined) {
    const cursor: CursorRecord = {
      watcherKey,
      target,
      ...seedCursor(targetVersion),
      updatedAtMs: nowMs,
      provenance: request.provenance,
      extraKinds: request.provenance === "explicit" ? request.extraKinds : [],
    };
    return { cursor, write: "put", pairChanges: [] };
  }
  if (request.provenance === "ambient") return { cursor: existing, write: "none", pairChanges: [] };
  const upgraded = existing.provenance === "ambient";
  const sameKinds = existing.extraKinds.length === request.extraKinds.length && existing.extraKinds.every((k, i) => k === request.extraKinds[i]);
  const cursor: CursorRecord = { ...existing, updatedAtMs: nowMs, provenance: "explicit", extraKinds: request.extraKinds };
  if (!upgraded && sameKinds) return { cursor, write: "touch", pairChanges: [] };
  return { cursor, write: "put", pairChanges: upgraded && isPending(existing) ? [{ watcherKey, target }] : [] };
}

/** The pairs whose pending notice closes when these cursors are removed: the pending ones. */
export function pairChangesFromRemoved(removed: readonly CursorRecord[]): PairChange[] {
  return removed.filter((cursor) => isPending(cursor)).map(({ watcherKey, target }) => ({ watcherKey, target }));
}
