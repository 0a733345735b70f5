/**
 * WAL checkpoints off the serving thread (issue 25): a worker thread with its own connection to the
 * database copies the write-ahead log into the database file every `intervalMs`, passively (it never
 * waits for, or blocks, the serving connection's writes). The serving connection's own automatic
 * checkpoint stays on only as a bound on the log's growth, should this worker fall behind or stop.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** The worker's code: CommonJS, so it needs no loader in development or after the build alike. */
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("busy_timeout = 0");
let timer;
const checkpoint = () => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
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

export class Checkpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  /** Starts checkpointing the database at `path` every `intervalMs`; `onFailure` hears a failed checkpoint. */
  constructor(path: string, intervalMs: number, onFailure: (code: string) => void) {
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    this.worker = new Worker(workerSource, { eval: true, workerData: { driver, path, intervalMs } });
    this.worker.on("message", (message: { failed?: string }) => {
      if (message.failed !== undefined) onFailure(message.failed);
    });
    this.worker.on("error", (err) => onFailure(String(err)));
    this.exited = new Promise((resolve) => this.worker.once("exit", () => resolve()));
    // It never keeps the process alive by itself: the store stops it when it closes.
    this.worker.unref();
  }

  /** Stops the worker after the checkpoint it is in (if any) and closes its connection. */
  async stop(): Promise<void> {
    // Waiting for it to end must keep the process alive until it has.
    this.worker.ref();
    this.worker.postMessage("stop");
    await this.exited;
  }
}
