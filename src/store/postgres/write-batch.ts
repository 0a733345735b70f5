import type { StoredEvent } from "../../domain/event.js";
import type { CursorRecord } from "../../domain/records.js";
import type { SessionId } from "../../domain/session-key.js";
import { pairKey } from "../../domain/cursor-rules.js";
import type { ClockRow, StatusChanges } from "./clock-tables.js";
import type { PgTransaction } from "./connection.js";
import type { CursorTables } from "./cursor-tables.js";
import { dedupeIdFromKey, type DedupedEvent, type EventInsert, type EventTables } from "./event-tables.js";
import type { SqlQuery } from "./pg-sql.js";
import { cursorFromRow, type CursorRow } from "../rows.js";

/** The rows a write will read, named before the transaction so that the batch reads them all at once. */
export interface WriteHints {
  /** Dedupe keys with their namespaces (each namespace has its own), as `dedupeIdFromKey` makes them. */
  dedupeKeys?: readonly string[];
  targets?: readonly SessionId[];
}

/** The tables a write batch reads and writes through. */
export interface BatchTables {
  events: EventTables;
  cursors: CursorTables;
}

/** The identity of a session, for maps. */
function sessionKey(session: SessionId): string {
  return `${session.namespace}\u0000${session.agentId}\u0000${session.key}`;
}

/**
 * What the writes of one PostgreSQL write transaction see and leave (SPEC §11): the transaction, the clock it
 * locked (the event sequences it hands out commit in order), the rows the batch read up front for all its
 * writes at once (every hinted dedupe key and target) and kept in step with what its writes do, and the
 * new events and cursor rows, held back and written together, one statement for each, when the batch is
 * told to `flush`. A read that must see what is held back flushes first; one that cannot (a link, a run
 * flag) does not. A removal of events or cursors goes through the batch, which forgets what it held of
 * the rows removed, so no later write of the batch reads one back.
 */
export class WriteBatch {
  private eventSeq: number;
  /** Hinted dedupe ids: the event holding each, or null for none. */
  private readonly dedupe: Map<string, DedupedEvent | null>;
  /** Every cursor on each target read (up front or since), as the batch's writes left them. */
  private readonly cursorsByTarget: Map<string, CursorRecord[]>;
  /** The highest sequence this batch appended to each session. */
  private readonly appended = new Map<string, number>();
  private heldEvents: EventInsert[] = [];
  private heldCursors = new Map<string, CursorRecord>();
  private readonly statusChanged = new Map<string, SessionId>();
  private everyStatusChanged = false;

  private constructor(
    readonly tx: PgTransaction,
    private readonly tables: BatchTables,
    /** The clock as locked. */
    readonly clock: ClockRow,
    dedupe: Map<string, DedupedEvent | null>,
    cursorsByTarget: Map<string, CursorRecord[]>,
  ) {
    this.eventSeq = clock.eventSeq;
    this.dedupe = dedupe;
    this.cursorsByTarget = cursorsByTarget;
  }

  /**
   * Opens the batch of a transaction: `locking` is the clock's lock, sent first; the hinted rows are read in
   * statements sent with it, so the lock and the reads cost one round trip.
   */
  static async open(tx: PgTransaction, tables: BatchTables, locking: Promise<ClockRow>, hints: readonly WriteHints[]): Promise<WriteBatch> {
    const ids = [...new Set(hints.flatMap((hint) => hint.dedupeKeys ?? []))];
    const targets = [...new Map(hints.flatMap((hint) => hint.targets ?? []).map((target) => [sessionKey(target), target])).values()];
    // All under way at once: awaited together, so a failed transaction never leaves one rejection unhandled.
    const [clock, found, cursors] = await Promise.all([locking, tables.events.byDedupeIds(tx, ids), tables.cursors.ofTargets(tx, targets)]);
    const dedupe = new Map<string, DedupedEvent | null>(ids.map((id) => [id, found.get(id) ?? null]));
    const byTarget = new Map<string, CursorRecord[]>(targets.map((target) => [sessionKey(target), []]));
    for (const cursor of cursors) byTarget.get(sessionKey(cursor.target))!.push(cursor);
    return new WriteBatch(tx, tables, clock, dedupe, byTarget);
  }

  // ---- sequences ----

  /** The next event sequence of the global counter. */
  nextSequence(): number {
    return ++this.eventSeq;
  }

  /** The highest sequence handed out so far (the clock's new value). */
  get lastSequence(): number {
    return this.eventSeq;
  }

  // ---- events ----

  /**
   * The event of `namespace` holding `dedupeKey` (as read up front, or read now), with its session's version
   * as this batch leaves it; `undefined` when none.
   */
  async dedupedEvent(namespace: string, dedupeKey: string): Promise<DedupedEvent | undefined> {
    const id = dedupeIdFromKey(namespace, dedupeKey);
    let found = this.dedupe.get(id);
    if (found === undefined) {
      this.flush();
      found = (await this.tables.events.byDedupeKey(this.tx, namespace, dedupeKey)) ?? null;
    }
    if (found === null) return undefined;
    // An append earlier in this batch may have moved the session's version since the read.
    const { event } = found;
    const appended = this.appended.get(sessionKey({ namespace: event.namespace, agentId: event.agentId, key: event.sessionKey })) ?? 0;
    return { event, stateVersion: Math.max(found.stateVersion, appended) };
  }

