import { performance } from "node:perf_hooks";
import type { StoredEvent } from "../../domain/event.js";
import type { CursorRecord, PairChange } from "../../domain/records.js";
import type { SessionId } from "../../domain/session-key.js";
import { pairKeyOf } from "../../domain/write-rules.js";
import type { CommitObserver, WriteResult } from "../store.js";
import { extraKindsToColumn } from "../rows.js";
import { sql, type SqlQuery } from "./pg-sql.js";
import { DatabaseUnreachableError, type PgTransaction, type PostgresDatabase } from "./postgres-database.js";
import type { StorageTracker } from "../storage-tracker.js";
import { feedRowsOf, type StatusChanges } from "./postgres-feed.js";

/** The rows a write will read, named before the transaction so the batch reads them all at once. */
export interface WriteHints {
  /** Dedupe keys with their namespaces (each namespace has its own), as `dedupeIdOf` makes them. */
  dedupeKeys?: readonly string[];
  targets?: readonly SessionId[];
}

/** An event found by its dedupe key, with its session's state version. */
export interface DedupedEvent {
  event: StoredEvent;
  stateVersion: number;
}

/** The rows a batch read up front, under the clock lock: every hinted dedupe key and target. */
export interface Prefetched {
  /** Hinted keys (`dedupeIdOf`) that hold an event; a hinted key missing here holds none. */
  eventsByDedupeKey: Map<string, DedupedEvent>;
  dedupeKeys: Set<string>;
  /** Every cursor on each hinted target, by `targetKeyOf`. */
  cursorsByTarget: Map<string, CursorRecord[]>;
}

/** A dedupe key within its namespace, for maps and hints: a namespace holds no space, so the first one splits it. */
export function dedupeIdOf(namespace: string, dedupeKey: string): string {
  return `${namespace} ${dedupeKey}`;
}

/** The namespace and dedupe key of a `dedupeIdOf` id. */
export function dedupeKeyOfId(id: string): { namespace: string; dedupeKey: string } {
  const space = id.indexOf(" ");
  return { namespace: id.slice(0, space), dedupeKey: id.slice(space + 1) };
}

/** The identity of a target, for maps. */
export function targetKeyOf(target: SessionId): string {
  return `${target.namespace}\u0000${target.agentId}\u0000${target.key}`;
}

/** An event a batch will insert, with what its row needs besides the event. */
interface DeferredEvent {
  event: StoredEvent;
  dedupeKey: string | undefined;
  nowMs: number;
}

/**
 * What a write sees inside a PostgreSQL write transaction: the transaction, the global clock (the clock
 * row is locked, so the sequences it hands out commit in order), the rows the batch read up front (kept
 * current as the batch's writes change them), and `send` for statements whose results the write does
 * not need: they are pipelined behind the reads, on the same connection, and any failure surfaces when
 * the transaction ends. New events and cursor rows are held back and written together, two statements
 * for the whole batch; any other statement (`tx`) first sends them, so every read sees every write
 * before it.
 */
export class PgWriteContext {
  /** The highest sequence this batch appended to each session. */
  private readonly appended = new Map<string, number>();
  private deferredEvents: DeferredEvent[] = [];
  private deferredCursors = new Map<string, CursorRecord>();
  /** Sessions whose SessionStatus answer this batch changes (every session's, after a prune step). */
  private readonly statusChanged = new Map<string, SessionId>();
  private everyStatusChanged = false;

  constructor(
    private readonly transaction: PgTransaction,
    private eventSeq: number,
    private prefetched: Prefetched = emptyPrefetch(),
  ) {}

  /** The transaction, for any statement: the rows held back so far are sent first. */
  get tx(): PgTransaction {
    this.flushDeferred();
    return this.transaction;
  }

  /** Holds back the insert of an event (and the move of its session's head) until the batch's next statement. */
  deferEvent(event: StoredEvent, dedupeKey: string | undefined, nowMs: number): void {
    this.deferredEvents.push({ event, dedupeKey, nowMs });
    this.sessionChanged({ namespace: event.namespace, agentId: event.agentId, key: event.sessionKey });
  }

