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
 * Opens (creating if needed) the database at `path`, takes sole ownership of it, sets every pragma
 * explicitly and migrates the schema. Throws `DatabaseInUseError` when another process holds the file.
 * The caller owns the returned handle and must close it.
 */
export function openDatabase(path: string, durability: Durability): Database.Database {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  try {
    // Exclusive locking makes this process the file's only user until it closes the handle; the OS
    // drops the lock if the process dies, so a restart after a crash is never blocked. Checking
    // ownership must not wait: another owner will not let go.
    db.pragma("busy_timeout = 0");
    db.pragma("locking_mode = EXCLUSIVE");
    try {
      db.pragma("journal_mode = WAL");
      db.exec("BEGIN EXCLUSIVE; COMMIT");
    } catch (err) {
      if (isBusy(err)) throw new DatabaseInUseError(path, { cause: err });
      throw err;
    }
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    db.pragma(`synchronous = ${durability === "full" ? "FULL" : "NORMAL"}`);
    db.pragma("foreign_keys = ON");
    db.pragma("wal_autocheckpoint = 1000");
    db.pragma("cache_size = -65536");
    migrate(db);
    return db;
  } catch (err) {
    db.close();
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
