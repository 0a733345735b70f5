/**
 * Consumer groups under faults (SPEC §6.1 across replicas, §11; issue 41). Two replica processes serve one
 * PostgreSQL schema, each through a TCP proxy of its own (fault-proxy.ts); group members are gRPC streams of
 * this process, each on a connection of its own, acknowledging what they get after a short "turn". A checker
 * sees every delivery, every ack sent and every stream's end, and counts overlaps: a notice (a pair at its N)
 * delivered to a member while another member still held it (had it, and had neither acked it nor seen its
 * stream end). Each scenario asserts 0 overlaps and 0 notices lost (every notice acknowledged, nothing left
 * pending), and prints its figures:
 * - a replica cut off from PostgreSQL while its members hold claims: its members' streams end before any
 *   other replica may see their claims as free, and every claim reaches a member elsewhere within 3.5 s;
 * - PostgreSQL restarted (`pg_ctl stop -m fast`, 1 s, start) under appends and acks;
 * - 100 members reconnecting at once, 50 on each replica.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import type { StaleNotice } from "../../gen/sessionstate/v1/watch_pb.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { connect, goal, status, until, type Clients } from "../support/helpers.js";
import { skipWithoutPostgres, type PostgresCluster } from "../support/postgres-cluster.js";
import { freePort, spawnServer, type ServerProcess } from "../support/process-helpers.js";
import { FaultProxy } from "../support/fault-proxy.js";

const W = "agent:main:main";
const target = (i: number): string => `agent:main:subagent:g${i}`;
const now = (): number => performance.now();

/** Who holds which notice, by every delivery, ack and stream end the members saw. */
class HoldChecker {
  private readonly holds = new Map<string, { member: string; since: number }>();
  readonly overlaps: string[] = [];
  deliveries = 0;
  /** Per notice: the times it was delivered (a hand-over is a second one). */
  readonly deliveredAt = new Map<string, number[]>();

  static key(notice: StaleNotice): string {
    return `${notice.target!.key}@${notice.notifiedVersion}`;
  }

  delivered(member: string, notice: StaleNotice): void {
    const key = HoldChecker.key(notice);
    const held = this.holds.get(key);
    if (held !== undefined) this.overlaps.push(`${key}: to ${member} while ${held.member} held it since ${Math.round(now() - held.since)} ms`);
    this.holds.set(key, { member, since: now() });
    this.deliveries++;
    let times = this.deliveredAt.get(key);
    if (times === undefined) this.deliveredAt.set(key, (times = []));
    times.push(now());
  }

  acked(member: string, notice: StaleNotice): void {
    const key = HoldChecker.key(notice);
    if (this.holds.get(key)?.member === member) this.holds.delete(key);
  }

  /** Notices held now. */
  get held(): number {
    return this.holds.size;
  }

  streamEnded(member: string): void {
    for (const [key, held] of this.holds) if (held.member === member) this.holds.delete(key);
  }
}

interface MemberOptions {
  maxInFlight: number;
  /** It acknowledges each notice after up to this long (a turn). */
  turnMs: number;
  ack: boolean;
  /** It subscribes again 100 ms after its stream ends. */
  resubscribe: boolean;
}

/** A group member that acknowledges each notice after `turnMs`, and subscribes again when its stream ends (unless stopped). */
class Member {
  readonly got: StaleNotice[] = [];
  ended: { code: number; at: number } | undefined;
  syncedAt: number | undefined;
  private call: { cancel(): void } | undefined;
  private stopped = false;
  private readonly clients: Clients;

  constructor(
    readonly name: string,
    address: string,
    private readonly checker: HoldChecker,
    private readonly options: MemberOptions,
  ) {
    this.clients = connect(address, { ownConnection: true });
  }

  start(): void {
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const stream = this.clients.watch.subscribeStaleNotices({ watcherSessionKeys: [W], consumerGroup: "gw", maxInFlight: this.options.maxInFlight }, { timeoutMs: 600_000 });
      this.call = stream as unknown as { cancel(): void };
      try {
        for await (const item of stream) {
          if (item.message.case === "synced") this.syncedAt ??= now();
          if (item.message.case !== "notice") continue;
          const notice = item.message.value;
          this.checker.delivered(this.name, notice);
          this.got.push(notice);
          if (this.options.ack) void this.ackAfterTurn(notice);
        }
        this.ended = { code: status.OK, at: now() };
      } catch (err) {
        this.ended = { code: (err as { code?: number }).code ?? status.UNKNOWN, at: now() };
      }
      this.checker.streamEnded(this.name);
      if (!this.options.resubscribe) return;
      await sleep(100);
    }
  }

  private async ackAfterTurn(notice: StaleNotice): Promise<void> {
    await sleep(this.options.turnMs * Math.random());
    this.checker.acked(this.name, notice);
    await this.clients.watch
      .ackNotices({ acks: [{ watcherSessionKey: W, target: notice.target!, notifiedVersion: notice.notifiedVersion }] })
      .catch(() => undefined); // the notice stays pending and comes again
  }

  /** Ends its stream now; with `again`, it subscribes again after 100 ms. */
  cancel(again: boolean): void {
    this.stopped = !again;
    this.call?.cancel();
  }

  close(): void {
    this.stopped = true;
    this.call?.cancel();
    this.clients.close();
  }
}

