/**
 * What an append does (SPEC §3, §5): whether it needs its target's cursors read, whether the
 * `only_if_watched` gate stops it, the event it records and the plan a backend writes. Pure.
 */
import { effectFromKind, isExtraMaterialKind, type EventEncoder, type EventFields, type StoredEvent } from "./event.js";
import { cursorEffectsFromEvent, isWatchable, watchersNamedBy } from "./cursor-rules.js";
import type { AppendInput, AppendOutcome, CursorRecord, PairChange } from "./records.js";

/**
 * True when an append needs the cursors on its session to be decided: every kind that moves cursors (the
 * ledger kinds a watcher may name among its extra kinds included), and any `only_if_watched` append. Any
 * other ledger-only append without the gate needs no read, and neither does an append to a bare-key
 * session, which moves no cursor.
 */
export function appendNeedsTargetCursors(input: AppendInput): boolean {
  if (!isWatchable(input.session)) return false;
  return input.onlyIfWatched || effectFromKind(input.kind) !== "ledger" || isExtraMaterialKind(input.kind);
}

/** The fields of the event an append records, once the backend has taken its sequence. */
export function eventFromAppend(input: AppendInput, sequence: number): EventFields {
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
 * gate, names no watcher, and no cursor targets its session. No one listens to a bare-key session (SPEC
 * §2): the gate always holds there.
 */
export function isAppendGated(input: AppendInput, cursorsOnTarget: readonly CursorRecord[]): boolean {
  if (!input.onlyIfWatched) return false;
  return !isWatchable(input.session) || (watchersNamedBy(input).length === 0 && cursorsOnTarget.length === 0);
}

/** What an append's plan needs read: the retained event holding its dedupe key, and its target's cursors. */
export interface AppendReads {
  /** The event already holding the append's dedupe key, with its session's version now; absent when none. */
  duplicate?: { event: StoredEvent; stateVersion: number } | undefined;
  /** Every cursor on the append's session (empty when `appendNeedsTargetCursors` is false). */
  cursorsOnTarget: readonly CursorRecord[];
}

/**
 * An append's plan: answer with the event already recorded under its dedupe key, answer that the gate
 * held (the backend adds the session's version), or record `event` and write `cursorWrites`.
 */
export type AppendPlan =
  | { action: "deduplicated"; outcome: AppendOutcome & { recorded: true } }
  | { action: "gated" }
  | { action: "record"; event: StoredEvent; cursorWrites: CursorRecord[]; outcome: AppendOutcome & { recorded: true }; changes: PairChange[] };

/**
 * Plans an append (SPEC §3, §5): a dedupe hit answers with the recorded event; the `only_if_watched` gate
 * may stop it; otherwise the event takes the next sequence (`takeSequence` is called only then, so a gated
 * or deduplicated append never consumes one) and its cursor effects follow.
 */
export function planAppend(input: AppendInput, reads: AppendReads, takeSequence: () => number, encode: EventEncoder): AppendPlan {
  if (reads.duplicate !== undefined) {
    const { event, stateVersion } = reads.duplicate;
    return { action: "deduplicated", outcome: { recorded: true, deduplicated: true, event, stateVersion, noticesOpened: 0 } };
  }
  if (isAppendGated(input, reads.cursorsOnTarget)) return { action: "gated" };
  const fields = eventFromAppend(input, takeSequence());
  const event: StoredEvent = { ...fields, wire: encode(fields) };
  const effects = cursorEffectsFromEvent(event, input, reads.cursorsOnTarget);
  return {
    action: "record",
    event,
    cursorWrites: effects.cursorWrites,
    outcome: { recorded: true, deduplicated: false, event, stateVersion: event.sequence, noticesOpened: effects.noticesOpened },
    changes: effects.pairChanges,
  };
}
