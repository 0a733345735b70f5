import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Client, credentials, type ServiceError as GrpcError, status } from "@grpc/grpc-js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { SignalLog, type AppendRequestSchema } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { Upstream } from "../../gen/sessionstate/v1/upstream_pb.js";
import { Watch, type StaleNotice, type SubscribeStaleNoticesResponse } from "../../gen/sessionstate/v1/watch_pb.js";
import { createServiceClient, type ServerStreamCall } from "../../clients/typescript/src/service-client.js";
import type { Clock } from "../../src/clock.js";
import { agentIdFromKey } from "../../src/domain/session-key.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import type { AppendInput as StoreAppendInput, CursorRecord } from "../../src/domain/records.js";
import { watcherRangesFromFilter, type PairPosition } from "../../src/domain/pair-order.js";
import { defaultConfig, type Config } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { startServer, type RunningServer } from "../../src/server.js";
import type { Store } from "../../src/store/store.js";
import { testBackend, testDatabase } from "./backend.js";

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

/** A store-level append of `kind` on `key` (bare keys: agent main), for tests that use the store directly. */
export function storeAppend(key: string, nowMs: number, kind: StoreAppendInput["kind"] = "goal_changed"): StoreAppendInput {
  return {
    session: { namespace: "default", agentId: agentIdFromKey(key) ?? "main", key },
    kind,
    actorType: kind === "human_direct_message" ? "human" : "agent",
    summary: "store-level event",
    occurredAtMs: nowMs,
    payload: {},
    notifyWatcherKeys: [],
    onlyIfWatched: false,
    nowMs,
  };
}

/**
 * Every pending cursor of the named watchers and of the watchers with one of the prefixes, in pair order,
 * read page by page as the notice hub reads them.
 */
export async function allPendingCursors(
  store: Pick<Store, "pendingPage">,
  namespace: string,
  watcherKeys: readonly string[],
  prefixes: readonly string[] = [],
  pageSize = 100,
): Promise<CursorRecord[]> {
  const found: CursorRecord[] = [];
  for (const range of watcherRangesFromFilter(watcherKeys, prefixes)) {
    for (let after: PairPosition | undefined; ; ) {
      const { cursors } = await store.pendingPage(namespace, range, after, pageSize);
      found.push(...cursors);
      if (cursors.length < pageSize) break;
      const last = cursors.at(-1)!;
      after = [last.watcherKey, last.target.agentId, last.target.key];
    }
  }
  return found;
}

/** Opens a store on a database file for a store-level test, with the server's event encoder. Close it. */
export function openTestStore(path: string): SqliteStore {
  return SqliteStore.open(path, "normal", encodeStateEvent);
}

/**
 * Checks the notices one stream receives against SPEC §6: never the same pending notice twice, and never a
 * second notice for a pair while the first is unacknowledged. Each notice is acknowledged after a short
 * delay (the turn that consumes it) while the stream goes on being read, so a second notice sent too early
 * arrives while the first is still outstanding, and is caught.
 */
export class NoticeStreamChecker {
  readonly violations: string[] = [];
  received = 0;
  /** Pair -> the notified version of the notice received and not yet acknowledged. */
  private readonly outstanding = new Map<string, bigint>();
  private readonly seen = new Map<string, Set<bigint>>();
  private readonly acks = new Set<Promise<void>>();

  constructor(
    private readonly ack: (notice: StaleNotice) => Promise<unknown>,
    private readonly ackDelayMs: () => number = () => 50 + Math.random() * 100,
  ) {}

  /** Records a received notice and schedules its ack. */
  onNotice(notice: StaleNotice): void {
    this.received++;
    const pair = `${notice.watcherSessionKey}>${notice.target?.agentId}>${notice.target?.key}`;
    const versions = this.seen.get(pair) ?? new Set<bigint>();
    if (versions.has(notice.notifiedVersion)) this.violations.push(`${pair}: notice ${notice.notifiedVersion} received twice`);
    versions.add(notice.notifiedVersion);
    this.seen.set(pair, versions);
    const open = this.outstanding.get(pair);
    if (open !== undefined) this.violations.push(`${pair}: notice ${notice.notifiedVersion} while ${open} was outstanding`);
    this.outstanding.set(pair, notice.notifiedVersion);
    const acking = sleep(this.ackDelayMs())
      .then(() => {
        // Outstanding until the ack is sent: once it is, the server may reopen the pair at any moment.
        this.outstanding.delete(pair);
        return this.ack(notice);
      })
      .then(
        () => undefined,
        (err: unknown) => {
          this.violations.push(`${pair}: ack failed: ${(err as Error).message}`);
        },
      )
      .finally(() => this.acks.delete(acking));
    this.acks.add(acking);
  }