class Rig {
  readonly proxies: FaultProxy[] = [];
  readonly replicas: ServerProcess[] = [];
  readonly members: Member[] = [];
  admin: Clients | undefined;

  constructor(readonly cluster: PostgresCluster) {}

  static async start(cluster: PostgresCluster): Promise<Rig> {
    const rig = new Rig(cluster);
    const schema = freshSchema();
    for (let i = 0; i < 2; i++) {
      const proxy = await FaultProxy.start({ path: `${cluster.socketDir}/.s.PGSQL.${cluster.port}` });
      rig.proxies.push(proxy);
      const url = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
      rig.replicas.push(await spawnServer(["--db", url, "--db-schema", schema, "--listen", `127.0.0.1:${await freePort()}`, "--log-level", "warn", "--node-id", `replica-${i}`]));
    }
    rig.admin = connect(rig.replicas[1]!.address, { ownConnection: true });
    return rig;
  }

  member(name: string, replica: number, checker: HoldChecker, options: MemberOptions): Member {
    const member = new Member(name, this.replicas[replica]!.address, checker, options);
    this.members.push(member);
    member.start();
    return member;
  }

  /** Opens `count` notices for W (a watch and a goal change on each of `count` new targets). */
  async openNotices(from: number, count: number): Promise<void> {
    for (let i = from; i < from + count; i++) {
      await this.admin!.watch.watch({ watcherSessionKey: W, target: { key: target(i) } });
      await this.admin!.signalLog.append(goal(target(i)));
    }
  }

  /** W's pending notices, through replica 1. */
  async pending(): Promise<number> {
    const listed = await this.admin!.watch.listWatches({ watcherSessionKey: W, pageSize: 1000 });
    return listed.cursors.filter((cursor) => cursor.notifiedVersion > cursor.ackedVersion).length;
  }

  async close(): Promise<void> {
    for (const member of this.members.splice(0)) member.close();
    this.admin?.close();
    for (const replica of this.replicas) {
      replica.child.kill("SIGKILL");
      await replica.exited;
    }
    for (const proxy of this.proxies) await proxy.close();
  }
}

