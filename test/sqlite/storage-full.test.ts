import assert from "node:assert/strict";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, test } from "node:test";
import { defaultConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { startServer } from "../../src/server.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { assertStatus, connect, goal, status, tempDir } from "../support/helpers.js";

describe("full storage", () => {
  test("a full disk is logged once when writes start failing and once when they succeed again, and refusals are counted", async () => {
    const dir = tempDir();
    const lines: { level: number; msg: string; err?: unknown }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString("utf8").split("\n")) if (line !== "") lines.push(JSON.parse(line));
        done();
      },
    });
    let store: SqliteStore | undefined;
    const server = await startServer(
      { ...defaultConfig, dbPath: join(dir.dir, "full.db"), listenHost: "127.0.0.1", listenPort: 0, metricsListen: { host: "127.0.0.1", port: 0 } },
      { logger: createLogger("info", sink), onStoreOpened: (opened) => (store = opened as SqliteStore) },
    );
    const clients = connect(server.address);
    const metric = async (name: string): Promise<string | undefined> => {
      const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
      return new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1];
    };
    try {
      await clients.signalLog.append(goal("agent:main:a"));
      store!.limitPages(1);
      let refused = 0;
      for (let i = 0; i < 3000 && refused < 200; i++) {
        try {
          await clients.signalLog.append(goal(`agent:main:filler-${i}`, { summary: "x".repeat(190), runId: "r".repeat(250) }));
        } catch (err) {
          assert.equal((err as { code: number }).code, status.RESOURCE_EXHAUSTED);
          refused++;
        }
      }
      assert.equal(refused, 200);
      assert.equal(await metric("sessionstate_storage_full"), "1");
      assert.equal(await metric("sessionstate_storage_full_refusals_total"), "200");
      store!.limitPages(undefined);
      await clients.signalLog.append(goal("agent:main:after"));
      assert.equal(await metric("sessionstate_storage_full"), "0");
      await assertStatus(clients.reconcile.sessionStatus({ session: { key: "agent:main:a" }, changesSince: 99n }), status.OUT_OF_RANGE);

      const about = lines.filter((line) => /full|writable/.test(line.msg));
      assert.deepEqual(
        about.map((line) => [line.level, line.msg]),
        [
          [50, "storage is full: writes are refused until space is freed"],
          [30, "storage is writable again"],
        ],
      );
      assert.equal(lines.filter((line) => line.err !== undefined).length, 0, "no stack trace per refused write");
    } finally {
      clients.close();
      await server.close();
      dir.remove();
    }
  });
});
