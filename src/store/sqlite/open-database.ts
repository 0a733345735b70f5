import { closeSync, existsSync, mkdirSync, openSync, readSync, statSync, unlinkSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
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

/** Thrown when the database file cannot be opened, saying which path and why, in a person's words. */
export class DatabaseOpenError extends Error {
  constructor(path: string, why: string, options?: { cause?: unknown }) {
    super(`cannot open the database ${path}: ${why}`, options);
    this.name = "DatabaseOpenError";
  }
}

/** The first bytes of every SQLite database file. */
const sqliteHeader = Buffer.from("SQLite format 3\0", "latin1");

/**
 * What stands in the way of opening `path` as this server's database, before anything is written: a
 * folder where a file should be, a file that is not a SQLite database, a folder that cannot be made.
 * Creates the missing folders above it level by level (Node's recursive mkdir spins for ever under /proc).
 */
function prepareDatabasePath(path: string): void {
  // A path through a file is not there (ENOTDIR, as Node 26 says it too): the walk up finds the file.
  const statOf = (at: string): ReturnType<typeof statSync> => {
    try {
      return statSync(at, { throwIfNoEntry: false });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOTDIR") return undefined;
      throw new DatabaseOpenError(path, `it cannot be looked at (${code ?? String(err)})`, { cause: err });
    }
  };
  const found = statOf(path);
  if (found?.isDirectory() === true) throw new DatabaseOpenError(path, `it is a folder: name a file in it (for example --db ${join(path, "sessionstate.db")})`);
  if (found !== undefined && found.size > 0 && !startsWithSqliteHeader(path)) {
    throw new DatabaseOpenError(path, "it is not a SQLite database (nothing was changed): name a new file, or a sessionstate database");
  }
  const missing: string[] = [];
  for (let dir = resolve(dirname(path)); ; ) {
    const stat = statOf(dir);
    if (stat !== undefined) {
      if (!stat.isDirectory()) throw new DatabaseOpenError(path, `${dir} is a file, not a folder`);
      break;
    }
    missing.unshift(dir);
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EEXIST") throw new DatabaseOpenError(path, `the folder ${dir} cannot be created (${code ?? String(err)})`, { cause: err });
    }
  }
}

function startsWithSqliteHeader(path: string): boolean {
  const head = Buffer.alloc(sqliteHeader.length);
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    return readSync(fd, head, 0, head.length, 0) === head.length && head.equals(sqliteHeader);
  } catch (err) {
    throw new DatabaseOpenError(path, `it cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A SQLite error while opening `path`, in a person's words. */
function openFailure(path: string, err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "SQLITE_NOTADB") return new DatabaseOpenError(path, "it is not a SQLite database (nothing was changed): name a new file, or a sessionstate database", { cause: err });
  if (code === "SQLITE_CANTOPEN" || code === "SQLITE_READONLY" || code === "SQLITE_PERM") {
    return new DatabaseOpenError(path, `${(err as Error).message} (check that the folder exists and this user may write there)`, { cause: err });
  }
  return err;
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
  if (path !== ":memory:") prepareDatabasePath(path);
  // A start that fails leaves no lock file it made behind.
  const lockPath = `${path}.lock`;
  const lockWasThere = path === ":memory:" || existsSync(lockPath);
  let lock: Database.Database | undefined;
  try {
    lock = path === ":memory:" ? undefined : takeOwnership(path);
  } catch (err) {
    if (!lockWasThere && !(err instanceof DatabaseInUseError) && existsSync(lockPath)) unlinkSync(lockPath);
    throw err instanceof DatabaseInUseError ? err : openFailure(path, err);
  }
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
    if (!lockWasThere && existsSync(lockPath)) unlinkSync(lockPath);
    throw openFailure(path, err);
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