  /** Resolves when every scheduled ack has been answered. */
  async settled(): Promise<void> {
    while (this.acks.size > 0) await Promise.all([...this.acks]);
  }
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
/** Polls `check` every 10 ms until it holds or `limitMs` have passed; true when it held. */
export async function waitFor(check: () => boolean | Promise<boolean>, limitMs = 5000): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

/** Waits until `check` holds, instead of a fixed sleep; fails the test, naming `what`, after `limitMs`. */
export async function until(check: () => boolean | Promise<boolean>, what: string, limitMs = 5000): Promise<void> {
  if (!(await waitFor(check, limitMs))) assert.fail(`not within ${limitMs} ms: ${what}`);
}

export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "sessionstate-test-"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Typed clients of the four services over one channel. `ownConnection` opens a connection of its own
 * (grpc-js otherwise shares one connection between channels to the same address); `namespace` and
 * `token` go out with every call (no namespace: the header is left out).
 */
export function connect(address: string, { ownConnection = false, namespace, token }: { ownConnection?: boolean; namespace?: string; token?: string } = {}) {
  const channel = new Client(address, credentials.createInsecure(), ownConnection ? { "grpc.use_local_subchannel_pool": 1 } : {});
  openChannels.set(channel, address);
  const metadata: Record<string, string> = {};
  if (namespace !== undefined) metadata["sessionstate-namespace"] = namespace;
  if (token !== undefined) metadata.authorization = `Bearer ${token}`;
  const defaults = { timeoutMs: 10_000, metadata };
  return {
    channel,
    signalLog: createServiceClient(channel, SignalLog, defaults),
    watch: createServiceClient(channel, Watch, defaults),
    reconcile: createServiceClient(channel, Reconcile, defaults),
    upstream: createServiceClient(channel, Upstream, defaults),
    close: () => {
      openChannels.delete(channel);
      channel.close();
    },
  };
}
export type Clients = ReturnType<typeof connect>;

/** Every event sequence a session holds, ascending, paging through SessionStatus. */
export async function allEventSequences(clients: Clients, key: string): Promise<bigint[]> {
  const sequences: bigint[] = [];
  let since = 0n;
  for (;;) {
    const page = await clients.reconcile.sessionStatus({ session: { key }, changesSince: since });
    sequences.push(...page.stateChanges!.events.map((e) => e.sequence));
    if (!page.stateChanges!.truncated) return sequences;
    since = sequences.at(-1)!;
  }
}

/** Channels opened by `connect` and not closed yet, with their addresses: a test server checks them at teardown. */
const openChannels = new Map<Client, string>();

/** An in-process server on 127.0.0.1:0 with a fresh database, and clients for it. */
export interface TestServer extends Clients {
  server: RunningServer;
  clock: FakeClock;
  dbPath: string;
  /** The PostgreSQL schema, on that backend. */
  dbSchema?: string;
  /** Stops the server and closes the clients; the database file stays until `dispose`. */
  stop(): Promise<void>;
  /** Starts a new server on the same database file (after `stop`), with fresh clients; `samePort` keeps the port. */
  restart(options?: { samePort?: boolean }): Promise<TestServer>;
  /** Stops everything and removes the database. */
  dispose(): Promise<void>;
}

/** Starts a server for one test. Always `dispose()` it in an `after`/`afterEach` hook or a finally block. */
export async function startTestServer(
  overrides: Partial<Config> = {},
  shared?: { clock: FakeClock; dir: { dir: string; remove: () => void } },
  onStoreOpened?: (store: Store) => void,
): Promise<TestServer> {
  const clock = shared?.clock ?? new FakeClock();
  const dir = shared?.dir ?? tempDir();
  const config: Config = {
    ...defaultConfig,
    // A test that names its own SQLite file keeps it; otherwise the state lives on the test backend.
    ...(overrides.dbPath === undefined ? testDatabase(dir.dir) : {}),
    listenHost: "127.0.0.1",
    listenPort: 0,
    logLevel: "silent",
    ...overrides,
  };
  const server = await startServer(config, { logger: createLogger("silent"), clock, ...(onStoreOpened === undefined ? {} : { onStoreOpened }) });
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
    ...(config.dbSchema === undefined || testBackend !== "postgres" ? {} : { dbSchema: config.dbSchema }),
    stop,
    restart: async ({ samePort = false } = {}) => {
      await stop();
      return startTestServer(
        { ...overrides, dbPath: config.dbPath, dbSchema: config.dbSchema, ...(samePort ? { listenPort: server.port } : {}) },
        { clock, dir },
      );
    },
    dispose: async () => {
      // A test must end its own streams; a cancel may still be on its way to the server, so wait a little.
      const deadline = Date.now() + 1000;
      while (!stopped && server.openStreams() > 0 && Date.now() < deadline) await sleep(10);
      const leftOpen = stopped ? 0 : server.openStreams();
      await stop();
      dir.remove();
      if (leftOpen > 0) throw new Error(`the test left ${leftOpen} notice stream(s) open at teardown: cancel them first`);
      const leftConnected = [...openChannels.values()].filter((address) => address === server.address).length;
      if (leftConnected > 0) throw new Error(`the test left ${leftConnected} client connection(s) to the server open at teardown: close them first`);
    },
  };
}

