import type Database from "better-sqlite3";
import type { PairChange } from "../domain/records.js";

/** A write's result: its own value, and the pairs whose pending notice it opened, changed or closed. */
export interface WriteResult<T> {
  value: T;
  changes: PairChange[];
}

interface QueuedWrite {
  write: () => WriteResult<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for SQLite: writes queued in the same turn of the event loop share one `BEGIN IMMEDIATE`
 * transaction, each inside its own savepoint, so one refused write never affects another and the commit
 * is paid once per batch. Each write's promise settles after the commit; the pair changes of the batch
 * are then handed to `announce`, once.
 */
export class GroupCommit {
  private queued: QueuedWrite[] = [];
  private readonly savepoint;
  private readonly batchTx;

  constructor(
    private readonly db: Database.Database,
    private readonly announce: (changes: readonly PairChange[]) => void,
    /** Told the outcome of every write: `undefined` when it committed, else its error. */
    private readonly observe: (error: unknown) => void,
  ) {
    // Called inside batchTx, a transaction function runs as a savepoint: a failing write rolls back alone.
    this.savepoint = db.transaction((write: () => WriteResult<unknown>) => write());
    this.batchTx = db.transaction((writes: readonly QueuedWrite[]) =>
      writes.map((queued): WriteResult<unknown> | { error: unknown } => {
        try {
          return this.savepoint(queued.write);
        } catch (error) {
          // Some failures (SQLITE_FULL, I/O errors) make SQLite roll back the whole transaction: then no
          // write of this batch is stored, and all of them must fail.
          if (!this.db.inTransaction) throw error;
          return { error };
        }
      }),
    );
  }

  /** Queues a write (run synchronously inside the batch's transaction); settles after its commit. */
  enqueue<T>(write: () => WriteResult<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.queued.push({ write, resolve: resolve as (value: unknown) => void, reject });
      if (this.queued.length === 1) setImmediate(() => this.flush());
    });
  }

  /** Commits every queued write now, in one transaction, and settles each one's promise. */
  flush(): void {
    const batch = this.queued;
    if (batch.length === 0) return;
    this.queued = [];
    let results: (WriteResult<unknown> | { error: unknown })[];
    try {
      results = this.batchTx.immediate(batch);
    } catch (error) {
      for (const queued of batch) {
        this.observe(error);
        queued.reject(error);
      }
      return;
    }
    const changes: PairChange[] = [];
    results.forEach((result, i) => {
      if ("error" in result) {
        this.observe(result.error);
        return batch[i]!.reject(result.error);
      }
      this.observe(undefined);
      changes.push(...result.changes);
      batch[i]!.resolve(result.value);
    });
    this.announce(changes);
  }
}
