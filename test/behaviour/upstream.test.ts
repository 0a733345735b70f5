import assert from "node:assert/strict";
import { appendFileSync, mkdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { RemoteItemKind } from "../../gen/sessionstate/v1/upstream_pb.js";
import { assertStatus, dayMs, metricValue, scrapeMetrics, startTestServer, status, subscribe, tempDir, type TestServer } from "../support/helpers.js";
import type { Store } from "../../src/store/store.js";

const S = "agent:main:adopted";
const W = "agent:main:main";

const row = (value: unknown): string => `${JSON.stringify(value)}\n`;
const prompt = (text: string, timestamp: string) => row({ type: "user", message: { role: "user", content: text }, timestamp });
const assistant = (text: string) => row({ type: "assistant", message: { role: "assistant", content: [{ type: "text", text }] } });

describe("Upstream: adopted sessions and the monitor", () => {
  let t: TestServer;
  let root: { dir: string; remove: () => void };
  let file: string;

  beforeEach(async () => {
    root = tempDir();
    file = join(realpathSync(root.dir), "session.jsonl");
    writeFileSync(file, prompt("the very first prompt", "2026-12-01T10:00:00Z"));
    // A long interval: ticks in these tests come from ScanNow only.
    t = await startTestServer({ transcriptRoot: realpathSync(root.dir), monitorIntervalMs: 86_400_000 });
  });
  afterEach(async () => {
    await t.dispose();
    root.remove();
  });

  const adoptLocal = (path = file, key = S) =>
    t.upstream.adopt({ session: { key }, catalogId: "claude", hostId: "host-1", source: { case: "localTranscript", value: { path } } });
  const linkOf = async (key = S) => (await t.upstream.listUpstreamLinks({})).links.find((l) => l.session?.key === key);
  const eventsOf = async (key = S) =>
    (await t.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events;

  test("adoption records one adopted event and links the file at its current end", async () => {
    const adopted = await adoptLocal();
    assert.equal(adopted.linked, true);
    assert.equal(adopted.reason, "");
    assert.equal(adopted.event?.kind, EventKind.ADOPTED);
    assert.equal(adopted.event?.actorType, ActorType.HUMAN);
    assert.equal(adopted.event?.summary, "adopted from claude");
    assert.equal(adopted.event?.payload?.catalogId, "claude");
    assert.equal(adopted.event?.payload?.hostId, "host-1");
    assert.equal(adopted.link?.source, `file:${file}`);
    assert.equal(adopted.link?.marker, String(Buffer.byteLength(prompt("the very first prompt", "2026-12-01T10:00:00Z"))));
    const again = await adoptLocal();
    assert.equal(again.event?.sequence, adopted.event?.sequence, "adopted is recorded once per session");
    assert.equal((await eventsOf()).length, 1);
    const sessions = await t.reconcile.listSessions({});
    assert.equal(sessions.sessions[0]?.hasUpstream, true);
  });

  test("of assistant, tool-result, inter-session, meta rows and one prompt, only the prompt is a human turn", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const at = new Date(t.clock.nowMs() - 60_000).toISOString();
    appendFileSync(
      file,
      assistant("working on it") +
        row({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "x", content: "ok" }] } }) +
        prompt("[Inter-session message] from agent:main:other", at) +
        row({ type: "user", isMeta: true, message: { role: "user", content: "meta" } }) +
        prompt("please also update the docs", at),
    );
    const scan = await t.upstream.scanNow({});
    assert.deepEqual([scan.linksScanned, scan.eventsRecorded, scan.linksHeld], [1, 1, 0]);
    const events = await eventsOf();
    assert.deepEqual(events.map((e) => e.kind), [EventKind.ADOPTED, EventKind.HUMAN_DIRECT_MESSAGE]);
    const human = events[1]!;
    assert.equal(human.actorType, ActorType.HUMAN);
    assert.equal(human.summary, "human message via claude");
    assert.equal(timestampMs(human.occurredAt!), Date.parse(at));
    assert.equal(human.payload?.turns, 0, "turns is set only for more than one");
    const notices = await stream.noticesBeforeBarrier();
    assert.deepEqual(notices.map((n) => n.notifiedVersion), [human.sequence]);
    stream.call.cancel();
  });

  test("a prompt queued while the agent was busy counts; a queued task notification, a bash notification and a tool result beside text do not", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const at = new Date(t.clock.nowMs() - 30_000).toISOString();
    appendFileSync(
      file,
      row({
        type: "attachment",
        attachment: { type: "queued_command", prompt: "<task-notification>done</task-notification>", commandMode: "task-notification", origin: { kind: "task-notification" } },
      }) +
        prompt("<bash-notification>shell exited</bash-notification>", at) +
        row({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "Tool loaded." }, { type: "text", text: "Tool loaded." }] } }) +
        row({ type: "attachment", attachment: { type: "queued_command", prompt: "and check the logs", commandMode: "prompt", origin: { kind: "human" } }, timestamp: at }),
    );
    const scan = await t.upstream.scanNow({});
    assert.deepEqual([scan.linksScanned, scan.eventsRecorded], [1, 1]);
    const events = await eventsOf();
    assert.deepEqual(events.map((e) => e.kind), [EventKind.ADOPTED, EventKind.HUMAN_DIRECT_MESSAGE]);
    assert.equal(events[1]!.payload?.turns, 0, "one human turn");
    assert.equal(timestampMs(events[1]!.occurredAt!), Date.parse(at));
  });

  test("no growth records nothing; a pass without human turns only advances the marker", async () => {
    const adopted = await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    assert.deepEqual((await t.upstream.scanNow({})).eventsRecorded, 0);
    assert.equal((await linkOf())?.marker, adopted.link?.marker);
    appendFileSync(file, assistant("more work"));
    const scan = await t.upstream.scanNow({});
    assert.deepEqual([scan.linksScanned, scan.eventsRecorded], [1, 0]);
    assert.equal((await linkOf())?.marker, String(Number(adopted.link?.marker) + Buffer.byteLength(assistant("more work"))));
    assert.equal((await eventsOf()).length, 1);
  });

  test("several prompts give one event with turns, timed at the newest (clamped)", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    appendFileSync(file, prompt("one", "2020-01-01T00:00:00Z") + prompt("two", "2020-01-02T00:00:00Z"));
    await t.upstream.scanNow({});
    const human = (await eventsOf())[1]!;
    assert.equal(human.payload?.turns, 2);
    assert.equal(timestampMs(human.occurredAt!), t.clock.nowMs() - dayMs);
  });

  test("a row written in two parts is counted once, on the tick after it completes", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const line = prompt("split across writes", new Date(t.clock.nowMs()).toISOString());
    const before = (await linkOf())?.marker;
    appendFileSync(file, line.slice(0, 20));
    assert.equal((await t.upstream.scanNow({})).eventsRecorded, 0);
    assert.equal((await linkOf())?.marker, before, "a partial line is not consumed");
    appendFileSync(file, line.slice(20));
    assert.equal((await t.upstream.scanNow({})).eventsRecorded, 1);
    assert.equal((await t.upstream.scanNow({})).eventsRecorded, 0);
    assert.equal((await eventsOf()).filter((e) => e.kind === EventKind.HUMAN_DIRECT_MESSAGE).length, 1);
  });

  test("big rows are classified whole and no byte is skipped; a 20 MiB line is classified by streaming", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const big = (bytes: number) => {
      const shell = assistant("");
      return assistant("x".repeat(bytes - Buffer.byteLength(shell)));
    };
    const at = new Date(t.clock.nowMs()).toISOString();
    const batch = big(1024 * 1024 - 200) + prompt("after a big row", at) + big(512 * 1024);
    appendFileSync(file, batch);
    const scan = await t.upstream.scanNow({});
    assert.deepEqual([scan.eventsRecorded, scan.linksHeld], [1, 0]);
    let end = Buffer.byteLength(prompt("the very first prompt", "2026-12-01T10:00:00Z")) + Buffer.byteLength(batch);
    assert.equal((await linkOf())?.marker, String(end));

    // Past --max-line-bytes (16 MiB): an agent's huge row is not human, the prompt behind it is.
    const huge = big(20 * 1024 * 1024) + prompt("behind the huge line", at);
    appendFileSync(file, huge);
    const streamed = await t.upstream.scanNow({});
    assert.deepEqual([streamed.linksScanned, streamed.eventsRecorded, streamed.linksHeld], [1, 1, 0]);
    end += Buffer.byteLength(huge);
    assert.equal((await linkOf())?.marker, String(end), "the marker moves past the huge line");

    // A person's prompt with a pasted 20 MiB image is one human turn; while its newline is missing it waits.
    const pasted = row({
      type: "user",
      message: { role: "user", content: [{ type: "image", source: { type: "base64", data: "QUJD".repeat(5 * 1024 * 1024) } }, { type: "text", text: "what is on this screenshot?" }] },
      timestamp: at,
    });
    appendFileSync(file, pasted.slice(0, -1));
    const waiting = await t.upstream.scanNow({});
    assert.deepEqual([waiting.eventsRecorded, waiting.linksHeld], [0, 1]);
    assert.equal((await linkOf())?.marker, String(end), "a long line still being written waits at its start");
    appendFileSync(file, "\n");
    const pastedScan = await t.upstream.scanNow({});
    assert.deepEqual([pastedScan.eventsRecorded, pastedScan.linksHeld], [1, 0]);
    assert.equal((await linkOf())?.marker, String(end + Buffer.byteLength(pasted)));
  });

  test("a prompt equal to a recorded own text is the gateway's echo; a different one counts", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    await t.upstream.recordOwnUserText({ session: { key: S }, text: "run the   tests\n" });
    const at = new Date(t.clock.nowMs()).toISOString();
    appendFileSync(file, prompt("  run the tests ", at));
    assert.equal((await t.upstream.scanNow({})).eventsRecorded, 0);
    appendFileSync(file, prompt("Run the tests", at));
    assert.equal((await t.upstream.scanNow({})).eventsRecorded, 1);
    await assertStatus(t.upstream.recordOwnUserText({ session: { key: S }, text: "  " }), status.INVALID_ARGUMENT, "text:");
  });

  test("while a run is active the session is not scanned; afterwards the scan starts from the old marker", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const marker = (await linkOf())?.marker;
    await t.upstream.setRunActive({ session: { key: S }, active: true });
    appendFileSync(file, prompt("typed during the run", new Date(t.clock.nowMs()).toISOString()));
    assert.deepEqual((await t.upstream.scanNow({})).linksScanned, 0);
    assert.equal((await linkOf())?.marker, marker);
    await t.upstream.setRunActive({ session: { key: S }, active: false });
    const scan = await t.upstream.scanNow({});
    assert.deepEqual([scan.linksScanned, scan.eventsRecorded], [1, 1]);
  });

  test("three consecutive misses record one upstream_missing and remove the link; a return resets the count", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const content = prompt("the very first prompt", "2026-12-01T10:00:00Z");
    rmSync(file);
    await t.upstream.scanNow({});
    await t.upstream.scanNow({});
    assert.equal((await linkOf())?.missedChecks, 2);
    writeFileSync(file, content);
    await t.upstream.scanNow({});
    assert.equal((await linkOf())?.missedChecks, 0, "any other outcome resets the streak");
    rmSync(file);
    await t.upstream.scanNow({});
    t = await t.restart();
    assert.equal((await linkOf())?.missedChecks, 1, "the streak is durable");
    await t.upstream.scanNow({});
    const third = await t.upstream.scanNow({});
    assert.equal(third.eventsRecorded, 1);
    assert.equal(await linkOf(), undefined);
    const missing = (await eventsOf()).filter((e) => e.kind === EventKind.UPSTREAM_MISSING);
    assert.equal(missing.length, 1);
    assert.equal(missing[0]?.actorType, ActorType.SYSTEM);
    assert.equal(missing[0]?.summary, "upstream missing via claude");
    assert.equal((await t.upstream.scanNow({})).linksScanned, 0);
    const pending = subscribe(t, [W]);
    const synced = await pending.untilSynced();
    assert.deepEqual(synced.notices.map((n) => n.notifiedVersion), [missing[0]?.sequence]);
    pending.call.cancel();
  });

  test("re-adopting the same source keeps the marker; a new source starts at its end", async () => {
    await adoptLocal();
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const marker = (await linkOf())?.marker;
    appendFileSync(file, prompt("unread yet", new Date(t.clock.nowMs()).toISOString()));
    const again = await adoptLocal();
    assert.equal(again.link?.marker, marker);
    const other = join(realpathSync(root.dir), "other.jsonl");
    writeFileSync(other, assistant("elsewhere"));
    const moved = await adoptLocal(other);
    assert.equal(moved.link?.source, `file:${other}`);
    assert.equal(moved.link?.marker, String(Buffer.byteLength(assistant("elsewhere"))));
    assert.equal((await t.upstream.scanNow({})).eventsRecorded, 0);
  });

  test("paths outside the root are PERMISSION_DENIED and nothing is recorded; non-files are declined", async () => {
    const outside = tempDir();
    try {
      writeFileSync(join(outside.dir, "secret.jsonl"), assistant("secret"));
      symlinkSync(join(outside.dir, "secret.jsonl"), join(root.dir, "link.jsonl"));
      const escape = await assertStatus(adoptLocal("../../etc/passwd"), status.PERMISSION_DENIED, "outside the transcript root");
      assert.doesNotMatch(escape.details, /passwd|\/etc/);
      await assertStatus(adoptLocal(join(outside.dir, "secret.jsonl")), status.PERMISSION_DENIED);
      const viaLink = await assertStatus(adoptLocal("link.jsonl"), status.PERMISSION_DENIED, "symlink");
      assert.doesNotMatch(viaLink.details, new RegExp(outside.dir));
      assert.equal((await t.reconcile.sessionStatus({ session: { key: S } })).stateVersion, 0n);
      mkdirSync(join(root.dir, "folder"));
      const folder = await adoptLocal("folder");
      assert.equal(folder.linked, false);
      assert.match(folder.reason, /not a regular file/);
      const missing = await adoptLocal("nope.jsonl", "agent:main:other");
      assert.equal(missing.linked, false);
      assert.match(missing.reason, /does not exist/);
      assert.equal(await linkOf(), undefined);
    } finally {
      outside.remove();
    }
  });

  test("a paired-node page is classified from the marker; a page without a newest uuid changes nothing", async () => {
    const declined = await t.upstream.adopt({
      session: { key: S },
      catalogId: "claude-remote",
      source: { case: "pairedNode", value: { nodeId: "node-7", newestItemUuid: "" } },
    });
    assert.deepEqual([declined.linked, declined.reason], [false, "the thread's newest item has no uuid"]);
    const adopted = await t.upstream.adopt({
      session: { key: S },
      catalogId: "claude-remote",
      threadId: "thread-1",
      source: { case: "pairedNode", value: { nodeId: "node-7", newestItemUuid: "item-1" } },
    });
    assert.deepEqual([adopted.linked, adopted.link?.source, adopted.link?.marker], [true, "node:node-7", "item-1"]);
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    const at = t.clock.nowMs() - 1000;
    const page = [
      { uuid: "item-3", kind: RemoteItemKind.AGENT_MESSAGE, text: "on it" },
      { uuid: "item-2", kind: RemoteItemKind.USER_MESSAGE, text: "native prompt", occurredAt: timestampFromMs(at) },
      { uuid: "item-1", kind: RemoteItemKind.USER_MESSAGE, text: "already seen" },
    ];
    const report = await t.upstream.reportRemoteItems({ session: { key: S }, items: page });
    assert.equal(report.humanTurns, 1);
    assert.equal(report.event?.kind, EventKind.HUMAN_DIRECT_MESSAGE);
    assert.equal(report.event?.summary, "human message via claude-remote");
    assert.equal(timestampMs(report.event!.occurredAt!), at);
    assert.equal((await linkOf())?.marker, "item-3");
    const again = await t.upstream.reportRemoteItems({ session: { key: S }, items: page });
    assert.deepEqual([again.humanTurns, again.event], [0, undefined]);
    const noUuid = await t.upstream.reportRemoteItems({
      session: { key: S },
      items: [{ uuid: "", kind: RemoteItemKind.USER_MESSAGE, text: "x" }, ...page],
    });
    assert.equal(noUuid.humanTurns, 0);
    assert.equal((await linkOf())?.marker, "item-3");
    // A marker not in the page: the whole page is new.
    const fresh = await t.upstream.reportRemoteItems({
      session: { key: S },
      items: [
        { uuid: "item-9", kind: RemoteItemKind.USER_MESSAGE, text: "a" },
        { uuid: "item-8", kind: RemoteItemKind.USER_MESSAGE, text: "[Inter-session message] b" },
        { uuid: "item-7", kind: RemoteItemKind.USER_MESSAGE, text: "c" },
      ],
    });
    assert.equal(fresh.humanTurns, 2);
    assert.equal(fresh.event?.payload?.turns, 2);
    await assertStatus(
      t.upstream.reportRemoteItems({ session: { key: S }, items: Array.from({ length: 51 }, (_, i) => ({ uuid: `u${i}` })) }),
      status.INVALID_ARGUMENT,
      "items:",
    );
    await assertStatus(
      t.upstream.reportRemoteItems({ session: { key: "agent:main:unlinked" }, items: page }),
      status.FAILED_PRECONDITION,
    );
  });

  test("an adopted session nobody watches is never read", async () => {
    await adoptLocal();
    appendFileSync(file, prompt("nobody listens", new Date(t.clock.nowMs()).toISOString()));
    assert.deepEqual((await t.upstream.scanNow({})).linksScanned, 0);
    assert.equal((await eventsOf()).length, 1);
  });

  test("DeleteSession removes the link; ListUpstreamLinks pages and filters by agent", async () => {
    await adoptLocal(file, "agent:main:a");
    await adoptLocal(file, "agent:main:b");
    await adoptLocal(file, "agent:ops:c");
    const first = await t.upstream.listUpstreamLinks({ pageSize: 2 });
    assert.deepEqual(first.links.map((l) => l.session?.key), ["agent:main:a", "agent:main:b"]);
    const second = await t.upstream.listUpstreamLinks({ pageSize: 2, pageToken: first.nextPageToken });
    assert.deepEqual(second.links.map((l) => l.session?.key), ["agent:ops:c"]);
    assert.equal(second.nextPageToken, "");
    assert.deepEqual((await t.upstream.listUpstreamLinks({ agentId: "ops" })).links.map((l) => l.session?.key), ["agent:ops:c"]);
    const removed = await t.signalLog.deleteSession({ session: { key: "agent:main:a" } });
    assert.equal(removed.linkRemoved, true);
    assert.equal(removed.eventsRemoved, 1);
    assert.equal((await t.upstream.listUpstreamLinks({})).links.length, 2);
  });

  test("a local transcript is adopted only under a catalog with a classifier; paired-node links take any catalog", async () => {
    const adoptUnder = (catalogId: string, key: string) =>
      t.upstream.adopt({ session: { key }, catalogId, hostId: "h", source: { case: "localTranscript", value: { path: file } } });
    const refused = await adoptUnder("gemini", "agent:main:g").then(
      () => assert.fail("adopted under a catalog with no classifier"),
      (err: { code: number; details: string }) => err,
    );
    assert.equal(refused.code, status.INVALID_ARGUMENT);
    assert.equal(refused.details, 'catalog_id: has no transcript classifier for local transcripts: "gemini" (known: claude, claude-code, codex, pi)');
    assert.equal((await linkOf("agent:main:g")), undefined);
    assert.equal((await eventsOf("agent:main:g")).length, 0, "a refused adoption records nothing");
    for (const [catalogId, key] of [["claude", "agent:main:c1"], ["claude-code", "agent:main:c2"], ["codex", "agent:main:c3"]] as const) {
      assert.equal((await adoptUnder(catalogId, key)).linked, true, catalogId);
      assert.equal((await linkOf(key))?.catalogId, catalogId);
    }
    const remote = await t.upstream.adopt({ session: { key: "agent:main:r" }, catalogId: "gemini", source: { case: "pairedNode", value: { nodeId: "n1", newestItemUuid: "u1" } } });
    assert.equal(remote.linked, true);
  });

  test("bad adoption requests are INVALID_ARGUMENT naming the field", async () => {
    await assertStatus(t.upstream.adopt({ session: { key: S }, catalogId: "c" }), status.INVALID_ARGUMENT, "source:");
    await assertStatus(
      t.upstream.adopt({ session: { key: S }, source: { case: "localTranscript", value: { path: file } } }),
      status.INVALID_ARGUMENT,
      "catalog_id:",
    );
    await assertStatus(
      t.upstream.adopt({ session: { key: S }, catalogId: "c", source: { case: "pairedNode", value: { newestItemUuid: "x" } } }),
      status.INVALID_ARGUMENT,
      "paired_node.node_id:",
    );
  });
});