/** The Prometheus text a server's metrics listener on `port` serves. */
export async function scrapeMetrics(port: number | undefined): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(response.status, 200);
  return response.text();
}

/**
 * The value of one series (`name{labels}` exactly as exposed) in scraped metrics `text`. A series that is
 * absent fails the test, unless `missing` gives its value (a labelled counter appears on its first count).
 */
export function metricValue(text: string, series: string, missing?: number): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  if (line === undefined && missing !== undefined) return missing;
  assert.ok(line !== undefined, `series ${series} is missing`);
  return Number(line.slice(series.length + 1));
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

/**
 * Brings every cursor (at most 1,000) up to its target's head with acks that say `reconciled_through =
 * head`, the way a watcher that reconciled everything would. Returns the heads.
 */
export async function reconcileEveryCursor(clients: Clients, targets: readonly string[]): Promise<Map<string, bigint>> {
  const heads = new Map<string, bigint>();
  for (const target of targets) heads.set(target, (await clients.reconcile.sessionStatus({ session: { key: target } })).stateVersion);
  for (let round = 0; round < 50; round++) {
    const pending = (await clients.watch.listWatches({ pageSize: 1000 })).cursors.filter((c) => c.notifiedVersion > c.ackedVersion);
    if (pending.length === 0) break;
    await clients.watch.ackNotices({
      acks: pending.map((c) => ({
        watcherSessionKey: c.watcherSessionKey,
        target: c.target,
        notifiedVersion: c.notifiedVersion,
        reconciledThrough: heads.get(c.target!.key)!,
      })),
    });
  }
  return heads;
}

/** Reads a notice stream in the background so a test can await its messages one at a time. */
export class NoticeReader {
  private readonly items: SubscribeStaleNoticesResponse[] = [];
  private readonly waiters: Array<() => void> = [];
  /** The error the stream ended with, once it has. */
  failure: (Error & { code?: number; details?: string }) | undefined;
  private ended = false;
  private readIndex = 0;
  private barriers = 0;

  constructor(
    private readonly clients: Clients,
    readonly call: ServerStreamCall<SubscribeStaleNoticesResponse>,
  ) {
    void (async () => {
      try {
        for await (const item of call) this.push(item);
      } catch (err) {
        this.failure = err as Error;
      }
      this.ended = true;
      this.waiters.splice(0).forEach((wake) => wake());
    })();
  }

  private push(item: SubscribeStaleNoticesResponse): void {
    this.items.push(item);
    this.waiters.splice(0).forEach((wake) => wake());
  }

