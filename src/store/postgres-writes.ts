import type { Sql, TransactionSql, PendingQuery, Row } from "postgres";
import type { PairChange } from "../domain/records.js";
import type { WriteResult } from "./group-commit.js";

/**
 * What a write sees inside a PostgreSQL write transaction: the transaction, the global clock (the clock
 * row is locked, so the sequences it hands out commit in order), and `send` for statements whose
 * results the write does not need: they are pipelined behind the reads, on the same connection, and any
 * failure surfaces when the transaction ends.
 */
export class PgWriteContext {
  private readonly sent: Promise<unknown>[] = [];

  constructor(
    readonly tx: TransactionSql,
    private eventSeq: number,
  ) {}

  /** The next event sequence of the global counter. */
  nextSequence(): number {
    return ++this.eventSeq;
  }

  /** The highest sequence handed out so far (the clock's new value). */
  get lastSequence(): number {
    return this.eventSeq;
  }

  /** Sends a statement without waiting for it. */
  send(query: PendingQuery<Row[]>): void {
    const running = query.execute();
    // Observed here so a failure never goes unhandled; awaited (and rethrown) by `settle`.
    running.catch(() => undefined);
    this.sent.push(running);
  }

  /** Waits for every statement sent; throws the first failure. */
  async settle(): Promise<void> {
    await Promise.all(this.sent.splice(0));
  }
}

/** A write of the PostgreSQL store: reads and writes rows through the context, decides with the domain rules. */
export type PgWrite<T> = (ctx: PgWriteContext) => Promise<WriteResult<T>>;

interface QueuedWrite {
  write: PgWrite<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The most writes one transaction takes, so one transaction never holds the clock for long. */
export const maxWritesPerTransaction = 200;

/**
 * Group commit on PostgreSQL (SPEC §11): writes queued in the same turn of the event loop share one
 * transaction that starts by locking the clock row, takes its sequences from it, records the pairs it
 * changed in `pair_changes` under one new change number, wakes every replica's listener with one
 * `pg_notify`, and updates the clock before COMMIT. So commit order is sequence order for every reader.
 * There is no savepoint per write: refusals are values decided by the domain rules, and should the
 * transaction fail anyway, each write is run again alone so one bad write never fails the others.
 * After a commit each write's promise settles and its pair changes go to `announce` (the local fast path).
 */
export class PgGroupCommit {
  private queued: QueuedWrite[] = [];
  private flushing = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    private readonly notifyChannel: string,
    private readonly announce: (changes: readonly PairChange[], changeSeq: number) => void,
    private readonly nowMs: () => number,
  ) {}

  /** Queues a write; settles after its transaction commits (or rejects with its own error). */
  enqueue<T>(write: PgWrite<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.queued.push({ write: write as PgWrite<unknown>, resolve: resolve as (value: unknown) => void, reject });
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
    const batch = this.queued.splice(0, maxWritesPerTransaction);
    if (this.queued.length > 0) setImmediate(() => this.scheduleFlush());
    if (batch.length === 0) return;
    try {
      const { results, changes, changeSeq } = await this.commit(batch.map((queued) => queued.write));
      batch.forEach((queued, i) => queued.resolve(results[i]));
      this.announce(changes, changeSeq);
      return;
    } catch (error) {
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
    }
    // Nothing of the batch is stored: find out, write by write, which ones fail.
    for (const queued of batch) {
      try {
        const { results, changes, changeSeq } = await this.commit([queued.write]);
        queued.resolve(results[0]);
        this.announce(changes, changeSeq);
      } catch (error) {
        queued.reject(error);
      }
    }
  }

  /** Runs writes in one transaction under the clock lock; returns their values and the pairs they changed. */
  private async commit(writes: readonly PgWrite<unknown>[]): Promise<{ results: unknown[]; changes: PairChange[]; changeSeq: number }> {
    return this.sql.begin(async (tx) => {
      const [clock] = await tx<{ event_seq: number; change_seq: number }[]>`
        SELECT event_seq, change_seq FROM clock WHERE id = 1 FOR UPDATE`;
      const ctx = new PgWriteContext(tx, clock!.event_seq);
      const results: unknown[] = [];
      const changes: PairChange[] = [];
      for (const write of writes) {
        const result = await write(ctx);
        results.push(result.value);
        changes.push(...result.changes);
      }
      const changeSeq = changes.length > 0 ? clock!.change_seq + 1 : clock!.change_seq;
      if (changes.length > 0) {
        ctx.send(tx`
          INSERT INTO pair_changes (change_seq, watcher_key, target_agent_id, target_key, at_ms)
          SELECT ${changeSeq}, w, a, k, ${this.nowMs()}
          FROM unnest(${changes.map((c) => c.watcherKey)}::text[], ${changes.map((c) => c.target.agentId)}::text[],
                      ${changes.map((c) => c.target.key)}::text[]) AS t (w, a, k)`);
        ctx.send(tx`SELECT pg_notify(${this.notifyChannel}, ${String(changeSeq)})`);
      }
      if (ctx.lastSequence !== clock!.event_seq || changeSeq !== clock!.change_seq) {
        ctx.send(tx`UPDATE clock SET event_seq = ${ctx.lastSequence}, change_seq = ${changeSeq} WHERE id = 1`);
      }
      await ctx.settle();
      return { results, changes, changeSeq };
    });
  }
}
