import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { allEventSequences, connect, human, tempDir } from "../support/helpers.js";
import { spawnServer } from "../support/process-helpers.js";

const watchers = ["agent:main:w1", "agent:main:w2", "agent:main:subagent:w3"];
const targets = Array.from({ length: 5 }, (_, i) => `agent:main:subagent:t${i}`);

describe("crash safety", () => {
  test("SIGKILL at random moments, five times, loses no acknowledged event and breaks no cursor", async () => {
    const dir = tempDir();
    const dbPath = join(dir.dir, "crash.db");
    const acknowledged = new Map<bigint, string>();
    let seed = 20261202;
    const random = (n: number): number => {
      seed = (seed * 48271) % 2147483647;
      return seed % n;
    };
    try {
      for (let round = 0; round < 5; round++) {
        const server = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0", "--log-level", "warn"]);
        const clients = connect(server.address);
        if (round === 0) {
          for (const watcher of watchers) {
            for (const target of targets) await clients.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
          }
        }
        let killed = false;
        const appenders = Array.from({ length: 4 }, async () => {
          while (!killed) {
            const target = targets[random(targets.length)]!;
            try {
              const response = await clients.signalLog.append(human(target), { timeoutMs: 2000 });
              acknowledged.set(response.event!.sequence, target);
            } catch {
              if (!killed) await sleep(1);
            }
          }
        });
        await sleep(300 + random(1200));
        server.child.kill("SIGKILL");
        killed = true;
        await server.exited;
        await Promise.all(appenders);
        clients.close();
      }
      assert.ok(acknowledged.size > 100, `only ${acknowledged.size} appends were acknowledged`);

      const server = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0", "--log-level", "warn"]);
      const clients = connect(server.address);
      try {
        const heads = new Map<string, bigint>();
        for (const target of targets) {
          const events = await allEventSequences(clients, target);
          const status = await clients.reconcile.sessionStatus({ session: { key: target } });
          const highest = events.reduce((a, b) => (a > b ? a : b), 0n);
          assert.equal(status.stateVersion, highest, `${target}: head equals its highest sequence`);
          heads.set(target, highest);
          const stored = new Set(events);
          for (const [sequence, key] of acknowledged) {
            if (key === target) assert.ok(stored.has(sequence), `acknowledged event ${sequence} on ${target} is lost`);
          }
        }
        const cursors = (await clients.watch.listWatches({ pageSize: 1000 })).cursors;
        assert.equal(cursors.length, watchers.length * targets.length);
        let pending = 0;
        for (const c of cursors) {
          assert.ok(c.ackedVersion <= c.notifiedVersion && c.notifiedVersion <= c.materialVersion, "L <= N <= M");
          assert.equal(c.materialVersion, heads.get(c.target!.key), "every material event reached every cursor");
          if (c.notifiedVersion > c.ackedVersion) pending++;
        }
        assert.equal(pending, cursors.length, "every pair has its one pending notice");
        for (let stream = 0; stream < 2; stream++) {
          const call = clients.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:main:"] }, { timeoutMs: 30_000 });
          const seen = new Set<string>();
          let delivered = 0;
          for await (const item of call) {
            if (item.message.case === "synced") {
              assert.equal(item.message.value.pendingDelivered, pending);
              break;
            }
            const notice = item.message.value!;
            const pair = `${notice.watcherSessionKey}>${notice.target?.key}`;
            assert.ok(!seen.has(pair), `${pair} delivered twice on one stream`);
            seen.add(pair);
            delivered++;
          }
          call.cancel();
          assert.equal(delivered, pending, "each pending pair is delivered exactly once per new stream");
        }
      } finally {
        clients.close();
        server.child.kill("SIGTERM");
        assert.equal(await server.exited, 0);
      }
    } finally {
      dir.remove();
    }
  });
});
