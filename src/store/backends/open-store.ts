/**
 * Opens the store the configuration names, with its lifecycle and its tuning: the one place that knows
 * the backends apart (SQLite for `--db PATH`, PostgreSQL replicas for a `postgres://` URL), so that the
 * server only ever sees the Store port.
 */
import { resolve } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { encodeStateEvent } from "../../codec/event-codec.js";
import type { Clock } from "../../clock.js";
import type { Logger } from "../../logger.js";
import { PostgresStore } from "../postgres/postgres-store.js";
import { isPostgresUrl, parsePostgresUrl, redactPostgresUrl } from "../postgres/postgres-url.js";
import { SqliteStore } from "../sqlite/sqlite-store.js";
import { startupMistake, storeFaultFromError } from "../store-errors.js";
import type { StorageObserver } from "../storage-tracker.js";
import type { ClaimLedger, CommitObserver, Durability, Store } from "../store.js";

/** What the configuration says about storage. */
export interface StoreSettings {
  /** A SQLite file, or a PostgreSQL URL (`postgres://`, `postgresql://`). */
  dbPath: string;
  /** PostgreSQL only: the schema. */
  dbSchema: string;
  durability: Durability;
  /** PostgreSQL only: this replica's node id. */
  nodeId: string;
  /** SQLite only: the serving connection's page cache. */
  sqliteCacheBytes: number;
}

/** Who hears what the store does. */
export interface StoreObservers {
  clock: Clock;
  log: Logger;
  storage: StorageObserver;
  commits: CommitObserver;
  /** Told once, in a person's words, when the server starts without its database and waits for it. */
  waiting?: (line: string) => void;
}

/** A database the server can never use as configured (a login refused, a database missing, a grant missing): the start stops. */
export class DatabaseSetupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DatabaseSetupError";
  }
}

/** How a backend wants its background work sized. */
export interface StoreTuning {
  /**
   * How long a retention step should take, in ms: within SPEC §4's budget, 5 ms on SQLite (the serving
   * thread waits for a step) and 25 ms on PostgreSQL (a step holds the clock row every replica's writes
   * wait for), aimed lower so that nearly every step stays within it.
   */
  pruneStepTargetMs: number;
}

/**
 * A store's life beside its calls (SPEC §11): whether its database has answered yet (SQLite at once; a
 * PostgreSQL that did not answer is tried again in the background until it does), whether it answers now,
 * the job leases this process holds, and a close within a time.
 */
export interface StoreLifecycle {
  /** True once the database has answered: only then may the store be asked anything. */
  readonly ready: boolean;
  /**
   * Calls `onReady` once the database answers (at once when it has), and `onFatal` when it never will (a
   * schema newer than this program). Keeps trying until then, or until `close`.
   */
  whenReady(onReady: () => void, onFatal: (error: unknown) => void): void;
  /** True while the database answers round trips (always, for a file). */
  readonly reachable: boolean;
  /** Calls `listener` with false when the database stops answering and with true when it answers again. */
  onReachabilityChange(listener: (reachable: boolean) => void): () => void;
  /** Gives up the job leases `holder` holds, so another replica may take its jobs at once (graceful stop). */
  releaseLeases(holder: string): Promise<void>;
  /** Closes the store within about `withinMs`, whatever the database does. */
  close(withinMs: number): Promise<void>;
}

/** An open store, its lifecycle and tuning, and how to name it in the log. */
export interface OpenedStore {
  store: Store;
  lifecycle: StoreLifecycle;
  tuning: StoreTuning;
  /** The file's absolute path, or the URL without its password, and the schema (logs; GetServerInfo for admins). */
  description: string;
  /** Which backend this is (GetServerInfo). */
  backend: "sqlite" | "postgres";
  /** Replicas: the consumer groups' claims every replica sees. Absent on SQLite, where one process holds every claim. */
  claims?: ClaimLedger;
}

/** A PostgreSQL that did not answer is tried again: first after this, doubling up to the most, with jitter. */
const startRetryFirstMs = 100;
const startRetryMostMs = 1000;

/**
 * Opens the store of `settings`: a SQLite file at once; a PostgreSQL schema after one attempt to reach it,
 * so that a database that is there is served from the first call. An unreachable PostgreSQL is not an
 * error here (the lifecycle keeps trying); any other failure to open is thrown (for SQLite: another
 * server owns the file).
 */