  /** A session's state version, with this batch's appends. */
  versionOf(session: SessionId): Promise<number> {
    this.flush();
    return this.tables.events.versionOf(this.tx, session);
  }

  /** Holds back the insert of an event (and the move of its session's head) until the batch flushes. */
  appendEvent(event: StoredEvent, dedupeKey: string | undefined, nowMs: number): void {
    this.heldEvents.push({ event, dedupeKey, nowMs });
    const session = { namespace: event.namespace, agentId: event.agentId, key: event.sessionKey };
    this.appended.set(sessionKey(session), event.sequence);
    if (dedupeKey !== undefined) this.dedupe.set(dedupeIdFromKey(event.namespace, dedupeKey), { event, stateVersion: event.sequence });
    this.sessionChanged(session);
  }

  /** Runs a removal of events (`statement` answers how many as `n`); the events read by dedupe key are forgotten. */
  async removeEvents(statement: SqlQuery): Promise<number> {
    this.flush();
    const [row] = await this.tx.query<{ n: number }>(statement);
    this.dedupe.clear();
    return row!.n;
  }

  // ---- cursors ----

  /** Every cursor on `target`, as this batch's writes left them. */
  async cursorsOn(target: SessionId): Promise<CursorRecord[]> {
    const key = sessionKey(target);
    let cursors = this.cursorsByTarget.get(key);
    if (cursors === undefined) {
      this.flush();
      cursors = await this.tables.cursors.ofTargets(this.tx, [target]);
      this.cursorsByTarget.set(key, cursors);
    }
    return cursors.slice();
  }

  /** The cursors of some pairs that have one, as this batch's writes left them, each once. */
  async cursorsOf(pairs: readonly { watcherKey: string; target: SessionId }[]): Promise<CursorRecord[]> {
    if (!pairs.every((pair) => this.cursorsByTarget.has(sessionKey(pair.target)))) {
      this.flush();
      return this.tables.cursors.ofPairs(this.tx, pairs);
    }
    const found = new Map<string, CursorRecord>();
    for (const { watcherKey, target } of pairs) {
      const cursor = this.cursorsByTarget.get(sessionKey(target))!.find((c) => c.watcherKey === watcherKey);
      if (cursor !== undefined) found.set(pairKey(watcherKey, target), cursor);
    }
    return [...found.values()];
  }

  /** Holds back the writes of cursor rows (the last state of each pair wins) until the batch flushes. */
  putCursors(cursors: readonly CursorRecord[]): void {
    for (const cursor of cursors) {
      this.heldCursors.set(pairKey(cursor.watcherKey, cursor.target), cursor);
      const onTarget = this.cursorsByTarget.get(sessionKey(cursor.target));
      if (onTarget === undefined) continue;
      const i = onTarget.findIndex((c) => c.watcherKey === cursor.watcherKey);
      if (i < 0) onTarget.push(cursor);
      else onTarget[i] = cursor;
    }
  }

  /**
   * Runs a removal of cursors (`statement` answers the rows it removed) and forgets them: a later write of
   * the batch reads their targets again.
   */
  async removeCursors(statement: SqlQuery): Promise<CursorRecord[]> {
    this.flush();
    const removed = (await this.tx.query<CursorRow>(statement)).map(cursorFromRow);
    for (const cursor of removed) this.cursorsByTarget.delete(sessionKey(cursor.target));
    return removed;
  }

  // ---- everything else ----

  /** Reads rows that this batch's held-back writes do not touch. */
  query<T extends object = Record<string, unknown>>(statement: SqlQuery): Promise<T[]> {
    return this.tx.query<T>(statement);
  }

  /** Sends a statement without waiting for it: the transaction awaits it before it commits. */
  send(statement: SqlQuery): void {
    void this.tx.send(statement);
  }

  /** Sends a statement and resolves with the number of rows it touched. */
  async count(statement: SqlQuery): Promise<number> {
    return (await this.tx.send(statement)).rowCount ?? 0;
  }

  /** Sends what is held back: every event in one statement (heads first), every cursor row in another. */
  flush(): void {
    if (this.heldEvents.length > 0) {
      this.send(this.tables.events.insert(this.heldEvents));
      this.heldEvents = [];
    }
    if (this.heldCursors.size > 0) {
      this.send(this.tables.cursors.put([...this.heldCursors.values()]));
      this.heldCursors = new Map();
    }
  }

  // ---- what the batch changed ----

  /** Records that this batch changes what SessionStatus answers about `session` (its head or its events). */
  sessionChanged(session: SessionId): void {
    this.statusChanged.set(sessionKey(session), session);
  }

  /** Records that this batch may change what SessionStatus answers about any session (pruning). */
  everySessionChanged(): void {
    this.everyStatusChanged = true;
  }

  /** The sessions whose answers this batch changes. */
  get statusChanges(): StatusChanges {
    return { sessions: [...this.statusChanged.values()], all: this.everyStatusChanged };
  }
}
