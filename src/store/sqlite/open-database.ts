import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { migrations } from "./migrations.js";

import type { Durability } from "../store.js";

/** Thrown when another process already owns the database file. */
export class DatabaseInUseError extends Error {
  constructor(path: string, options?: { cause?: unknown }) {
    super(`database ${path} is in use by another process (is another sessionstate server running on it?)`, options);
    this.name = "DatabaseInUseError";
  }
}

const busyTimeoutMs = 5000;

/**
 * The serving connection's automatic checkpoint, in pages: only a bound on the log's growth (about 256 MiB
 * of 4 KiB pages), since a worker thread checkpoints (store/sqlite/checkpointer). Until issue 25 it was
 * 1,000 pages, run on the serving thread inside the commit that crossed it.
 */
const walBoundPages = 65_536;

/**
 * The serving connection's page cache by default: 32 MiB. The working set of serving calls (heads, the
 * cursors of targets being written, the newest events and the indexes above them) fits; the rest of the
 * file is read through the operating system's cache, so memory does not grow with the database.
 */
export const defaultCacheBytes = 32 * 1024 * 1024;

/** An open database and the lock that makes this process its only server. Close both (`close`). */
export interface OpenedDatabase {
  db: Database.Database;
  /** Closes the database, then gives up the lock. */
  close(): void;
}

/**
 * Opens (creating if needed) the database at `path`, takes sole ownership of it, sets every pragma
 * explicitly and migrates the schema. Throws `DatabaseInUseError` when another process holds the file.
 *
 * Ownership is an exclusive lock on a companion file, `<path>.lock` (a SQLite database held in exclusive
 * locking mode): the OS drops it if the process dies, so a restart after a crash is never blocked, and
 * the database itself stays in normal locking mode, so a second connection of this process (the
 * checkpointer's) can open it.
 */
export function openDatabase(path: string, durability: Durability, cacheBytes = defaultCacheBytes): OpenedDatabase {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const lock = path === ":memory:" ? undefined : takeOwnership(path);
  let db: Database.Database | undefined;
  try {
    db = new Database(path);
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${durability === "full" ? "FULL" : "NORMAL"}`);
    db.pragma("foreign_keys = ON");
    db.pragma(`wal_autocheckpoint = ${walBoundPages}`);
    // A negative cache_size is KiB: the page cache's bound, whatever the size of the database.
    db.pragma(`cache_size = ${-Math.max(64, Math.floor(cacheBytes / 1024))}`);
    migrate(db);
    const opened = db;
    return {
      db: opened,
      close: () => {
        if (opened.open) opened.close();
        if (lock?.open === true) lock.close();
      },
    };
  } catch (err) {
    db?.close();
    lock?.close();
    throw err;
  }
}

/**
 * Takes the lock on `<path>.lock`, without waiting: another owner will not let go. Exclusive locking
 * mode keeps it until the connection closes.
 */
function takeOwnership(path: string): Database.Database {
  const lock = new Database(`${path}.lock`);
  try {
    lock.pragma("busy_timeout = 0");
    lock.pragma("locking_mode = EXCLUSIVE");
    lock.exec("BEGIN EXCLUSIVE; COMMIT");
    return lock;
  } catch (err) {
    lock.close();
    if (isBusy(err)) throw new DatabaseInUseError(path, { cause: err });
    throw err;
  }
}

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED";
}

/**
 * Brings the schema to the newest version, all pending steps in one transaction. Foreign keys are off
 * while it runs (steps rebuild tables that others refer to, as SQLite's ALTER TABLE documentation
 * prescribes) and checked before it commits.
 */
function migrate(db: Database.Database): void {
  const current = db.pragma("user_version", { simple: true }) as number;
  if (current > migrations.length) {
    throw new Error(`database schema version ${current} is newer than this program knows (${migrations.length})`);
  }
  if (current === migrations.length) return;
  db.pragma("foreign_keys = OFF");
  try {
    db.transaction(() => {
      for (const migration of migrations.slice(current)) {
        db.exec(migration.sql);
        migration.fill?.(db);
      }
      const broken = db.pragma("foreign_key_check") as unknown[];
      if (broken.length > 0) throw new Error(`the schema migration left ${broken.length} rows referring to nothing`);
      db.pragma(`user_version = ${migrations.length}`);
    }).immediate();
  } finally {
    db.pragma("foreign_keys = ON");
  }
}
