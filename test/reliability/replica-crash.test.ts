/**
 * Two replicas on one PostgreSQL, one of them SIGKILLed at a random moment under load, five times
 * (SPEC §11 "Failure"): every acknowledged append is stored exactly once, L <= N <= M everywhere, a
 * subscriber of the survivor gets every pending notice, and the client carries on through the survivor.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { SessionStateClient } from "../../clients/typescript/src/session-state-client.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { allEventSequences, connect, human, subscribe } from "../support/helpers.js";
import { skipWithoutPostgres } from "../support/postgres-cluster.js";
import { freePort, spawnServer, type ServerProcess } from "../support/process-helpers.js";

const watchers = ["agent:main:w1", "agent:main:w2", "agent:main:subagent:w3"];
const targets = Array.from({ length: 5 }, (_, i) => `agent:main:subagent:t${i}`);

describe("replica crash safety", { skip: skipWithoutPostgres() }, () => {
  test("SIGKILL one of two replicas at random moments, five times: nothing acknowledged is lost or doubled, every pending notice reaches the survivor's subscribers", async () => {
    const cluster = testCluster();
    const schema = freshSchema();
    const ports = [await freePort(), await freePort()];
    const start = (i: number): Promise<ServerProcess> =>
      spawnServer(["--db", cluster.url, "--db-schema", schema, "--listen", `127.0.0.1:${ports[i]}`, "--log-level", "error"]);
    const replicas: (ServerProcess | undefined)[] = [await start(0), await start(1)];
    const client = new SessionStateClient({ address: `ipv4:127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}`, logger: { warn: () => {} } });
    const acknowledged: bigint[] = [];
    const failures: string[] = [];
    let seed = 20261204;
    const random = (n: number): number => {
      seed = (seed * 48271) % 2147483647;
      return seed % n;
    };
    try {
      for (const watcher of watchers) for (const target of targets) await client.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
      for (let round = 0; round < 5; round++) {
        let appending = true;
        const appenders = Array.from({ length: 4 }, async () => {
          while (appending) {
            try {
              acknowledged.push((await client.append(human(targets[random(targets.length)]!), { timeoutMs: 5000 })).event!.sequence);
            } catch (err) {
              failures.push((err as Error).message);
            }
          }
        });
        await sleep(300 + random(1200));
        const victim = random(2);
        replicas[victim]!.child.kill("SIGKILL");
        await replicas[victim]!.exited;
        replicas[victim] = undefined;
        await sleep(500);
        appending = false;
        await Promise.all(appenders);

        const survivor = connect(replicas[1 - victim]!.address, { ownConnection: true });
        try {
          const stored = (await Promise.all(targets.map((target) => allEventSequences(survivor, target)))).flat();
          assert.deepEqual(
            [...stored].sort((x, y) => (x < y ? -1 : 1)),
            [...acknowledged].sort((x, y) => (x < y ? -1 : 1)),
            `round ${round}: exactly the acknowledged appends are stored, each once`,
          );
          const cursors = (await survivor.watch.listWatches({ pageSize: 1000 })).cursors;
          for (const c of cursors) assert.ok(c.ackedVersion <= c.notifiedVersion && c.notifiedVersion <= c.materialVersion, `round ${round}: L <= N <= M`);
          const pending = cursors.filter((c) => c.notifiedVersion > c.ackedVersion).map((c) => `${c.watcherSessionKey} ${c.target!.key} ${c.notifiedVersion}`);
          const reader = subscribe(survivor, watchers);
          const { notices } = await reader.untilSynced();
          reader.call.cancel();
          assert.deepEqual(
            notices.map((n) => `${n.watcherSessionKey} ${n.target!.key} ${n.notifiedVersion}`).sort(),
            pending.sort(),
            `round ${round}: the survivor's subscriber gets every pending notice`,
          );
          // Acknowledge half of them, so the next round starts from a mix of pending and idle pairs.
          const half = notices.filter(() => random(2) === 0);
          if (half.length > 0) {
            await survivor.watch.ackNotices({
              acks: half.map((n) => ({ watcherSessionKey: n.watcherSessionKey, target: n.target, notifiedVersion: n.notifiedVersion })),
            });
          }
        } finally {
          survivor.close();
        }
        replicas[victim] = await start(victim);
      }
      assert.deepEqual(failures, [], "the client carried every append through the survivor");
      assert.ok(acknowledged.length > 500, `enough appends to mean something (${acknowledged.length})`);
      console.log(`# ${acknowledged.length} appends acknowledged across 5 kills, none lost or doubled`);
    } finally {
      client.close();
      for (const replica of replicas) replica?.child.kill("SIGKILL");
    }
  });
});
