/**
 * The decisions of every write of SPEC §5, §6, §8 and §9, as pure functions over the rows a backend has
 * read. A backend reads what a rule needs, calls it, and writes what it returns, inside its transaction;
 * it decides nothing itself. So every backend applies the same rules, and they are tested here, once.
 */
import { applyAck, applyMaterialEvent, isPending, seedCursor } from "./cursor-machine.js";
import { effectOfKind, isExtraMaterialKind, type EventFields } from "./event.js";
import type {
  AckInput,
  AckOutcome,
  AdoptInput,
  AppendInput,
  CursorRecord,
  LinkRecord,
  PairChange,
  ScanCommit,
  WatchRequest,
} from "./records.js";
import { isRunActive, type RunFlag } from "./session-activity.js";
import type { SessionId } from "./session-key.js";

/** True when `watcherKey` is the session itself: agent-qualified keys carry their agent id. */
export function isWatcherOf(watcherKey: string, session: SessionId): boolean {
  return watcherKey === session.key && watcherKey.startsWith(`agent:${session.agentId}:`);
}

/** The watchers an append names, less the session itself (a session never watches itself). */
export function namedWatchersOf(input: AppendInput): string[] {
  return input.notifyWatcherKeys.filter((key) => !isWatcherOf(key, input.session));
}

/**
 * True when an append needs the cursors on its session to be decided: every kind that moves cursors (the
 * ledger kinds a watcher may name among its extra kinds included), and any `only_if_watched` append. Any
 * other ledger-only append without the gate needs no read.
 */
export function appendNeedsTargetCursors(input: AppendInput): boolean {
  return input.onlyIfWatched || effectOfKind(input.kind) !== "ledger" || isExtraMaterialKind(input.kind);
}

/** The fields of the event an append records, once the backend has taken its sequence. */
export function eventOfAppend(input: AppendInput, sequence: number): EventFields {
  const event: EventFields = {
    sequence,
    namespace: input.session.namespace,
    agentId: input.session.agentId,
    sessionKey: input.session.key,
    kind: input.kind,
    actorType: input.actorType,
    summary: input.summary,
    occurredAtMs: input.occurredAtMs,
    payload: { ...input.payload },
  };
  if (input.actorId !== undefined) event.actorId = input.actorId;
  if (input.runId !== undefined) event.runId = input.runId;
  return event;
}

/**
 * The `only_if_watched` gate (SPEC §3): true when nothing may be written because the append asks for the
 * gate, names no watcher, and no cursor targets its session.
 */
export function isAppendGated(input: AppendInput, cursorsOnTarget: readonly CursorRecord[]): boolean {
  return input.onlyIfWatched && namedWatchersOf(input).length === 0 && cursorsOnTarget.length === 0;
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
 * it concerns as a notifying kind would. A cursor keeps its provenance; one made here is explicit.
 */
export function cursorEffectsOfEvent(
  event: Pick<EventFields, "sequence" | "kind" | "actorId">,
  input: AppendInput,
  cursorsOnTarget: readonly CursorRecord[],
): CursorEffects {
  const target = input.session;
  const effects: CursorEffects = { cursorWrites: [], pairChanges: [], noticesOpened: 0 };
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
  const effect = effectOfKind(kind);
  switch (effect) {
    case "ledger":
      if (!isExtraMaterialKind(kind)) break;
      for (const cursor of cursorsOnTarget) {
        if (cursor.provenance === "explicit" && cursor.extraKinds.includes(kind)) notify(cursor.watcherKey, cursor);
      }
      break;
    case "seed": {
      const existing = new Map(cursorsOnTarget.map((cursor) => [cursor.watcherKey, cursor]));
      for (const watcherKey of new Set(namedWatchersOf(input))) {
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
      for (const watcherKey of namedWatchersOf(input)) if (!concerned.has(watcherKey)) concerned.set(watcherKey, undefined);
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
export function pairKeyOf(watcherKey: string, target: SessionId): string {
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
    const key = pairKeyOf(ack.watcherKey, ack.target);
    const cursor = current.has(key) ? current.get(key) : cursorOf(ack.watcherKey, ack.target);
    current.set(key, cursor);
    if (cursor === undefined) return { acknowledged: false, reopened: false };
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
  if (isWatcherOf(watcherKey, target)) throw new Error("a session cannot watch itself");
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
export function pairChangesOfRemoved(removed: readonly CursorRecord[]): PairChange[] {
  return removed.filter((cursor) => isPending(cursor)).map(({ watcherKey, target }) => ({ watcherKey, target }));
}

/**
 * The link an adoption leaves (SPEC §8): the same source (and thread) keeps its marker, miss streak and
 * last scan time; a different source starts afresh from the new source's current end.
 */
export function linkOfAdoption(existing: LinkRecord | undefined, wanted: NonNullable<AdoptInput["link"]>): LinkRecord {
  const sameSource = existing !== undefined && existing.source === wanted.source && existing.threadId === wanted.threadId;
  if (!sameSource) return { ...wanted, missedChecks: 0 };
  const link: LinkRecord = { ...wanted, marker: existing.marker, missedChecks: existing.missedChecks };
  if (existing.lastScannedAtMs !== undefined) link.lastScannedAtMs = existing.lastScannedAtMs;
  return link;
}

/**
 * True when a scan's result may be committed (SPEC §8, §12.4): the link is as the scan read it, and, when
 * the commit says how many runs had started, no run is active on the session and none started since.
 * Otherwise the session was re-adopted, reset or deleted, another scan won, or a run wrote turns of its own.
 */
export function isScanCommittable(current: LinkRecord | undefined, scanned: LinkRecord, commit: ScanCommit, runFlag: RunFlag | undefined): boolean {
  if (!isScanCurrent(current, scanned)) return false;
  if (commit.runStartsBefore === undefined) return true;
  return !isRunActive(runFlag, commit.nowMs) && (runFlag?.starts ?? 0) === commit.runStartsBefore;
}

/**
 * The update time a link gets when its session is reset (SPEC §12.4): later than any it had, so a scan
 * that read it before the reset no longer matches it and is discarded.
 */
export function linkUpdatedAtAfterReset(link: LinkRecord, nowMs: number): number {
  return Math.max(link.updatedAtMs + 1, nowMs);
}

/**
 * True when a scan's result may be applied: the link still has the source, thread, marker, miss streak
 * and update time it had when the scan began. Otherwise someone re-adopted or another scan won.
 */
export function isScanCurrent(current: LinkRecord | undefined, scanned: LinkRecord): boolean {
  return (
    current !== undefined &&
    current.source === scanned.source &&
    current.threadId === scanned.threadId &&
    current.marker === scanned.marker &&
    current.missedChecks === scanned.missedChecks &&
    current.updatedAtMs === scanned.updatedAtMs
  );
}