export async function openStore(settings: StoreSettings, observers: StoreObservers): Promise<OpenedStore> {
  return isPostgresUrl(settings.dbPath) ? openPostgres(settings, observers) : openSqlite(settings, observers);
}

function openSqlite(settings: StoreSettings, { log, storage, commits }: StoreObservers): OpenedStore {
  // Each kind of checkpoint failure is logged once; the next interval tries again.
  const failures = new Set<string>();
  const checkpointFailed = (code: string): void => {
    if (failures.has(code)) return;
    failures.add(code);
    log.warn({ code }, "a background WAL checkpoint failed; retrying (the log is still bounded)");
  };
  const store = SqliteStore.open(settings.dbPath, settings.durability, encodeStateEvent, {
    storage,
    commits,
    checkpointFailed,
    cacheBytes: settings.sqliteCacheBytes,
  });
  const lifecycle: StoreLifecycle = {
    ready: true,
    whenReady: (onReady) => onReady(),
    reachable: true,
    onReachabilityChange: () => () => undefined,
    // This process owns the file: no other runs its jobs, so it holds no lease.
    releaseLeases: async () => undefined,
    close: () => store.close(),
  };
  return { store, lifecycle, tuning: { pruneStepTargetMs: 3 }, description: settings.dbPath === ":memory:" ? settings.dbPath : resolve(settings.dbPath), backend: "sqlite" };
}

async function openPostgres(settings: StoreSettings, observers: StoreObservers): Promise<OpenedStore> {
  const { clock, log, storage, commits } = observers;
  const store = new PostgresStore({
    target: parsePostgresUrl(settings.dbPath),
    schema: settings.dbSchema,
    durability: settings.durability,
    nodeId: settings.nodeId,
    encodeEvent: encodeStateEvent,
    nowMs: () => clock.nowMs(),
    storage,
    commits,
    // While the database is away health says so once; any other failure of the feed is worth a warning.
    onFeedError: (err) =>
      storeFaultFromError(err) === "unreachable"
        ? log.debug({ err }, "reading other replicas' changes failed; retrying")
        : log.warn({ err }, "reading other replicas' changes failed; retrying"),
  });
  let ready = false;
  let closing = false;
  const where = `${redactPostgresUrl(settings.dbPath)} schema ${settings.dbSchema}`;
  // A mistake no retry can mend stops the start; a database that is away, busy or starting is waited for.
  const setupError = (err: unknown): DatabaseSetupError | undefined => {
    const mistake = startupMistake(err);
    return mistake === undefined ? undefined : new DatabaseSetupError(`cannot use the database ${where}: ${mistake}`, { cause: err });
  };
  try {
    await store.start();
    ready = true;
  } catch (err) {
    const fatal = setupError(err) ?? (storeFaultFromError(err) === undefined ? err : undefined);
    if (fatal !== undefined) {
      await store.close();
      throw fatal;
    }
    log.error({ err }, "database not answering: listening, not serving, and retrying");
    observers.waiting?.(`waiting for the database ${where} (${(err as Error).message}): listening, not serving until it answers`);
  }
  const lifecycle: StoreLifecycle = {
    get ready() {
      return ready;
    },
    whenReady: (onReady, onFatal) => {
      if (ready) return onReady();
      void (async () => {
        for (let attempt = 0; !closing; attempt++) {
          await pause(Math.min(startRetryMostMs, startRetryFirstMs * 2 ** attempt) * (0.5 + Math.random() / 2));
          if (closing) return;
          try {
            await store.start();
          } catch (err) {
            const fatal = setupError(err) ?? (storeFaultFromError(err) === undefined ? err : undefined);
            if (fatal !== undefined) return onFatal(fatal);
            continue;
          }
          if (closing) return;
          ready = true;
          return onReady();
        }
      })();
    },
    get reachable() {
      return ready && store.isReachable;
    },
    onReachabilityChange: (listener) => store.onReachabilityChange(listener),
    releaseLeases: (holder) => store.releaseLeases(holder),
    close: (withinMs) => {
      closing = true;
      return store.close(withinMs);
    },
  };
  return { store, lifecycle, tuning: { pruneStepTargetMs: 15 }, description: where, backend: "postgres", claims: store.claims };
}
