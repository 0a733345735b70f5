import assert from "node:assert/strict";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { type LineSink, readCompleteLines } from "../../src/upstream/transcript-reader.js";
import { normalizeUserText, SessionActivity } from "../../src/upstream/session-activity.js";
import { FakeClock, openTestStore, tempDir } from "../support/helpers.js";

describe("transcript reader", () => {
  /** A sink that collects whole lines, and long lines as the pieces they were streamed in. */
  const collector = () => {
    const lines: string[] = [];
    const long: { pieces: number; text: string; ended: boolean }[] = [];
    const sink: LineSink = {
      line: (bytes) => lines.push(bytes.toString()),
      longLine: () => {
        const entry = { pieces: 0, text: "", ended: false };
        long.push(entry);
        return {
          write: async (piece) => {
            entry.pieces++;
            entry.text += piece.toString();
          },
          end: async () => {
            entry.ended = true;
          },
        };
      },
    };
    return { lines, long, sink };
  };

  test("reads complete lines only, in order, and leaves a partial line for later", async () => {
    const dir = tempDir();
    try {
      const path = join(dir.dir, "t.jsonl");
      writeFileSync(path, "one\ntwo\nthr");
      const { lines, sink } = collector();
      const first = await readCompleteLines(path, 0, 1024, sink);
      assert.deepEqual(lines, ["one", "two"]);
      assert.deepEqual(first, { endOffset: 8 });
      appendFileSync(path, "ee\n");
      const second = await readCompleteLines(path, first.endOffset, 1024, sink);
      assert.deepEqual(lines, ["one", "two", "three"]);
      assert.deepEqual(second, { endOffset: 14 });
      assert.deepEqual(await readCompleteLines(path, 0, 1024, collector().sink, 1), { endOffset: 4 }, "maxLines stops after the first line");
    } finally {
      dir.remove();
    }
  });

  test("lines spanning many chunks are whole; a line over the limit streams in pieces, and reading goes on after it", async () => {
    const dir = tempDir();
    try {
      const path = join(dir.dir, "big.jsonl");
      const long = "a".repeat(200_000);
      const over = "b".repeat(300_001);
      writeFileSync(path, `x\n${long}\n${over}\nafter\n`);
      const { lines, long: streamed, sink } = collector();
      const read = await readCompleteLines(path, 0, 300_000, sink);
      assert.deepEqual(lines.map((line) => line.length), [1, 200_000, 5]);
      assert.equal(streamed.length, 1);
      assert.equal(streamed[0]!.text, over, "every byte of the long line, in order");
      assert.ok(streamed[0]!.pieces >= 5, `streamed in ${streamed[0]!.pieces} pieces`);
      assert.equal(streamed[0]!.ended, true);
      assert.deepEqual(read, { endOffset: 2 + 200_001 + 300_002 + 6 });
      const exact = collector();
      await readCompleteLines(path, 0, 300_001, exact.sink);
      assert.deepEqual(exact.lines.map((line) => line.length), [1, 200_000, 300_001, 5]);
      assert.equal(exact.long.length, 0);
    } finally {
      dir.remove();
    }
  });

  test("a long line still being written (no newline yet) waits: the offset stays at its start", async () => {
    const dir = tempDir();
    try {
      const path = join(dir.dir, "growing.jsonl");
      writeFileSync(path, `x\n${"c".repeat(5000)}`);
      const { lines, long, sink } = collector();
      assert.deepEqual(await readCompleteLines(path, 0, 1024, sink), { endOffset: 2, longLineWaitingAt: 2 });
      assert.deepEqual(lines, ["x"]);
      assert.equal(long[0]!.ended, false, "never ended: it is not complete");
      appendFileSync(path, "\n");
      const again = collector();
      assert.deepEqual(await readCompleteLines(path, 2, 1024, again.sink), { endOffset: 5003 });
      assert.equal(again.long[0]!.text.length, 5000);
    } finally {
      dir.remove();
    }
  });
});

describe("what gateways report for the monitor, kept in the store", () => {
  const withActivity = async (body: (activity: SessionActivity, clock: FakeClock, reopen: () => Promise<SessionActivity>) => Promise<void>) => {
    const dir = tempDir();
    const path = join(dir.dir, "activity.db");
    const clock = new FakeClock();
    let store = openTestStore(path);
    try {
      await body(new SessionActivity(store, clock), clock, async () => {
        await store.close();
        store = openTestStore(path);
        return new SessionActivity(store, clock);
      });
    } finally {
      await store.close();
      dir.remove();
    }
  };
  const session = { namespace: "default", agentId: "main", key: "agent:main:main" };

  test("keeps the 10 most recent own texts, compared normalised and case-sensitively, per session", () =>
    withActivity(async (activity) => {
      assert.equal(normalizeUserText("  hello \n\t world  "), "hello world");
      await activity.recordOwnText(session, "Deploy  the\nservice");
      let isEcho = await activity.ownEchoTest(session);
      assert.equal(isEcho(" Deploy the service "), true);
      assert.equal(isEcho("deploy the service"), false);
      assert.equal((await activity.ownEchoTest({ namespace: "default", agentId: "ops", key: "agent:main:main" }))("Deploy the service"), false);
      for (let i = 0; i < 10; i++) await activity.recordOwnText(session, `text ${i}`);
      isEcho = await activity.ownEchoTest(session);
      assert.equal(isEcho("Deploy the service"), false, "the 11th most recent is forgotten");
      assert.equal(isEcho("text 0"), true);
      assert.equal(isEcho("text 9"), true);
    }));

  test("deleting a session forgets its run flag and own texts", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "delete.db"));
    try {
      const activity = new SessionActivity(store, new FakeClock());
      await activity.setRunActive(session, true);
      await activity.recordOwnText(session, "hello");
      await store.deleteSession(session);
      assert.deepEqual(await activity.runState(session), { active: false, starts: 0 });
      assert.equal((await activity.ownEchoTest(session))("hello"), false);
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("a run flag counts runs started, survives a restart, and expires 6 hours after its last report", () =>
    withActivity(async (activity, clock, reopen) => {
      assert.deepEqual(await activity.runState(session), { active: false, starts: 0 });
      await activity.setRunActive(session, true);
      await activity.recordOwnText(session, "hello");
      assert.deepEqual(await activity.runState(session), { active: true, starts: 1 });
      const again = await reopen();
      assert.deepEqual(await again.runState(session), { active: true, starts: 1 }, "a restart keeps the flag");
      assert.equal((await again.ownEchoTest(session))("hello"), true, "and the own texts");
      clock.advance(6 * 60 * 60 * 1000 - 1);
      assert.deepEqual(await again.runState(session), { active: true, starts: 1 });
      clock.advance(1);
      assert.deepEqual(await again.runState(session), { active: false, starts: 1 }, "a crashed gateway's flag expires");
      await again.setRunActive(session, true);
      assert.deepEqual(await again.runState(session), { active: true, starts: 2 }, "a refresh counts again");
      await again.setRunActive(session, false);
      assert.deepEqual(await again.runState(session), { active: false, starts: 2 });
    }));
});