describe("a local link whose catalog has no classifier (adopted by an earlier version)", () => {
  test("is never scanned: the monitor counts it as unclassifiable and its marker never moves", async () => {
    const root = tempDir();
    const dir = realpathSync(root.dir);
    const path = join(dir, "s.jsonl");
    writeFileSync(path, "");
    let store: Store | undefined;
    const t = await startTestServer({ transcriptRoot: dir, monitorIntervalMs: 86_400_000, metricsListen: { host: "127.0.0.1", port: 0 } }, undefined, (opened) => {
      store = opened;
    });
    try {
      const session = { namespace: "default", agentId: "main", key: S };
      const nowMs = t.clock.nowMs();
      await store!.adopt({
        adoptedEvent: { session, kind: "adopted", actorType: "system", summary: "adopted from gemini", occurredAtMs: nowMs, nowMs, payload: {}, notifyWatcherKeys: [], onlyIfWatched: false },
        link: { session, catalogId: "gemini", hostId: "", threadId: "", source: { kind: "transcript", path: path }, marker: "0", updatedAtMs: nowMs },
      });
      await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
      appendFileSync(path, prompt("typed by a person, in a format nobody classifies", new Date(nowMs).toISOString()));
      for (let i = 0; i < 2; i++) {
        const scan = await t.upstream.scanNow({});
        assert.deepEqual([scan.linksScanned, scan.eventsRecorded, scan.linksHeld], [0, 0, 0]);
      }
      assert.equal((await t.upstream.listUpstreamLinks({})).links[0]?.marker, "0", "the marker never moves");
      const metrics = await scrapeMetrics(t.server.metricsPort);
      assert.equal(metricValue(metrics, 'sessionstate_monitor_links_total{outcome="unclassifiable"}'), 2);
    } finally {
      await t.dispose();
      root.remove();
    }
  });
});

describe("Upstream without a transcript root", () => {
  test("local adoption is FAILED_PRECONDITION naming the setting that enables it", async () => {
    const t = await startTestServer();
    try {
      await assertStatus(
        t.upstream.adopt({ session: { key: S }, catalogId: "c", source: { case: "localTranscript", value: { path: "/tmp/x.jsonl" } } }),
        status.FAILED_PRECONDITION,
        "--transcript-root",
      );
    } finally {
      await t.dispose();
    }
  });
});
