/**
 * WAL checkpoints off the serving thread (issue 25): a worker thread with its own connection to the
 * database copies the write-ahead log into the database file every `intervalMs`, passively (it never
 * waits for, or blocks, the serving connection's writes). The serving connection's own automatic
 * checkpoint stays on only as a bound on the log's growth, should this worker fall behind or stop.
 *
 * The log starts over only when a write begins after a checkpoint that copied all of it with no write
 * landing during it (its copy and its sync). Under steady writes that seldom happens, and a log at the
 * bound is copied by every commit of the serving connection. So the worker checkpoints often once the log
 * is long (`longLogFrames`), and shares its length after each checkpoint: a long series of writes (a
 * retention pass) waits until it is all copied, and its next write starts it over. Should the log grow to
 * twice that length all the same (writes that never pause), the worker, once a checkpoint has copied it all,
 * takes the write gate between two of the serving connection's transactions (`tryBeginWrite` /
 * `endWrite` around each of them) for one more checkpoint, of what landed during the last one, and a write
 * of its own (`wal_restarts`), which starts the log over; meanwhile the group commit holds its batches
 * (asynchronously: the event loop goes on; for a sync of the database file, some milliseconds, up to 50
 * under a busy disk) (issue 33).
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * Slots of the memory shared with the worker: the log's frames, those copied, checkpoints made (written by
 * the worker), the write gate (`gateOpen`, `gateWriting`: the serving connection writes, `gateHeld`: the
 * worker holds writes), one the worker sleeps on, and 1 while the worker wants the gate (no new write
 * takes it meanwhile).
 */
const inLogSlot = 0;
const copiedSlot = 1;
const checkpointsSlot = 2;
const gateSlot = 3;
const sleepSlot = 4;
const wantSlot = 5;
const gateOpen = 0;
const gateWriting = 1;
const gateHeld = 2;

/** The worker's code: CommonJS, so it needs no loader in development or after the build alike. */
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("busy_timeout = 0");
const shared = new Int32Array(workerData.shared);
const restart = db.prepare("UPDATE wal_restarts SET count = count + 1 WHERE id = 1");
let timer;
const checkpoint = () => {
  try {
    let [result] = db.pragma("wal_checkpoint(PASSIVE)");
    if (result.log >= 2 * workerData.longLogFrames && result.checkpointed === result.log) {
      // All copied, and twice as long as a log should grow (writes never paused long enough for it to
      // start over by itself): between two of the serving connection's transactions, hold its writes for
      // one more checkpoint, of what landed during this one, and a write of its own.
      const giveUpAt = Date.now() + workerData.gateWaitMs;
      Atomics.store(shared, ${wantSlot}, 1);
      while (Atomics.compareExchange(shared, ${gateSlot}, ${gateOpen}, ${gateHeld}) !== ${gateOpen} && Date.now() < giveUpAt) {
        Atomics.wait(shared, ${sleepSlot}, 0, 0.2);
      }
      Atomics.store(shared, ${wantSlot}, 0);
      if (Atomics.load(shared, ${gateSlot}) === ${gateHeld}) {
        try {
          [result] = db.pragma("wal_checkpoint(PASSIVE)");
          // All copied with no write landing: a write begun now starts the log over. A busy one (a write
          // that could not wait for the gate, or a read of the serving connection's in the log) fails or
          // appends, and the next long checkpoint tries again.
          if (result.checkpointed === result.log) {
            restart.run();
            [result] = db.pragma("wal_checkpoint(PASSIVE)");
          }
        } catch {
          // Tried again at the next checkpoint.
        } finally {
          Atomics.store(shared, ${gateSlot}, ${gateOpen});
        }
      }
    }
    Atomics.store(shared, ${inLogSlot}, result.log);
    Atomics.store(shared, ${copiedSlot}, result.checkpointed);
    Atomics.add(shared, ${checkpointsSlot}, 1);
    // While the log is long, often, to keep what is left to copy small.
    timer = setTimeout(checkpoint, result.log >= workerData.longLogFrames ? workerData.longLogIntervalMs : workerData.intervalMs);
    return;
  } catch (err) {
    parentPort.postMessage({ failed: String((err && err.code) || err) });
  }
  timer = setTimeout(checkpoint, workerData.intervalMs);
};
parentPort.on("message", () => {
  clearTimeout(timer);
  db.close();
  parentPort.close();
});
timer = setTimeout(checkpoint, workerData.intervalMs);
`;

/**
 * A log this long (4 KiB pages: 64 MiB) is to start over: the worker then checkpoints every
 * `longLogIntervalMs`, and holds writes for a moment once it has copied it all (see the module comment).
 */
export const defaultLongLogFrames = 16_384;
const longLogIntervalMs = 10;
/** The longest the worker waits for a moment between two of the serving connection's transactions. */
const gateWaitMs = 20;

/** Checkpoints a SQLite database's write-ahead log on a worker thread; see the module comment. */
export class Checkpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;
  /** What the worker shares (see the slots above); written by the worker only. */
  private readonly shared = new Int32Array(new SharedArrayBuffer(24));

  /**
   * Starts checkpointing the database at `path` every `intervalMs` (more often while the log is long);
   * `onFailure` hears a failed checkpoint.
   */
  constructor(
    path: string,
    intervalMs: number,
    onFailure: (code: string) => void,
    /** The log's length at which it is to start over (tests shorten it). */
    readonly longLogFrames = defaultLongLogFrames,
  ) {
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    const workerData = { driver, path, intervalMs, longLogFrames, longLogIntervalMs, gateWaitMs, shared: this.shared.buffer };
    this.worker = new Worker(workerSource, { eval: true, workerData });
    this.worker.on("message", (message: { failed?: string }) => {
      if (message.failed !== undefined) onFailure(message.failed);
    });
    this.worker.on("error", (err) => onFailure(String(err)));
    this.exited = new Promise((resolve) => this.worker.once("exit", () => resolve()));
    // It never keeps the process alive by itself: the store stops it when it closes.
    this.worker.unref();
  }

  /**
   * The write-ahead log at the worker's last checkpoint, in frames (pages) since it last started over: how
   * many it held, and how many of them were not yet copied back (-1s when it was busy); and which
   * checkpoint that was (0 before the first).
   */
  get logFrames(): { inLog: number; notCopied: number; checkpoint: number } {
    const inLog = Atomics.load(this.shared, inLogSlot);
    return { inLog, notCopied: inLog - Atomics.load(this.shared, copiedSlot), checkpoint: Atomics.load(this.shared, checkpointsSlot) };
  }

  /**
   * Before a write transaction of the serving connection: true when it holds the gate (call `endWrite`
   * after its commit or rollback), false while the worker wants or holds it (a batch may wait; a write
   * that cannot wait goes ahead without the gate, and only spoils this attempt to start the log over).
   */
  tryBeginWrite(): boolean {
    if (Atomics.load(this.shared, wantSlot) === 1) return false;
    return Atomics.compareExchange(this.shared, gateSlot, gateOpen, gateWriting) === gateOpen;
  }

  /** After a write transaction that `tryBeginWrite` let through. */
  endWrite(): void {
    Atomics.store(this.shared, gateSlot, gateOpen);
  }

  /** Stops the worker after the checkpoint it is in (if any) and closes its connection. */
  async stop(): Promise<void> {
    // Waiting for it to end must keep the process alive until it has.
    this.worker.ref();
    this.worker.postMessage("stop");
    await this.exited;
  }
}