  /** Records that this batch changes what SessionStatus answers about `session` (its head or its events). */
  sessionChanged(session: SessionId): void {
    this.statusChanged.set(targetKeyOf(session), session);
  }

  /** Records that this batch may change what SessionStatus answers about any session (pruning). */
  everySessionChanged(): void {
    this.everyStatusChanged = true;
  }

  /** The sessions whose answers this batch changes. */
  get statusChanges(): StatusChanges {
    return { sessions: [...this.statusChanged.values()], all: this.everyStatusChanged };
  }

  /** Holds back the writes of cursor rows (the last state of each pair wins) until the batch's next statement. */
  deferCursors(cursors: readonly CursorRecord[]): void {
    this.noteCursors(cursors);
    for (const cursor of cursors) this.deferredCursors.set(pairKeyOf(cursor.watcherKey, cursor.target), cursor);
  }

  /** Sends what is held back: every event in one statement (heads first), every cursor row in another. */
  flushDeferred(): void {
    if (this.deferredEvents.length > 0) {
      const rows = this.deferredEvents;
      this.deferredEvents = [];
      const column = <T>(pick: (row: DeferredEvent) => T): T[] => rows.map(pick);
      this.send(sql`
        WITH r AS (
          SELECT * FROM unnest(
            ${column((r) => r.event.sequence)}::int8[], ${column((r) => r.event.namespace)}::text[], ${column((r) => r.event.agentId)}::text[],
            ${column((r) => r.event.sessionKey)}::text[], ${column((r) => r.event.kind)}::text[],
            ${column((r) => r.event.actorType)}::text[], ${column((r) => r.event.actorId ?? null)}::text[],
            ${column((r) => r.event.runId ?? null)}::text[], ${column((r) => r.event.summary)}::text[],
            ${column((r) => r.event.occurredAtMs)}::int8[], ${column((r) => r.event.payload.outcome ?? null)}::text[],
            ${column((r) => r.event.payload.channel ?? null)}::text[], ${column((r) => r.event.payload.turns ?? null)}::int8[],
            ${column((r) => r.event.payload.catalogId ?? null)}::text[], ${column((r) => r.event.payload.hostId ?? null)}::text[],
            ${column((r) => r.dedupeKey ?? null)}::text[], ${column((r) => Buffer.from(r.event.wire).toString("hex"))}::text[],
            ${column((r) => r.nowMs)}::int8[]
          ) AS r (sequence, namespace, agent_id, session_key, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
                  channel, turns, catalog_id, host_id, dedupe_key, wire_hex, now_ms)
        ),
        head AS (
          INSERT INTO heads (namespace, agent_id, session_key, state_version, updated_at_ms)
          SELECT namespace, agent_id, session_key, max(sequence), max(now_ms) FROM r GROUP BY namespace, agent_id, session_key
          ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
          SET state_version = greatest(heads.state_version, excluded.state_version), updated_at_ms = excluded.updated_at_ms
          RETURNING session_id, namespace, agent_id, session_key
        )
        INSERT INTO events (sequence, session_id, namespace, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
          channel, turns, catalog_id, host_id, dedupe_key, wire)
        SELECT r.sequence, head.session_id, r.namespace, r.kind, r.actor_type, r.actor_id, r.run_id, r.summary, r.occurred_at_ms,
          r.outcome, r.channel, r.turns, r.catalog_id, r.host_id, r.dedupe_key, decode(r.wire_hex, 'hex')
        FROM r JOIN head ON head.namespace = r.namespace AND head.agent_id = r.agent_id AND head.session_key = r.session_key`);
    }
    if (this.deferredCursors.size > 0) {
      const cursors = [...this.deferredCursors.values()];
      this.deferredCursors = new Map();
      const column = <T>(pick: (c: CursorRecord) => T): T[] => cursors.map(pick);
      this.send(sql`
        INSERT INTO cursors (namespace, watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms,
          provenance, extra_kinds)
        SELECT * FROM unnest(${column((c) => c.target.namespace)}::text[], ${column((c) => c.watcherKey)}::text[],
          ${column((c) => c.target.agentId)}::text[], ${column((c) => c.target.key)}::text[], ${column((c) => c.acked)}::int8[],
          ${column((c) => c.notified)}::int8[], ${column((c) => c.material)}::int8[], ${column((c) => c.updatedAtMs)}::int8[],
          ${column((c) => c.provenance)}::text[], ${column((c) => extraKindsToColumn(c.extraKinds))}::text[])
        ON CONFLICT (namespace, watcher_key, target_agent_id, target_key) DO UPDATE
        SET acked = excluded.acked, notified = excluded.notified, material = excluded.material, updated_at_ms = excluded.updated_at_ms,
            provenance = excluded.provenance, extra_kinds = excluded.extra_kinds`);
    }
  }