describe("consumer groups under faults on PostgreSQL replicas", { skip: skipWithoutPostgres() }, () => {
  let cluster: PostgresCluster;
  before(() => {
    cluster = testCluster();
  });
  after(() => cluster.start());

  test("a replica cut off from PostgreSQL while its members hold claims: its members' streams end, and every claim reaches a member elsewhere within 3.5 s", async () => {
    const rig = await Rig.start(cluster);
    try {
      const checker = new HoldChecker();
      await rig.openNotices(0, 30);
      const held = { maxInFlight: 10, turnMs: 0, ack: false, resubscribe: false };
      const cutA = rig.member("cut-a", 0, checker, held);
      const cutB = rig.member("cut-b", 0, checker, held);
      await until(() => cutA.got.length === 10 && cutB.got.length === 10, "the members on replica 0 hold 10 each", 10_000);
      const other = rig.member("other", 1, checker, { maxInFlight: 50, turnMs: 0, ack: false, resubscribe: false });
      await until(() => other.got.length === 10 && other.syncedAt !== undefined, "the member on replica 1 takes the other 10", 10_000);

      const cutAt = now();
      rig.proxies[0]!.blackhole();
      await until(() => other.got.length === 30, "every claim of replica 0 reaches the member on replica 1", 10_000);
      const handedAt = Math.max(...other.got.slice(10).map((n) => checker.deliveredAt.get(HoldChecker.key(n))!.at(-1)!));
      const endedA = cutA.ended!;
      const endedB = cutB.ended!;
      console.log(
        `# cut off: replica 0's member streams ended ${Math.round(endedA.at - cutAt)} / ${Math.round(endedB.at - cutAt)} ms after the partition (${endedA.code}, ${endedB.code}); ` +
          `its 20 claims reached replica 1's member ${Math.round(handedAt - cutAt)} ms after it; deliveries ${checker.deliveries}, overlaps ${checker.overlaps.length}`,
      );
      assert.deepEqual([endedA.code, endedB.code], [status.UNAVAILABLE, status.UNAVAILABLE]);
      assert.ok(endedA.at - cutAt < 2000 && endedB.at - cutAt < 2000, "its members' streams end within 2 s");
      assert.ok(handedAt - cutAt < 3500, `every claim handed on within 3.5 s (${Math.round(handedAt - cutAt)} ms)`);
      assert.deepEqual(other.got.slice(10).map((n) => n.deliveryCount), Array(20).fill(2));
      assert.deepEqual(checker.overlaps, []);

      rig.proxies[0]!.heal();
      // Replica 0 serves again, and its members may join again.
      const back = rig.member("back", 0, checker, { maxInFlight: 10, turnMs: 20, ack: true, resubscribe: true });
      const answering = rig.member("answering", 1, checker, { maxInFlight: 10, turnMs: 20, ack: true, resubscribe: true });
      other.close();
      await until(async () => (await rig.pending()) === 0, "every notice acknowledged", 20_000);
      assert.ok(back.got.length + answering.got.length >= 30, "the notices other held come again once its stream ends");
      assert.deepEqual(checker.overlaps, []);
    } finally {
      await rig.close();
    }
  });

  test("PostgreSQL restarted under appends and acks: 0 notices lost, 0 double holders", async () => {
    const rig = await Rig.start(cluster);
    try {
      const checker = new HoldChecker();
      const options = { maxInFlight: 4, turnMs: 50, ack: true, resubscribe: true };
      for (let i = 0; i < 3; i++) rig.member(`r0-${i}`, 0, checker, options);
      for (let i = 0; i < 3; i++) rig.member(`r1-${i}`, 1, checker, options);
      await rig.openNotices(0, 40);
      const restartAt = now();
      cluster.stop();
      await sleep(1000);
      cluster.start();
      const upAt = now();
      // Appends resume once the replicas serve again (each retried until it is stored).
      for (let i = 40; i < 80; i++) {
        await until(
          async () => {
            try {
              await rig.admin!.watch.watch({ watcherSessionKey: W, target: { key: target(i) } });
              await rig.admin!.signalLog.append({ ...goal(target(i)), dedupeKey: `restart-${i}` });
              return true;
            } catch {
              return false;
            }
          },
          "an append after the restart",
          20_000,
        );
      }
      await until(async () => (await rig.pending().catch(() => -1)) === 0, "every notice acknowledged", 30_000);
      console.log(
        `# PostgreSQL restarted (down ${Math.round(upAt - restartAt)} ms): 80 notices, ${checker.deliveries} deliveries, ` +
          `${[...checker.deliveredAt.values()].filter((t) => t.length > 1).length} handed on, overlaps ${checker.overlaps.length}; all acknowledged ${Math.round(now() - upAt)} ms after it was back`,
      );
      assert.deepEqual(checker.overlaps, []);
      assert.equal(checker.deliveredAt.size, 80, "every notice delivered");
    } finally {
      await rig.close();
    }
  });

  test("100 members reconnecting at once, 50 on each replica: 0 notices lost, 0 double holders", async () => {
    const rig = await Rig.start(cluster);
    try {
      const checker = new HoldChecker();
      await rig.openNotices(0, 150);
      // Turns long enough that every member holds its claims when the storm comes.
      const options = { maxInFlight: 2, turnMs: 8000, ack: true, resubscribe: true };
      const members = Array.from({ length: 100 }, (_, i) => rig.member(`m${i}`, i % 2, checker, options));
      await until(() => members.every((member) => member.syncedAt !== undefined), "every member synced", 20_000);
      const heldAtStorm = checker.held;
      const stormAt = now();
      for (const member of members) member.syncedAt = undefined;
      for (const member of members) member.cancel(true);
      await until(() => members.every((member) => member.syncedAt !== undefined), "every member synced again", 20_000);
      const syncedMs = Math.max(...members.map((member) => member.syncedAt!)) - stormAt;
      const handedOn = (): number => [...checker.deliveredAt.values()].filter((t) => t.length > 1).length;
      await until(() => handedOn() >= heldAtStorm * 0.5, "the claims held at the storm handed on", 10_000);
      await until(async () => (await rig.pending()) === 0, "every notice acknowledged", 30_000);
      console.log(
        `# reconnect storm: 100 members holding ${heldAtStorm} claims reconnected at once, synced again within ${Math.round(syncedMs)} ms; 150 notices, ${checker.deliveries} deliveries, ` +
          `${[...checker.deliveredAt.values()].filter((t) => t.length > 1).length} handed on, overlaps ${checker.overlaps.length}`,
      );
      assert.deepEqual(checker.overlaps, []);
      assert.equal(checker.deliveredAt.size, 150, "every notice delivered");
    } finally {
      await rig.close();
    }
  });
});
