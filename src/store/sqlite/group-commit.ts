import type Database from "better-sqlite3";
import type { PairChange } from "../../domain/records.js";
import { performance } from "node:perf_hooks";
import type { CommitObserver, WriteResult } from "../store.js";


/** The longest a batch waits for held writes to be let go (the checkpointer's last copy of a long log). */
const heldWriteMaxMs = 50;

/** Passed by every write transaction: see store/sqlite/checkpointer. */
export interface WriteGate {
  /** True when the write may begin and holds the gate (then `endWrite` after it); false while it is held. */
  tryBeginWrite(): boolean;
  endWrite(): void;
}

const openGate: WriteGate = { tryBeginWrite: () => true, endWrite: () => undefined };

interface QueuedWrite {
  write: () => WriteResult<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for SQLite: writes queued in the same turn of the event loop share one `BEGIN IMMEDIATE`
 * transaction, so the commit is paid once per batch. Should any write of the batch throw, the whole batch
 * rolls back and each write runs again alone, in its own transaction: one refused write never affects
 * another, without a savepoint per write on the common path. Each write's promise settles after its
 * commit; the pair changes of what committed are then handed to `announce`, once.
 */
export class GroupCommit {
  private queued: QueuedWrite[] = [];
  /** When the oldest queued write arrived (performance.now()). */
  private oldestQueuedAt = 0;
  private readonly batchTx;
  private readonly aloneTx;

  constructor(
    db: Database.Database,
    private readonly announce: (changes: readonly PairChange[]) => void,
    /** Told the outcome of every write: `undefined` when it committed, else its error. */
    private readonly observe: (error: unknown) => void,
    /** Told how long each committed batch took, and how long its oldest write waited. */
    private readonly commits?: CommitObserver,
    /**
     * The gate every write transaction passes (store/sqlite/checkpointer: the worker holds it for a moment
     * to start a long log over): a batch that finds it held waits, asynchronously, `heldWriteMaxMs` at most.
     */
    private readonly gate: WriteGate = openGate,
  ) {
    this.batchTx = db.transaction((writes: readonly QueuedWrite[]) => writes.map((queued) => queued.write()));
    this.aloneTx = db.transaction((write: () => WriteResult<unknown>) => write());
  }

  /** Queues a write (run synchronously inside the batch's transaction); settles after its commit. */
  enqueue<T>(write: () => WriteResult<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.queued.push({ write, resolve: resolve as (value: unknown) => void, reject });
      if (this.queued.length === 1) {
        this.oldestQueuedAt = performance.now();
        setImmediate(() => this.flushUnlessHeld());
      }
    });
  }

  /** Commits the queued writes, or tries again in a millisecond while the gate is held (not for longer than the most). */
  private flushUnlessHeld(): void {
    const passed = this.gate.tryBeginWrite();
    if (!passed && performance.now() - this.oldestQueuedAt < heldWriteMaxMs) {
      setTimeout(() => this.flushUnlessHeld(), 1);
      return;
    }
    try {
      this.flush();
    } finally {
      if (passed) this.gate.endWrite();
    }
  }

  /** Commits every queued write now and settles each one's promise. */
  flush(): void {
    const batch = this.queued;
    if (batch.length === 0) return;
    this.queued = [];
    let results: (WriteResult<unknown> | { error: unknown })[];
    const began = performance.now();
    try {
      results = this.batchTx.immediate(batch);
      this.commits?.committed((performance.now() - began) / 1000, batch.length, (began - this.oldestQueuedAt) / 1000);
    } catch {
      // Nothing of the batch is stored: find out, write by write, which ones fail.
      results = batch.map((queued) => {
        try {
          return this.aloneTx.immediate(queued.write);
        } catch (error) {
          return { error };
        }
      });
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