  /** Records that this batch appended `sequence` to `session`. */
  noteAppended(session: SessionId, sequence: number): void {
    this.appended.set(targetKeyOf(session), sequence);
  }

  /** The highest sequence this batch appended to `session`; 0 when none. */
  versionAppended(session: SessionId): number {
    return this.appended.get(targetKeyOf(session)) ?? 0;
  }

  /** The event of `namespace` holding `dedupeKey`: `null` when known to be none, `undefined` when not read up front. */
  dedupedEvent(namespace: string, dedupeKey: string): DedupedEvent | null | undefined {
    const id = dedupeIdOf(namespace, dedupeKey);
    if (!this.prefetched.dedupeKeys.has(id)) return undefined;
    return this.prefetched.eventsByDedupeKey.get(id) ?? null;
  }

  /** Every cursor on `target`, when read up front. */
  cursorsOn(target: SessionId): CursorRecord[] | undefined {
    return this.prefetched.cursorsByTarget.get(targetKeyOf(target));
  }

  /** Records an event this batch inserted, so a later write of the batch finds it by its dedupe key. */
  noteEvent(dedupeKey: string | undefined, event: StoredEvent): void {
    if (dedupeKey === undefined) return;
    const id = dedupeIdOf(event.namespace, dedupeKey);
    if (!this.prefetched.dedupeKeys.has(id)) return;
    this.prefetched.eventsByDedupeKey.set(id, { event, stateVersion: event.sequence });
  }

  /** Records cursors this batch wrote, so later writes of the batch read them as written. */
  noteCursors(cursors: readonly CursorRecord[]): void {
    for (const cursor of cursors) {
      const onTarget = this.prefetched.cursorsByTarget.get(targetKeyOf(cursor.target));
      if (onTarget === undefined) continue;
      const i = onTarget.findIndex((c) => c.watcherKey === cursor.watcherKey);
      if (i < 0) onTarget.push(cursor);
      else onTarget[i] = cursor;
    }
  }

  /** Forgets what was read up front (after removals): later writes of the batch read for themselves. */
  forgetPrefetched(): void {
    this.prefetched = emptyPrefetch();
  }

  /** The next event sequence of the global counter. */
  nextSequence(): number {
    return ++this.eventSeq;
  }

  /** The highest sequence handed out so far (the clock's new value). */
  get lastSequence(): number {
    return this.eventSeq;
  }

  /** Sends a statement without waiting for it: the transaction awaits it before it commits. */
  send(query: SqlQuery): void {
    void this.transaction.send(query);
  }
}

function emptyPrefetch(): Prefetched {
  return { eventsByDedupeKey: new Map(), dedupeKeys: new Set(), cursorsByTarget: new Map() };
}

/** A write of the PostgreSQL store: reads and writes rows through the context, decides with the domain rules. */
export type PgWrite<T> = (ctx: PgWriteContext) => Promise<WriteResult<T>>;

/** Reads the hinted rows of a batch (statements sent, not awaited: they pipeline behind the lock). */
export type Prefetch = (tx: PgTransaction, hints: readonly WriteHints[]) => Promise<Prefetched>;