  /** The next message; fails after `timeoutMs` or when the stream ends first. */
  async next(timeoutMs = 5000): Promise<SubscribeStaleNoticesResponse> {
    const deadline = Date.now() + timeoutMs;
    while (this.readIndex >= this.items.length) {
      if (this.ended) throw this.failure ?? new Error("stream ended");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("timed out waiting for a stream message");
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.items[this.readIndex++]!;
  }

  /** The next message, which must be a notice. */
  async nextNotice(): Promise<StaleNotice> {
    const item = await this.next();
    assert.equal(item.message.case, "notice", `expected a notice, got ${item.message.case}`);
    return item.message.value as StaleNotice;
  }

  /** Waits for the synced marker and returns the notices before it. */
  async untilSynced(): Promise<{ notices: StaleNotice[]; pendingDelivered: number }> {
    const notices: StaleNotice[] = [];
    for (;;) {
      const item = await this.next();
      if (item.message.case === "synced") return { notices, pendingDelivered: item.message.value.pendingDelivered };
      notices.push(item.message.value as StaleNotice);
    }
  }

  /**
   * Returns every notice delivered before a fresh barrier notice. The stream must serve
   * `barrierWatcher`: a notice for it is opened now, and since a stream delivers pairs in the order they
   * changed, everything that changed earlier arrives before it.
   */
  async noticesBeforeBarrier(): Promise<StaleNotice[]> {
    const target = `agent:main:barrier-${++this.barriers}-${Math.random().toString(36).slice(2)}`;
    await this.clients.signalLog.append({
      session: { key: target },
      kind: EventKind.GOAL_CHANGED,
      actorType: ActorType.SYSTEM,
      summary: "barrier",
      notifySessionKeys: [barrierWatcher],
    });
    const notices: StaleNotice[] = [];
    for (;;) {
      const notice = await this.nextNotice();
      if (notice.watcherSessionKey === barrierWatcher && notice.target?.key === target) {
        // Acknowledge it, so barriers never show up as pending notices later.
        await this.clients.watch.ackNotices({
          acks: [{ watcherSessionKey: barrierWatcher, target: notice.target, notifiedVersion: notice.notifiedVersion }],
        });
        return notices;
      }
      notices.push(notice);
    }
  }

  /** Error the stream ended with, once it has ended. */
  async endStatus(timeoutMs = 5000): Promise<number | "ok"> {
    for (;;) {
      try {
        await this.next(timeoutMs);
      } catch (err) {
        if (this.ended) return this.failure?.code ?? "ok";
        throw err;
      }
    }
  }
}

/** The watcher every test stream also serves, so `noticesBeforeBarrier` works. */
export const barrierWatcher = "agent:barrier:watcher";

/** Opens a notice stream for `keys`/`prefixes` plus the barrier watcher. */
export function subscribe(clients: Clients, keys: string[], prefixes: string[] = []): NoticeReader {
  return new NoticeReader(
    clients,
    clients.watch.subscribeStaleNotices({ watcherSessionKeys: [...keys, barrierWatcher], watcherKeyPrefixes: prefixes }, { timeoutMs: 120_000 }),
  );
}

/**
 * Calls `send(i, startedAt)` for each of the `ratePerSec * durationMs / 1000` sends on a fixed schedule
 * (sleeping until each one's time, never bursting to catch up), then waits for all of them.
 */
export async function atFixedRate(
  ratePerSec: number,
  durationMs: number,
  send: (i: number, startedAt: number) => Promise<unknown>,
): Promise<void> {
  const total = Math.floor((ratePerSec * durationMs) / 1000);
  const start = performance.now();
  const sent: Promise<unknown>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / ratePerSec - performance.now();
    if (wait > 1) await sleep(wait);
    sent.push(send(i, performance.now()));
  }
  await Promise.all(sent);
}

/** A seeded generator of whole numbers below `n` (mulberry32), so a failing random test replays. */
export function seededRandom(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (state + 0x6d2b79f5) | 0;
    let x = Math.imul(state ^ (state >>> 15), state | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return Math.floor((((x ^ (x >>> 14)) >>> 0) / 2 ** 32) * n);
  };
}
