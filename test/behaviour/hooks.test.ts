/**
 * The CLIs' hooks (SPEC §8.2, issue 40): a hook call to the HTTP port is answered 204 at once and triggers
 * a scan of the links it names, by the monitor's own rules, looking again until the prompt's row is there.
 * The monitor's own tick is a day away in these tests: every notice here comes from a hook.
 * Payloads: test/fixtures/hooks (recorded from Claude Code 2.1.197 and Codex 0.171.0; see its README).
 */
import assert from "node:assert/strict";
import { appendFileSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { metricValue, scrapeMetrics, startTestServer, subscribe, tempDir, type NoticeReader, type TestServer } from "../support/helpers.js";
import { rawHttp } from "../support/raw-http.js";

const W = "agent:main:main";
const S = "agent:main:adopted";
const fixtures = new URL("../fixtures/hooks/", import.meta.url);
/** A recorded hook payload of `name` (test/fixtures/hooks/NAME.json), with fields replaced. */
function payload(name: string, fields: Record<string, unknown>): Record<string, unknown> {
  return { ...(JSON.parse(readFileSync(new URL(`${name}.json`, fixtures), "utf8")) as Record<string, unknown>), ...fields };
}
const row = (value: unknown): string => `${JSON.stringify(value)}\n`;
/** A Claude Code user row, as 2.1.197 writes a typed prompt (shortened: test/fixtures/hooks/README.md). */
const claudePrompt = (text: string, promptId: string, sessionId: string) =>
  row({ type: "user", message: { role: "user", content: text }, promptId, sessionId, promptSource: "typed", timestamp: new Date().toISOString() });
const assistant = (text: string) => row({ type: "assistant", message: { role: "assistant", content: [{ type: "text", text }] } });

describe("the CLIs' hooks", () => {
  let t: TestServer;
  let root: { dir: string; remove: () => void };
  let rootPath: string;
  let file: string;
  let http: string;
  let stream: NoticeReader;

  beforeEach(async () => {
    root = tempDir();
    rootPath = realpathSync(root.dir);
    file = join(rootPath, "project", "11111111-2222-3333-4444-555555555555.jsonl");
    mkdirSync(join(rootPath, "project"));
    writeFileSync(file, assistant("earlier work"));
    t = await startTestServer({ transcriptRoot: rootPath, monitorIntervalMs: 86_400_000, metricsListen: { host: "127.0.0.1", port: 0 }, httpListen: { host: "127.0.0.1", port: 0 } });
    http = t.server.httpAddress!;
    await t.upstream.adopt({ session: { key: S }, catalogId: "claude", threadId: "11111111-2222-3333-4444-555555555555", source: { case: "localTranscript", value: { path: file } } });
    await t.watch.watch({ watcherSessionKey: W, target: { key: S } });
    stream = subscribe(t, [W]);
    await stream.untilSynced();
  });
  afterEach(async () => {
    stream.call.cancel();
    await t.dispose();
    root.remove();
  });

  const post = (cli: string, body: unknown, headers: Record<string, string> = {}) =>
    rawHttp(http, { method: "POST", path: `/hooks/${cli}`, headers: { host: http, "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const claudeCall = (promptId: string, extra: Record<string, unknown> = {}) =>
    payload("claude-user-prompt-submit", { session_id: "11111111-2222-3333-4444-555555555555", transcript_path: file, cwd: rootPath, prompt_id: promptId, ...extra });
  const humanEvents = async () =>
    (await t.reconcile.sessionStatus({ session: { key: S }, changesSince: 0n })).stateChanges!.events.filter((e) => e.kind === EventKind.HUMAN_DIRECT_MESSAGE);
  const metrics = async () => scrapeMetrics(t.server.metricsPort);

  for (const delayMs of [0, 150, 1500]) {
    test(`a Claude Code prompt whose row is written ${delayMs} ms after the hook call reaches the watcher at once, not at the next tick`, async () => {
      const started = performance.now();
      const answer = await post("claude", claudeCall("prompt-1"));
      assert.deepEqual([answer.status, answer.text], [204, ""]);
      const answeredMs = performance.now() - started;
      await sleep(delayMs);
      appendFileSync(file, claudePrompt("please stop and look at the failing test", "prompt-1", "11111111-2222-3333-4444-555555555555"));
      const notice = await stream.nextNotice();
      const ms = performance.now() - started;
      console.log(`hook answered in ${answeredMs.toFixed(1)} ms; row written ${delayMs} ms after the call; notice ${ms.toFixed(0)} ms after the call`);
      assert.equal(notice.target?.key, S);
      const events = await humanEvents();
      assert.deepEqual(events.map((e) => e.summary), ["human message via claude"]);
      assert.equal(notice.notifiedVersion, events[0]!.sequence);
      const text = await metrics();
      assert.equal(metricValue(text, 'sessionstate_hook_calls_total{cli="claude",outcome="matched"}'), 1);
      assert.equal(metricValue(text, "sessionstate_hook_to_event_seconds_count"), 1);
    });
  }

  test("the session id finds the link when the call names no transcript, or one that matches none", async () => {
    for (const [i, extra] of [{ transcript_path: undefined }, { transcript_path: join(rootPath, "project", "other.jsonl") }].entries()) {
      assert.equal((await post("claude", claudeCall(`p-${i}`, extra))).status, 204);
      appendFileSync(file, claudePrompt(`prompt ${i}`, `p-${i}`, "11111111-2222-3333-4444-555555555555"));
      const notice = await stream.nextNotice();
      await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: notice.target!, notifiedVersion: notice.notifiedVersion }] });
    }
    assert.equal((await humanEvents()).length, 2);
  });

  test("a Codex hook (its command form's stdin) scans the rollout it names, and its prompt row is seen", async () => {
    const rollout = join(rootPath, "rollout-2026-12-06T10-00-00-codex.jsonl");
    writeFileSync(rollout, row({ timestamp: new Date().toISOString(), type: "session_meta", payload: { id: "019a-codex", cwd: rootPath, originator: "codex_exec", cli_version: "0.169.0", source: "exec" } }));
    const C = "agent:main:codex";
    await t.upstream.adopt({ session: { key: C }, catalogId: "codex", threadId: "019a-codex", source: { case: "localTranscript", value: { path: rollout } } });
    await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    assert.equal((await post("codex", payload("codex-user-prompt-submit", { session_id: "019a-codex", transcript_path: rollout, cwd: rootPath, turn_id: "turn-7" }))).status, 204);
    await sleep(150);
    // As Codex 0.171 writes a prompt: an item_completed UserMessage naming the hook's turn_id.
    const item = { type: "UserMessage", id: "item-1", content: [{ type: "text", text: "run the tests again", text_elements: [] }] };
    appendFileSync(rollout, row({ timestamp: new Date().toISOString(), type: "event_msg", payload: { type: "item_completed", thread_id: "019a-codex", turn_id: "turn-7", item } }));
    const notice = await stream.nextNotice();
    assert.equal(notice.target?.key, C);
    const events = (await t.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n })).stateChanges!.events;
    assert.deepEqual(events.map((e) => e.summary), ["adopted from codex", "human message via codex"]);
  });

  test("the gateway's own prompt (its text reported first) opens no notice, and the scan stops looking once its row is read", async () => {
    const text = "continue with step 3 of the plan";
    await t.upstream.recordOwnUserText({ session: { key: S }, text });
    const started = performance.now();
    assert.equal((await post("claude", claudeCall("own-1"))).status, 204);
    await sleep(150);
    appendFileSync(file, claudePrompt(text, "own-1", "11111111-2222-3333-4444-555555555555"));
    // The loop ends once it has read the row: after that, the marker is past it.
    const size = String(Buffer.byteLength(readFileSync(file)));
    for (;;) {
      const link = (await t.upstream.listUpstreamLinks({})).links.find((l) => l.session?.key === S);
      if (link?.marker === size) break;
      assert.ok(performance.now() - started < 5000, "the row was read");
      await sleep(10);
    }
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    assert.equal((await humanEvents()).length, 0);
    assert.match(await metrics(), /sessionstate_monitor_rows_total\{class="injected"\} 1/);
  });

  test("while a run is active the scan waits, and SetRunActive(false) runs it at once", async () => {
    await t.upstream.setRunActive({ session: { key: S }, active: true });
    assert.equal((await post("claude", claudeCall("queued-1"))).status, 204);
    appendFileSync(file, claudePrompt("a person typed while the agent worked", "queued-1", "11111111-2222-3333-4444-555555555555"));
    await sleep(600);
    assert.equal((await humanEvents()).length, 0, "nothing is read while the run is active");
    const ended = performance.now();
    await t.upstream.setRunActive({ session: { key: S }, active: false });
    const notice = await stream.nextNotice();
    const ms = performance.now() - ended;
    console.log(`deferred hook scan: notice ${ms.toFixed(0)} ms after SetRunActive(false)`);
    // At once, not at the next look at the run flags (every second) or the next tick (a day).
    assert.ok(ms < 800, `${ms.toFixed(0)} ms`);
    assert.equal(notice.target?.key, S);
    assert.equal((await humanEvents()).length, 1);
  });

  test("many calls for one link while it scans make one more scan, not many", async () => {
    appendFileSync(file, claudePrompt("typed once", "burst", "11111111-2222-3333-4444-555555555555"));
    const before = metricValue(await metrics(), 'sessionstate_monitor_links_total{outcome="scanned"}', 0);
    const answers = await Promise.all(Array.from({ length: 50 }, () => post("claude", claudeCall("burst"))));
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([204]));
    await stream.nextNotice();
    await sleep(300);
    const scans = metricValue(await metrics(), 'sessionstate_monitor_links_total{outcome="scanned"}', 0) - before;
    console.log(`50 calls for one link: ${scans} scans`);
    assert.ok(scans >= 1 && scans <= 3, `${scans} scans for 50 calls`);
    assert.equal((await humanEvents()).length, 1);
  });

  test("bad calls get their answers (400, 404, 405, 413), well-formed ones 204 whether they match or not, and nothing outside the root is read", async () => {
    const outside = tempDir();
    try {
      const outsideFile = join(realpathSync(outside.dir), "secret.jsonl");
      writeFileSync(outsideFile, claudePrompt("outside", "x", "s"));
      symlinkSync(outsideFile, join(rootPath, "link-out.jsonl"));
      const cases: Array<[string, string, unknown, number, string]> = [
        ["claude", "not JSON", "{not json", 400, "the body must be a JSON object with a string session_id\n"],
        ["claude", "an array", [], 400, "the body must be a JSON object\n"],
        ["claude", "no session_id", { transcript_path: file }, 400, "session_id must be a non-empty string\n"],
        ["codex", "a number as session_id", { session_id: 7 }, 400, "session_id must be a non-empty string\n"],
        ["claude", "a transcript_path that is not a string", { session_id: "x", transcript_path: 3 }, 400, "transcript_path must be a string\n"],
        ["claude", "over 1 MiB", { session_id: "x", prompt: "x".repeat(1024 * 1024) }, 413, "a hook's body is at most 1048576 bytes\n"],
        ["cursor", "an unknown CLI", { session_id: "x" }, 404, "not found\n"],
        ["claude", "a path outside the root", { session_id: "nobody", transcript_path: outsideFile }, 204, ""],
        ["claude", "a path through a symlink out of the root", { session_id: "nobody", transcript_path: join(rootPath, "link-out.jsonl") }, 204, ""],
        ["claude", "a path escaping with ..", { session_id: "nobody", transcript_path: join(rootPath, "..", "x.jsonl") }, 204, ""],
        ["claude", "a file not adopted", { session_id: "nobody", transcript_path: join(rootPath, "project", "nope.jsonl") }, 204, ""],
        ["gemini", "a Gemini CLI session nobody adopted", payload("gemini-before-agent", {}), 204, ""],
        ["claude", "another event than a prompt", { ...claudeCall("p"), hook_event_name: "Stop" }, 204, ""],
      ];
      for (const [cli, what, body, code, text] of cases) {
        const answer = await post(cli, body);
        assert.deepEqual([answer.status, answer.text], [code, text], what);
      }
      const get = await rawHttp(http, { path: "/hooks/claude", headers: { host: http } });
      assert.equal(get.status, 405);
      // A session id of another namespace: no match here, the same answer.
      const otherNamespace = await post("claude", claudeCall("ns", { transcript_path: undefined }), { "sessionstate-namespace": "team-b" });
      assert.deepEqual([otherNamespace.status, otherNamespace.text], [204, ""]);
      appendFileSync(file, claudePrompt("typed", "ns", "11111111-2222-3333-4444-555555555555"));
      await sleep(300);
      assert.equal((await humanEvents()).length, 0, "a call in team-b scans nothing of default");
      const text = await metrics();
      assert.equal(metricValue(text, 'sessionstate_hook_calls_total{cli="claude",outcome="refused"}'), 5);
      assert.equal(metricValue(text, 'sessionstate_hook_calls_total{cli="codex",outcome="refused"}'), 1);
      assert.equal(metricValue(text, 'sessionstate_hook_calls_total{cli="claude",outcome="unmatched"}'), 6);
      assert.equal(metricValue(text, 'sessionstate_hook_calls_total{cli="gemini",outcome="unmatched"}'), 1);
      assert.equal(metricValue(text, 'sessionstate_hook_calls_total{cli="claude",outcome="matched"}', 0), 0);
      const info = await t.reconcile.getServerInfo({});
      const claude = info.hooks.find((h) => h.cli === "claude")!;
      assert.deepEqual([claude.matched, claude.unmatched, claude.refused], [0n, 6n, 5n]);
      assert.ok(claude.lastCallAt !== undefined);
      assert.deepEqual(info.hooks.map((h) => h.cli), ["claude", "codex", "gemini"]);
    } finally {
      outside.remove();
    }
  });
});