interface QueuedWrite {
  write: PgWrite<unknown>;
  hints: WriteHints | undefined;
  queuedAtMs: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The most writes one transaction takes, so one transaction never holds the clock for long. */
export const maxWritesPerTransaction = 200;
/** Less time than this left to answer a write in is not worth starting its transaction. */
const minTransactionMs = 100;

function slowError(): Error {
  return Object.assign(new Error("too little time left to answer the write in"), { code: "DATABASE_SLOW" });
}

/**
 * How this replica's own commits meet its feed: a transaction that records pair changes reserves its
 * change number before COMMIT is sent, and settles the reservation with whether it announced them itself.
 */
export interface OwnChanges {
  /** Called under the clock lock, before COMMIT; call the function returned once the outcome is known. */
  reserve(changeSeq: number): (announced: boolean) => void;
  /** Pairs this replica committed under `changeNumber`, announced at once (the local fast path). */
  announce(changes: readonly PairChange[], changeNumber: number): void;
  /**
   * Sessions whose answers a commit of this replica changed: told once COMMIT is answered, before any of
   * its writes is and before the feed may skip its change number.
   */
  statusChanged(status: StatusChanges): void;
}

/**
 * Group commit on PostgreSQL (SPEC §11): writes queued in the same turn of the event loop share one
 * transaction that starts by locking the clock row, takes its sequences from it, records the pairs and the
 * sessions it changed in `pair_changes` under one new change number, wakes every replica's listener with one
 * `pg_notify`, and updates the clock before COMMIT. So commit order is sequence order for every reader.
 * There is no savepoint per write: refusals are values decided by the domain rules, and should the
 * transaction fail for a reason of its own (not the database's absence), each write is run again alone so
 * one bad write never fails the others. After a commit each write's promise settles and its pair changes
 * are announced. Every write is answered within `answerBudgetMs` of being queued: a transaction's deadline
 * is what is left of its oldest write's time (at most the database's round trip), a write with too little
 * left is answered UNAVAILABLE unsent, and while the database is unreachable writes are refused at once.
 */
export class PgGroupCommit {
  private queued: QueuedWrite[] = [];
  private flushing = Promise.resolve();

  constructor(
    private readonly db: PostgresDatabase,
    private readonly notifyChannel: string,
    private readonly own: OwnChanges,
    private readonly nowMs: () => number,
    private readonly prefetch: Prefetch,
    private readonly storage: StorageTracker,
    private readonly commits: CommitObserver | undefined,
    private readonly answerBudgetMs = 1900,
  ) {}

  /**
   * Queues a write; settles after its transaction commits (or rejects with its own error). `hints` name
   * the rows it will read, so that the batch reads them in one round trip with the lock.
   */
  enqueue<T>(write: PgWrite<T>, hints?: WriteHints): Promise<T> {
    if (!this.db.isReachable) return Promise.reject(new DatabaseUnreachableError("the database is unreachable"));
    return new Promise((resolve, reject) => {
      const queued = { write: write as PgWrite<unknown>, hints, queuedAtMs: performance.now(), resolve: resolve as (value: unknown) => void, reject };
      this.queued.push(queued);
      if (this.queued.length === 1) setImmediate(() => this.scheduleFlush());
    });
  }

  /** Resolves when every write queued so far has settled. */
  async idle(): Promise<void> {
    while (this.queued.length > 0) {
      this.scheduleFlush();
      await this.flushing;
    }
    await this.flushing;
  }

  private scheduleFlush(): void {
    // One transaction at a time from this replica: a second would only wait for the clock lock while
    // holding a connection, and batches grow while one commits.
    this.flushing = this.flushing.then(() => this.flush());
  }

