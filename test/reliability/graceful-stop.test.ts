import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { connect, human, status, tempDir } from "../support/helpers.js";
import { spawnServer } from "../support/process-helpers.js";

describe("graceful stop", () => {
  test("SIGTERM with 100 open streams and appends in flight: each append is stored or UNAVAILABLE, exit 0, WAL checkpointed", async () => {
    const dir = tempDir();
    const dbPath = join(dir.dir, "stop.db");
    try {
      const server = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0", "--log-level", "warn"]);
      const clients = connect(server.address);
      const streams = Array.from({ length: 100 }, (_, i) =>
        clients.watch.subscribeStaleNotices({ watcherSessionKeys: [`agent:main:w${i}`] }, { timeoutMs: 60_000 }),
      );
      const streamEnds = streams.map(async (call) => {
        try {
          for await (const _ of call);
          return "ended";
        } catch (err) {
          return (err as { code: number }).code;
        }
      });
      const stored: bigint[] = [];
      const failures: number[] = [];
      let stopping = false;
      const appenders = Array.from({ length: 8 }, async (_, i) => {
        while (!stopping) {
          try {
            stored.push((await clients.signalLog.append(human(`agent:main:s${i}`), { timeoutMs: 10_000 })).event!.sequence);
          } catch (err) {
            failures.push((err as { code: number }).code);
            return;
          }
        }
      });
      await sleep(500);
      const signalledAt = Date.now();
      server.child.kill("SIGTERM");
      const exitCode = await server.exited;
      const stoppedMs = Date.now() - signalledAt;
      stopping = true;
      await Promise.all(appenders);
      const ends = await Promise.all(streamEnds);
      clients.close();

      assert.equal(exitCode, 0);
      assert.ok(stoppedMs < 6000, `stopped in ${stoppedMs} ms (grace is 5 s)`);
      assert.ok(stored.length > 0);
      assert.deepEqual([...new Set(failures)], failures.length === 0 ? [] : [status.UNAVAILABLE]);
      assert.deepEqual([...new Set(ends)], [status.UNAVAILABLE], "open streams end with UNAVAILABLE");
      const wal = `${dbPath}-wal`;
      assert.ok(!existsSync(wal) || statSync(wal).size === 0, "the WAL is checkpointed");

      const again = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0", "--log-level", "warn"]);
      const check = connect(again.address);
      try {
        const present = new Set<bigint>();
        for (let i = 0; i < 8; i++) {
          const events = await check.reconcile.sessionStatus({ session: { key: `agent:main:s${i}` }, changesSince: 0n, limit: 200 });
          let page = events;
          for (;;) {
            for (const e of page.stateChanges!.events) present.add(e.sequence);
            if (!page.stateChanges!.truncated) break;
            page = await check.reconcile.sessionStatus({
              session: { key: `agent:main:s${i}` },
              changesSince: page.stateChanges!.events.at(-1)!.sequence,
            });
          }
        }
        for (const sequence of stored) assert.ok(present.has(sequence), `acknowledged append ${sequence} is stored`);
      } finally {
        check.close();
        again.child.kill("SIGTERM");
        await again.exited;
      }
    } finally {
      dir.remove();
    }
  });
});
