/**
 * The storage backend the behaviour suite runs against: SQLite by default, PostgreSQL when
 * `SESSIONSTATE_TEST_BACKEND=postgres` (npm test runs the behaviour files once for each). On PostgreSQL
 * one throwaway cluster serves the whole test file, and every store or server gets a schema of its own.
 */
import { join } from "node:path";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import type { EventEncoder } from "../../src/domain/event.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { parsePostgresUrl } from "../../src/store/postgres/postgres-url.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { Store } from "../../src/store/store.js";
import { skipWithoutPostgres, startPostgresCluster, type PostgresCluster } from "./postgres-cluster.js";

export type BackendName = "sqlite" | "postgres";

/** The backend of this run. */
export const testBackend: BackendName = process.env.SESSIONSTATE_TEST_BACKEND === "postgres" ? "postgres" : "sqlite";

/**
 * For a behaviour test file's top-level `describe`: on the PostgreSQL run without PostgreSQL installed,
 * the skip message (once per file; CI turns it into a failure); otherwise false.
 */
export const skipBackend: false | string = testBackend === "postgres" ? skipWithoutPostgres() : false;

/** Names a suite after the backend it runs on. */
export function onBackend(title: string): string {
  return `${title} [${testBackend}]`;
}

let cluster: PostgresCluster | undefined;
let schemas = 0;

/** The cluster of this test file, started on first use and removed when the file's process exits. */
export function testCluster(): PostgresCluster {
  if (cluster === undefined) {
    cluster = startPostgresCluster();
    // At exit, not in an `after` hook: called inside a test, `after` would end the cluster with that test.
    process.once("exit", () => cluster?.destroy());
  }
  return cluster;
}

/** A schema name no other store or server of this file uses. */
export function freshSchema(): string {
  return `t${process.pid}_${++schemas}`;
}

/** Where a test server keeps its state: a SQLite file in `dir`, or a fresh schema of the test cluster. */
export function testDatabase(dir: string, file = "sessionstate.db"): { dbPath: string; dbSchema?: string } {
  if (testBackend === "sqlite") return { dbPath: join(dir, file) };
  return { dbPath: testCluster().url, dbSchema: freshSchema() };
}

/** A store on the test backend, with a way to open the same state again (a restart). */
export interface BehaviourStore {
  store: Store;
  /**
   * On PostgreSQL, another store on the same state (another replica, whose changes this one hears through
   * its feed); on SQLite, which has one owner, `undefined`. Close it.
   */
  openPeer(): Promise<Store | undefined>;
  /** Where its state lives, for a server started on the same state (`startTestServer`'s overrides). */
  database: { dbPath: string; dbSchema?: string };
  /** Closes the store and opens the same database again. */
  reopen(): Promise<Store>;
}

/**
 * Opens a store of the test backend on fresh state (`dir` holds a SQLite file), with the server's event
 * encoder unless `encodeEvent` is given. Close the store.
 */
export async function openBehaviourStore(
  dir: string,
  nowMs: () => number = () => Date.now(),
  encodeEvent: EventEncoder = encodeStateEvent,
): Promise<BehaviourStore> {
  const database = testDatabase(dir, "behaviour.db");
  const open = async (): Promise<Store> =>
    database.dbSchema === undefined
      ? SqliteStore.open(database.dbPath, "normal", encodeEvent)
      : PostgresStore.open({
          target: parsePostgresUrl(database.dbPath),
          schema: database.dbSchema,
          durability: "normal",
          nodeId: "test-node",
          encodeEvent,
          nowMs,
        });
  const handle: BehaviourStore = {
    openPeer: async () => (database.dbSchema === undefined ? undefined : open()),
    store: await open(),
    database,
    reopen: async () => {
      await handle.store.close();
      handle.store = await open();
      return handle.store;
    },
  };
  return handle;
}