  private async flush(): Promise<void> {
    const taken = this.queued.splice(0, maxWritesPerTransaction);
    if (this.queued.length > 0) setImmediate(() => this.scheduleFlush());
    // A write is refused unsent while the database is away, or when too little of its time to be answered
    // in is left; the transaction gets what is left of the oldest write's time (at most a round trip's).
    const startedMs = performance.now();
    const batch: QueuedWrite[] = [];
    for (const queued of taken) {
      if (!this.db.isReachable) queued.reject(new DatabaseUnreachableError("the database is unreachable"));
      else if (startedMs - queued.queuedAtMs > this.answerBudgetMs - minTransactionMs) queued.reject(slowError());
      else batch.push(queued);
    }
    if (batch.length === 0) return;
    const deadlineMs = this.answerBudgetMs - (startedMs - batch[0]!.queuedAtMs);
    try {
      const results = await this.commit(batch, deadlineMs);
      this.commits?.committed((performance.now() - startedMs) / 1000, batch.length, (startedMs - batch[0]!.queuedAtMs) / 1000);
      batch.forEach((queued, i) => queued.resolve(results[i]));
      return;
    } catch (error) {
      // Without the database, or with the outcome unknown, running them again alone helps nobody.
      if (batch.length === 1 || error instanceof DatabaseUnreachableError || !this.db.isReachable) {
        for (const queued of batch) queued.reject(error);
        return;
      }
    }
    // Nothing of the batch is stored: find out, write by write, which ones fail.
    for (const queued of batch) {
      try {
        const results = await this.commit([queued], this.answerBudgetMs - (performance.now() - queued.queuedAtMs));
        queued.resolve(results[0]);
      } catch (error) {
        queued.reject(error);
      }
    }
  }

  /**
   * Runs writes in one transaction under the clock lock; returns their values, once the pairs they changed
   * are announced. The lock is held from its statement to COMMIT, and COMMIT is pipelined behind the writes
   * instead of waiting a round trip for them. Should any of them fail, PostgreSQL answers that COMMIT with
   * a rollback, which the transaction reports. The feed may skip the commit's change number only once it
   * is announced: its reservation settles after the announcement.
   */
  private async commit(writes: readonly QueuedWrite[], deadlineMs: number): Promise<unknown[]> {
    let settleOwn: ((announced: boolean) => void) | undefined;
    let status: StatusChanges | undefined;
    let changeNumber = 0;
    try {
      const outcome = await this.db.transaction(async (tx) => {
        // The lock and the batch's reads go out together: one round trip before the writes run.
        const locking = tx.query<{ event_seq: number; change_seq: number }>(sql`SELECT event_seq, change_seq FROM clock WHERE id = 1 FOR UPDATE`);
        const hints = writes.flatMap((queued) => (queued.hints === undefined ? [] : [queued.hints]));
        const reading = this.prefetch(tx, hints);
        const [[clock], prefetched] = await Promise.all([locking, reading]);
        const ctx = new PgWriteContext(tx, clock!.event_seq, prefetched);
        const results: unknown[] = [];
        const changes: PairChange[] = [];
        for (const { write } of writes) {
          const result = await write(ctx);
          results.push(result.value);
          changes.push(...result.changes);
        }
        status = ctx.statusChanges;
        const rows = feedRowsOf(changes, status);
        const changeSeq = rows.n.length > 0 ? clock!.change_seq + 1 : clock!.change_seq;
        changeNumber = changeSeq;
        if (rows.n.length > 0) {
          settleOwn = this.own.reserve(changeSeq);
          ctx.send(sql`
            INSERT INTO pair_changes (change_seq, namespace, watcher_key, target_agent_id, target_key, at_ms)
            SELECT ${changeSeq}, n, w, a, k, ${this.nowMs()}
            FROM unnest(${rows.n}::text[], ${rows.w}::text[], ${rows.a}::text[], ${rows.k}::text[]) AS t (n, w, a, k)`);
          ctx.send(sql`SELECT pg_notify(${this.notifyChannel}, ${String(changeSeq)})`);
        }
        if (ctx.lastSequence !== clock!.event_seq || changeSeq !== clock!.change_seq) {
          ctx.send(sql`UPDATE clock SET event_seq = ${ctx.lastSequence}, change_seq = ${changeSeq} WHERE id = 1`);
        }
        ctx.flushDeferred();
        return { results, changes };
      }, deadlineMs);
      if (status !== undefined) this.own.statusChanged(status);
      if (outcome.changes.length > 0) this.own.announce(outcome.changes, changeNumber);
      settleOwn?.(true);
      this.storage.observe(undefined);
      return outcome.results;
    } catch (error) {
      settleOwn?.(false);
      this.storage.observe(error);
      throw error;
    }
  }
}
