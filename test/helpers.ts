import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, credentials, type ServiceError as GrpcError, status } from "@grpc/grpc-js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type AppendRequestSchema } from "../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../gen/sessionstate/v1/types_pb.js";
import { Reconcile } from "../gen/sessionstate/v1/reconcile_pb.js";
import { SignalLog } from "../gen/sessionstate/v1/signal_log_pb.js";
import { Upstream } from "../gen/sessionstate/v1/upstream_pb.js";
import { Watch } from "../gen/sessionstate/v1/watch_pb.js";
import { createServiceClient } from "../src/client/service-client.js";
import type { Clock } from "../src/clock.js";
import { defaultConfig, type Config } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { startServer, type RunningServer } from "../src/server.js";

export { status };

export type AppendInit = MessageInitShape<typeof AppendRequestSchema>;

export const dayMs = 24 * 60 * 60 * 1000;

/** A goal_changed append by an agent on `key`; `extra` overrides any field. */
export function goal(key: string, extra: Partial<AppendInit> = {}): AppendInit {
  return { session: { key }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "goal updated", ...extra } as AppendInit;
}

/** A human_direct_message append on `key`; `extra` overrides any field. */
export function human(key: string, extra: Partial<AppendInit> = {}): AppendInit {
  return { session: { key }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "human turn", ...extra } as AppendInit;
}

/** A clock the test moves by hand. */
export class FakeClock implements Clock {
  constructor(public ms = Date.UTC(2026, 11, 1, 12, 0, 0)) {}
  nowMs(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "sessionstate-test-"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Typed clients of the four services over one channel. */
export function connect(address: string) {
  const channel = new Client(address, credentials.createInsecure());
  return {
    channel,
    signalLog: createServiceClient(channel, SignalLog, { timeoutMs: 10_000 }),
    watch: createServiceClient(channel, Watch, { timeoutMs: 10_000 }),
    reconcile: createServiceClient(channel, Reconcile, { timeoutMs: 10_000 }),
    upstream: createServiceClient(channel, Upstream, { timeoutMs: 10_000 }),
    close: () => channel.close(),
  };
}
export type Clients = ReturnType<typeof connect>;

/** An in-process server on 127.0.0.1:0 with a fresh database, and clients for it. */
export interface TestServer extends Clients {
  server: RunningServer;
  clock: FakeClock;
  dbPath: string;
  /** Stops the server and closes the clients; the database file stays until `dispose`. */
  stop(): Promise<void>;
  /** Starts a new server on the same database file (after `stop`), with fresh clients. */
  restart(): Promise<TestServer>;
  /** Stops everything and removes the database. */
  dispose(): Promise<void>;
}

/** Starts a server for one test. Always `dispose()` it in an `after`/`afterEach` hook or a finally block. */
export async function startTestServer(
  overrides: Partial<Config> = {},
  shared?: { clock: FakeClock; dir: { dir: string; remove: () => void } },
): Promise<TestServer> {
  const clock = shared?.clock ?? new FakeClock();
  const dir = shared?.dir ?? tempDir();
  const config: Config = {
    ...defaultConfig,
    dbPath: join(dir.dir, "sessionstate.db"),
    listenHost: "127.0.0.1",
    listenPort: 0,
    logLevel: "silent",
    ...overrides,
  };
  const server = await startServer(config, { logger: createLogger("silent"), clock });
  const clients = connect(server.address);
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    clients.close();
    await server.close();
  };
  return {
    ...clients,
    server,
    clock,
    dbPath: config.dbPath,
    stop,
    restart: async () => {
      await stop();
      return startTestServer({ ...overrides, dbPath: config.dbPath }, { clock, dir });
    },
    dispose: async () => {
      await stop();
      dir.remove();
    },
  };
}

/** Asserts that `promise` rejects with gRPC status `code`, and that its details contain `detailsPart`. */
export async function assertStatus(promise: Promise<unknown>, code: status, detailsPart?: string | RegExp): Promise<GrpcError> {
  const err = await promise.then(
    () => assert.fail(`expected status ${status[code]}, but the call succeeded`),
    (e: unknown) => e as GrpcError,
  );
  assert.equal(err.code, code, `expected ${status[code]}, got ${status[err.code]}: ${err.details}`);
  if (typeof detailsPart === "string") assert.ok(err.details.includes(detailsPart), `details "${err.details}" lack "${detailsPart}"`);
  else if (detailsPart !== undefined) assert.match(err.details, detailsPart);
  assertNoInternals(err.details);
  return err;
}

/** Fails when status details look like they leak SQL, stack traces or internal errors. */
export function assertNoInternals(details: string): void {
  assert.doesNotMatch(details, /SELECT|INSERT|UPDATE|DELETE FROM|sqlite|\bat .+:\d+:\d+|TypeError|ReferenceError/i);
}
