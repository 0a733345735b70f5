import { performance } from "node:perf_hooks";
import type { PairChange } from "../../domain/records.js";
import type { CommitObserver, WriteResult } from "../store.js";
import type { StorageTracker } from "../storage-tracker.js";
import type { ClockTables, StatusChanges } from "./clock-tables.js";
import { DatabaseUnreachableError, type PostgresDatabase } from "./connection.js";
import { WriteBatch, type BatchTables, type WriteHints } from "./write-batch.js";

/** A write of the PostgreSQL store: reads and writes rows through its batch, decides with the domain rules. */
export type BatchWrite<T> = (batch: WriteBatch) => Promise<WriteResult<T>>;

interface QueuedWrite {
  write: BatchWrite<unknown>;
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
export class GroupCommit {
  private queued: QueuedWrite[] = [];
  private flushing = Promise.resolve();

  constructor(
    private readonly db: PostgresDatabase,
    private readonly tables: BatchTables & { clock: ClockTables },
    private readonly own: OwnChanges,
    private readonly nowMs: () => number,
    private readonly storage: StorageTracker,
    private readonly commits: CommitObserver | undefined,
    private readonly answerBudgetMs = 1900,
  ) {}

  /**
   * Queues a write; settles after its transaction commits (or rejects with its own error). `hints` name
   * the rows it will read, so that the batch reads them in one round trip with the lock.
   */
  enqueue<T>(write: BatchWrite<T>, hints?: WriteHints): Promise<T> {
    if (!this.db.isReachable) return Promise.reject(new DatabaseUnreachableError("the database is unreachable"));
    return new Promise((resolve, reject) => {
      const queued = { write: write as BatchWrite<unknown>, hints, queuedAtMs: performance.now(), resolve: resolve as (value: unknown) => void, reject };
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
        const hints = writes.flatMap((queued) => (queued.hints === undefined ? [] : [queued.hints]));
        const batch = await WriteBatch.open(tx, this.tables, this.tables.clock.lock(tx), hints);
        const results: unknown[] = [];
        const changes: PairChange[] = [];
        for (const { write } of writes) {
          const result = await write(batch);
          results.push(result.value);
          changes.push(...result.changes);
        }
        status = batch.statusChanges;
        const { clock } = this.tables;
        const changeSeq = clock.hasFeedRows(changes, status) ? batch.clock.changeSeq + 1 : batch.clock.changeSeq;
        changeNumber = changeSeq;
        if (changeSeq !== batch.clock.changeSeq) {
          settleOwn = this.own.reserve(changeSeq);
          for (const statement of clock.recordChanges(changeSeq, changes, status, this.nowMs())) batch.send(statement);
        }
        if (batch.lastSequence !== batch.clock.eventSeq || changeSeq !== batch.clock.changeSeq) {
          batch.send(clock.update({ eventSeq: batch.lastSequence, changeSeq }));
        }
        batch.flush();
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
