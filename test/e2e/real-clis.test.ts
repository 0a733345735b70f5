/**
 * The CLIs' hooks end to end, with the real Claude Code and Codex (issue 40): `sessionstate hooks
 * install` puts the hook into each CLI's settings in a temporary HOME; a prompt typed into Claude Code's
 * TUI (in tmux, as a person types) and a prompt given to `codex exec resume` reach the watcher's notice
 * stream at once, and the gateway's own turn (`claude -p --resume`, its text reported first) opens none.
 * The monitor's own tick is a day away: every notice here comes from a hook.
 *
 * This test installs nothing. It runs each CLI it finds: SESSIONSTATE_CLAUDE_BIN / SESSIONSTATE_CODEX_BIN,
 * else `claude` / `codex` on PATH; Claude Code also needs tmux. Each one absent is skipped with one line.
 * docs/development.md ("The real CLIs") says how to install them in a scratch folder and run this.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { startTestServer, subscribe, tempDir, type NoticeReader, type TestServer } from "../support/helpers.js";
import { runCli } from "../support/process-helpers.js";
import { startFakeModelApi } from "../support/fake-model-api.js";

/** A program from its variable, else from PATH; undefined when neither has it. */
function findProgram(variable: string, name: string): string | undefined {
  const given = process.env[variable];
  if (given !== undefined && given !== "") return existsSync(given) ? given : undefined;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) if (dir !== "" && existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

const claude = findProgram("SESSIONSTATE_CLAUDE_BIN", "claude");
const codex = findProgram("SESSIONSTATE_CODEX_BIN", "codex");
const tmux = findProgram("SESSIONSTATE_TMUX_BIN", "tmux");
const skipClaude = claude === undefined || tmux === undefined ? "Claude Code (SESSIONSTATE_CLAUDE_BIN or claude on PATH) and tmux are needed: skipped" : false;
const skipCodex = codex === undefined ? "Codex (SESSIONSTATE_CODEX_BIN or codex on PATH) is needed: skipped" : false;
if (skipClaude !== false) console.log(skipClaude);
if (skipCodex !== false) console.log(skipCodex);

const W = "agent:main:main";

/** Waits until `check` returns a value, polling every 50 ms; fails after `limitMs`. */
async function eventually<T>(what: string, check: () => T | undefined, limitMs = 30_000): Promise<T> {
  const deadline = performance.now() + limitMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    assert.ok(performance.now() < deadline, `timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The JSONL files under `dir`, recursively. */
function transcriptsUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".jsonl"))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe("the real CLIs' hooks", () => {
  let t: TestServer;
  let home: { dir: string; remove: () => void };
  let homePath: string;
  let http: string;
  let model: Awaited<ReturnType<typeof startFakeModelApi>>;
  let stream: NoticeReader;

  before(async () => {
    home = tempDir();
    homePath = realpathSync(home.dir);
    model = await startFakeModelApi();
    t = await startTestServer({ transcriptRoot: homePath, monitorIntervalMs: 86_400_000, httpListen: { host: "127.0.0.1", port: 0 } });
    http = `http://${t.server.httpAddress}`;
    stream = subscribe(t, [W]);
    await stream.untilSynced();
  });
  after(async () => {
    stream?.call.cancel();
    await t?.dispose();
    await model?.close();
    home?.remove();
  });

  /** Adopts a transcript for `key`, watched by W. */
  async function adoptAndWatch(key: string, catalogId: string, path: string, threadId: string): Promise<void> {
    const adopted = await t.upstream.adopt({ session: { key }, catalogId, threadId, source: { case: "localTranscript", value: { path } } });
    assert.equal(adopted.linked, true, adopted.reason);
    await t.watch.watch({ watcherSessionKey: W, target: { key } });
  }

  test("a prompt typed into Claude Code's TUI reaches the watcher at once; the gateway's own turn opens no notice", { skip: skipClaude }, async () => {
    const work = join(homePath, "work");
    mkdirSync(work);
    // Onboarding done, the placeholder key approved, the folder trusted: the TUI opens at its prompt.
    writeFileSync(
      join(homePath, ".claude.json"),
      JSON.stringify({ hasCompletedOnboarding: true, customApiKeyResponses: { approved: ["sk-ant-x"], rejected: [] }, projects: { [work]: { hasTrustDialogAccepted: true } } }),
    );
    const env = { HOME: homePath, ANTHROPIC_API_KEY: "sk-ant-x", ANTHROPIC_BASE_URL: model.url, DISABLE_AUTOUPDATER: "1" };
    const installed = await runCli(["hooks", "install", "--cli", "claude", "--server", http], { HOME: homePath });
    console.log(`hooks install: ${installed.stdout.trim()}`);
    assert.equal(installed.code, 0, installed.stderr);
    const session = `sessionstate-e2e-${process.pid}`;
    const envArgs = Object.entries(env).map(([name, value]) => `${name}=${value}`);
    const started = spawnSync(tmux!, ["new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", work, "env", ...envArgs, claude!], { encoding: "utf8" });
    assert.equal(started.status, 0, started.stderr);
    const screen = (): string => spawnSync(tmux!, ["capture-pane", "-t", session, "-p"], { encoding: "utf8" }).stdout;
    const type = async (text: string): Promise<void> => {
      spawnSync(tmux!, ["send-keys", "-t", session, "-l", text]);
      await sleep(300);
      spawnSync(tmux!, ["send-keys", "-t", session, "Enter"]);
    };
    try {
      await eventually("Claude Code's prompt", () => (screen().includes("? for shortcuts") ? true : undefined));
      // The session's transcript exists once its first prompt is written: that one is before adoption.
      await type("let us begin");
      const transcript = await eventually("the transcript", () => transcriptsUnder(join(homePath, ".claude", "projects")).find((path) => readFileSync(path, "utf8").includes('"type":"user"')));
      await eventually("the first turn to end", () => (screen().includes("● ok") ? true : undefined));
      const sessionId = transcript.slice(transcript.lastIndexOf("/") + 1, -".jsonl".length);
      const key = "agent:main:claude-worker";
      await adoptAndWatch(key, "claude", transcript, sessionId);
      const typedAt = performance.now();
      await type("please stop and look at the failing test first");
      const notice = await stream.nextNotice();
      const ms = performance.now() - typedAt;
      console.log(`Claude Code ${spawnSync(claude!, ["--version"], { encoding: "utf8" }).stdout.trim()}: a prompt typed into the TUI reached the watcher ${ms.toFixed(0)} ms after Enter`);
      assert.equal(notice.target?.key, key);
      const events = (await t.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events.map((e) => e.summary);
      assert.deepEqual(events, ["adopted from claude", "human message via claude"]);
      await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: notice.target!, notifiedVersion: notice.notifiedVersion }] });
      // The gateway's own turn: its text reported first, then sent with claude -p --resume (its hook fires too).
      const own = "run the next step of the plan";
      await t.upstream.recordOwnUserText({ session: { key }, text: own });
      const ownAt = performance.now();
      const run = spawn(claude!, ["-p", "--resume", sessionId, own], { cwd: work, env: { ...process.env, ...env }, stdio: "ignore" });
      const code = await new Promise<number | null>((resolve) => run.on("exit", (exitCode) => resolve(exitCode)));
      assert.equal(code, 0);
      await sleep(2500); // the hook's scan looks for its row for up to 2 s
      assert.deepEqual(await stream.noticesBeforeBarrier(), [], "the gateway's own turn opens no notice");
      console.log(`claude -p --resume (the gateway's own turn): ${(performance.now() - ownAt).toFixed(0)} ms, 0 notices`);
    } finally {
      spawnSync(tmux!, ["kill-session", "-t", session]);
    }
  });

  test("a prompt given to Codex reaches the watcher at once", { skip: skipCodex }, async () => {
    const codexHome = join(homePath, ".codex");
    const env = { HOME: homePath, CODEX_HOME: codexHome, OPENAI_API_KEY: "sk-x" };
    const installed = await runCli(["hooks", "install", "--cli", "codex", "--server", http], { HOME: homePath, CODEX_HOME: codexHome });
    console.log(`hooks install: ${installed.stdout.trim()}`);
    assert.equal(installed.code, 0, installed.stderr);
    /** Runs codex exec with `args` until its rollout holds `text` (no model answers here: it is then stopped). */
    const exec = async (args: string[], text: string): Promise<string> => {
      const child = spawn(codex!, ["exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", ...args], { cwd: homePath, env: { ...process.env, ...env }, stdio: "ignore" });
      try {
        return await eventually(`Codex's rollout to hold "${text}"`, () => transcriptsUnder(join(codexHome, "sessions")).find((path) => readFileSync(path, "utf8").includes(text)));
      } finally {
        child.kill("SIGTERM");
      }
    };
    const rollout = await exec(["let us begin"], "let us begin");
    const threadId = /([0-9a-f]{8}-[0-9a-f-]{27})\.jsonl$/u.exec(rollout)![1]!;
    const key = "agent:main:codex-worker";
    await adoptAndWatch(key, "codex", rollout, threadId);
    const sentAt = performance.now();
    const child = spawn(codex!, ["exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", "resume", threadId, "run the tests again"], { cwd: homePath, env: { ...process.env, ...env }, stdio: "ignore" });
    try {
      const notice = await stream.nextNotice();
      console.log(`Codex ${spawnSync(codex!, ["--version"], { encoding: "utf8" }).stdout.trim()}: the prompt reached the watcher ${(performance.now() - sentAt).toFixed(0)} ms after codex exec resume started`);
      assert.equal(notice.target?.key, key);
      const events = (await t.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events.map((e) => e.summary);
      assert.deepEqual(events, ["adopted from codex", "human message via codex"]);
    } finally {
      child.kill("SIGTERM");
    }
  });
});