describe("the CLIs' hooks with tokens", () => {
  let t: TestServer;
  let dir: { dir: string; remove: () => void };
  before(async () => {
    dir = tempDir();
    const tokens = join(dir.dir, "tokens.json");
    const { createHash } = await import("node:crypto");
    const sha = (token: string) => createHash("sha256").update(token).digest("hex");
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: "laptop", sha256: sha("hook-token"), agents: ["main"], namespaces: ["team-a"] }, { name: "admin", sha256: sha("admin-token"), admin: true }] }));
    t = await startTestServer({ tokensFile: tokens, transcriptRoot: realpathSync(dir.dir), httpListen: { host: "127.0.0.1", port: 0 } }, undefined);
  });
  after(async () => {
    await t.dispose();
    dir.remove();
  });

  test("no token is 401, an unknown one 401, a namespace outside the token's 403, a good one 204", async () => {
    const http = t.server.httpAddress!;
    const call = (headers: Record<string, string>) =>
      rawHttp(http, { method: "POST", path: "/hooks/claude", headers: { host: http, "content-type": "application/json", ...headers }, body: JSON.stringify({ session_id: "s" }) });
    assert.equal((await call({})).status, 401);
    assert.equal((await call({ authorization: "Bearer wrong" })).status, 401);
    const outside = await call({ authorization: "Bearer hook-token", "sessionstate-namespace": "default" });
    assert.deepEqual([outside.status, outside.text], [403, 'namespace "default" is outside the scope of token "laptop"\n']);
    assert.equal((await call({ authorization: "Bearer hook-token", "sessionstate-namespace": "team-a" })).status, 204);
  });
});
