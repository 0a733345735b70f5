/**
 * The hooks scenario (`hooks`, issue 40): from a CLI's hook call to the watcher's notice on its stream,
 * with the prompt's transcript row written 0, 150 (as Claude Code does) and 1,500 ms after the call; the
 * same prompts with hooks off (the poller's tick, 60 s by default); the gateway's own prompts (their text
 * reported first: no notice); Append p99 with and without 200 hook calls a second for sessions nobody
 * adopted (A/B in alternating rounds of one run); and `sessionstate hook`'s time from start to exit. On
 * SQLite, and on two PostgreSQL replicas with the hook sent to one and the watcher on the other.
 */
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { atFixedRate, connect, goal, type Clients } from "../../test/support/helpers.js";
import { startPostgresCluster, postgresBinDir } from "../../test/support/postgres-cluster.js";
import { freePort } from "../../test/support/process-helpers.js";
import { median, percentile, sleep, spawnListening, type Listening } from "../lib.js";
import { root, row, results, work, serverNodeArgs } from "../context.js";
import type { StaleNotice } from "../../gen/sessionstate/v1/watch_pb.js";

const W = "agent:main:main";
/** Sessions adopted and watched; prompts go to them in turn, one at a time each. */
const sessionCount = 20;
const promptsPerDelay = 200;

/** A notice stream that hands each notice to whoever waits for its target. */
class Notices {
  private readonly waiting = new Map<string, (notice: StaleNotice, atMs: number) => void>();
  readonly received: StaleNotice[] = [];
  private readonly call: ReturnType<Clients["watch"]["subscribeStaleNotices"]>;

  constructor(clients: Clients) {
    const call = clients.watch.subscribeStaleNotices({ watcherSessionKeys: [W] }, { timeoutMs: 3_600_000 });
    this.call = call;
    void (async () => {
      try {
        for await (const item of call) {
          if (item.message.case !== "notice") continue;
          const notice = item.message.value;
          this.received.push(notice);
          this.waiting.get(notice.target!.key)?.(notice, performance.now());
        }
      } catch {
        // cancelled at the end
      }
    })();
  }

  /** Resolves with the time the next notice for `key` arrives (or undefined after `limitMs`). */
  next(key: string, limitMs: number): Promise<{ notice: StaleNotice; atMs: number } | undefined> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(key);
        resolve(undefined);
      }, limitMs);
      this.waiting.set(key, (notice, atMs) => {
        clearTimeout(timer);
        this.waiting.delete(key);
        resolve({ notice, atMs });
      });
    });
  }

  close(): void {
    this.call.cancel();
  }
}

/** POSTs a hook call to the HTTP port (kept-alive connections, as a local CLI's would not even need). */
function postHook(http: string, agent: Agent, cli: string, body: unknown): Promise<number> {
  const at = http.lastIndexOf(":");
  return new Promise((resolve, reject) => {
    const req = request(
      { host: http.slice(0, at), port: Number(http.slice(at + 1)), method: "POST", path: `/hooks/${cli}`, agent, headers: { "content-type": "application/json" } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

const userRow = (text: string, promptId: string) =>
  `${JSON.stringify({ type: "user", message: { role: "user", content: text }, promptId, promptSource: "typed", timestamp: new Date().toISOString() })}\n`;

interface Setup {
  /** Where hooks go (the HTTP port of the replica that has the files). */
  http: string;
  /** The client that adopts and appends (the same replica). */
  writer: Clients;
  /** The client the watcher subscribes through (the other replica, on PostgreSQL). */
  reader: Clients;
  transcriptRoot: string;
}

/** Adopts `sessionCount` Claude Code transcripts under the root and has W watch them. */
async function adoptSessions(setup: Setup, tag: string): Promise<string[]> {
  const files: string[] = [];
  mkdirSync(join(setup.transcriptRoot, tag), { recursive: true });
  for (let i = 0; i < sessionCount; i++) {
    const file = join(setup.transcriptRoot, tag, `session-${i}.jsonl`);
    writeFileSync(file, userRow("the first prompt", `${tag}-first-${i}`));
    const key = `agent:main:${tag}-${i}`;
    await setup.writer.upstream.adopt({ session: { key }, catalogId: "claude", threadId: `${tag}-${i}`, source: { case: "localTranscript", value: { path: file } } });
    await setup.writer.watch.watch({ watcherSessionKey: W, target: { key } });
    files.push(file);
  }
  return files;
}

/**
 * `promptsPerDelay` prompts over the sessions (each session one at a time): each a hook call (unless
 * `hooks` is false), its row written `delayMs` later; the time from the call to its notice, in ms. Every
 * notice is acknowledged at once, so the next prompt opens a fresh one.
 */
async function promptLatencies(setup: Setup, notices: Notices, tag: string, delayMs: number, options: { hooks: boolean; prompts: number; limitMs: number }): Promise<number[]> {
  const files = await adoptSessions(setup, tag);
  const agent = new Agent({ keepAlive: true, maxSockets: sessionCount });
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    files.map(async (file, i) => {
      const key = `agent:main:${tag}-${i}`;
      // Spread the sessions' first prompts over the first 100 ms; without hooks, over the poller's whole
      // period, so that they fall at every moment of it as a person's prompts do.
      await sleep((i * (options.hooks ? 100 : 60_000)) / sessionCount);
      while (next < options.prompts) {
        const n = next++;
        const promptId = `${tag}-${n}`;
        const arrived = notices.next(key, options.limitMs);
        const calledAt = performance.now();
        if (options.hooks) await postHook(setup.http, agent, "claude", { session_id: `${tag}-${i}`, transcript_path: file, prompt_id: promptId, hook_event_name: "UserPromptSubmit", prompt: "…" });
        await sleep(Math.max(0, delayMs - (performance.now() - calledAt)));
        appendFileSync(file, userRow(`prompt ${n}`, promptId));
        const got = await arrived;
        if (got === undefined) throw new Error(`${tag}: no notice for ${key} within ${options.limitMs} ms`);
        latencies.push(got.atMs - calledAt);
        await setup.writer.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: got.notice.target!, notifiedVersion: got.notice.notifiedVersion }] });
      }
    }),
  );
  agent.destroy();
  return latencies.sort((a, b) => a - b);
}

/** The gateway's own prompts: text recorded first, then the hook and the row: the notices they open (expected 0). */
async function ownPrompts(setup: Setup, notices: Notices, tag: string): Promise<number> {
  const files = await adoptSessions(setup, tag);
  const agent = new Agent({ keepAlive: true, maxSockets: sessionCount });
  const before = notices.received.length;
  for (let n = 0; n < promptsPerDelay; n++) {
    const i = n % sessionCount;
    const text = `the gateway's own turn ${n}`;
    await setup.writer.upstream.recordOwnUserText({ session: { key: `agent:main:${tag}-${i}` }, text });
    await postHook(setup.http, agent, "claude", { session_id: `${tag}-${i}`, transcript_path: files[i], prompt_id: `${tag}-${n}`, hook_event_name: "UserPromptSubmit" });
    appendFileSync(files[i]!, userRow(text, `${tag}-${n}`));
  }
  // Every hook scan reads its row at once; give the last ones their time, then count.
  await sleep(2500);
  agent.destroy();
  return notices.received.filter((notice, index) => index >= before && notice.target!.key.startsWith(`agent:main:${tag}-`)).length;
}

/**
 * Append p99 (ms) at 200/s in alternating 3 s rounds, alone and beside 200 unmatched hook calls a second
 * sent by a process of their own (bench/hook-flood.ts), so that sending them never delays the appends.
 */
async function appendWithHookFlood(setup: Setup): Promise<{ quiet: number; flooded: number; calls: number; rounds: string }> {
  const quiet: number[] = [];
  const flooded: number[] = [];
  let calls = 0;
  const appendRound = async (): Promise<number> => {
    const latencies: number[] = [];
    await atFixedRate(200, 3000, async (n) => {
      const began = performance.now();
      await setup.writer.signalLog.append(goal(`agent:bench:subagent:flood-${n % 500}`));
      latencies.push(performance.now() - began);
    });
    return percentile(latencies.sort((a, b) => a - b), 99);
  };
  await appendRound(); // warm-up
  for (let round = 0; round < 10; round++) {
    if (round % 2 === 0) {
      quiet.push(await appendRound());
      continue;
    }
    const flood = spawn(process.execPath, ["--import", "tsx", join(root, "bench/hook-flood.ts"), setup.http, "200", "3.5"], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    flood.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const done = new Promise((resolve) => flood.on("exit", resolve));
    await sleep(400); // its start-up, so the round runs beside its calls
    flooded.push(await appendRound());
    await done;
    const [sent, answered] = out.trim().split(" ").map(Number);
    if (sent !== answered) throw new Error(`hook flood: ${answered} of ${sent} calls answered 204`);
    calls += sent!;
  }
  const rounds = quiet.map((q, i) => `${q.toFixed(1)}/${flooded[i]!.toFixed(1)}`).join(" ");
  return { quiet: median(quiet), flooded: median(flooded), calls, rounds };
}

/** `sessionstate hook claude` from start to exit, `runs` times: median and max ms. */
async function hookCommandTimes(server: string, runs: number): Promise<{ p50: number; max: number }> {
  const input = JSON.stringify({ session_id: "s", transcript_path: "/nowhere.jsonl", prompt_id: "p", hook_event_name: "UserPromptSubmit" });
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const child = spawn(process.execPath, [join(root, "bin/sessionstate.js"), "hook", "claude", "--server", server], { stdio: ["pipe", "ignore", "ignore"] });
    child.stdin.end(input);
    await new Promise((resolve) => child.on("exit", resolve));
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50: median(times), max: times.at(-1)! };
}

const format = (sorted: readonly number[]): string =>
  `${percentile(sorted, 50).toFixed(0)} / ${percentile(sorted, 99).toFixed(0)} / ${sorted.at(-1)!.toFixed(0)}`;

/** The prompt rows of one backend: hooks on at three delays, hooks off, own prompts. */
async function promptRows(label: string, setup: Setup, notices: Notices, withPoller: boolean): Promise<void> {
  // Keys are lower case on the way in: so are the tags they are made of.
  const tag = label.toLowerCase().replaceAll(" ", "-");
  for (const delayMs of [0, 150, 1500]) {
    const latencies = await promptLatencies(setup, notices, `${tag}-d${delayMs}`, delayMs, { hooks: true, prompts: promptsPerDelay, limitMs: 10_000 });
    results[`hook_${label}_p50_ms_${delayMs}`] = percentile(latencies, 50);
    results[`hook_${label}_p99_ms_${delayMs}`] = percentile(latencies, 99);
    row("hooks", `${label}: hook call → notice, row ${delayMs} ms after the call, ${latencies.length} prompts: p50 / p99 / max ms`, format(latencies), delayMs === 150 ? "goal p50 <= 250, p99 <= 1000" : "");
  }
  if (withPoller) {
    // Hooks off: one prompt per session at a random moment of the poller's period (60 s): what every watcher waited before hooks.
    const latencies = await promptLatencies(setup, notices, `${tag}-off`, 150, { hooks: false, prompts: sessionCount, limitMs: 130_000 });
    results[`poll_${label}_p50_ms`] = percentile(latencies, 50);
    row("hooks", `${label}: hooks off (the 60 s poller), ${latencies.length} prompts: p50 / p99 / max ms`, format(latencies));
  }
  const own = await ownPrompts(setup, notices, `${tag}-own`);
  results[`hook_${label}_own_notices`] = own;
  row("hooks", `${label}: the gateway's own prompts (text reported first), ${promptsPerDelay}: notices opened`, String(own), "goal 0");
}

export async function hooks(): Promise<void> {
  const transcriptRoot = join(work, "hook-transcripts");
  mkdirSync(transcriptRoot, { recursive: true });
  const rootPath = realpathSync(transcriptRoot);
  // SQLite: one process with the default 60 s tick.
  const httpPort = await freePort();
  const server = await spawnListening(
    join(root, "bin/sessionstate.js"),
    ["serve", "--db", join(work, "hooks.db"), "--listen", "127.0.0.1:0", "--http-listen", `127.0.0.1:${httpPort}`, "--transcript-root", rootPath, "--log-level", "warn"],
    serverNodeArgs,
  );
  const clients = connect(server.address);
  const http = `127.0.0.1:${httpPort}`;
  const notices = new Notices(clients);
  try {
    const setup: Setup = { http, writer: clients, reader: clients, transcriptRoot: rootPath };
    await promptRows("SQLite", setup, notices, true);
    const flood = await appendWithHookFlood(setup);
    results.append_p99_ms_quiet = flood.quiet;
    results.append_p99_ms_hook_flood = flood.flooded;
    row("hooks", `SQLite: Append p99 at 200/s, alone / beside 200 unmatched hook calls a second (${flood.calls} calls): ms`, `${flood.quiet.toFixed(2)} / ${flood.flooded.toFixed(2)}`, "goal within noise");
    row("hooks", "SQLite: the same, flooded / alone", (flood.flooded / flood.quiet).toFixed(2));
    row("hooks", "SQLite: the same, each pair of rounds (alone/flooded ms)", flood.rounds);
    const up = await hookCommandTimes(`http://${http}`, 20);
    const down = await hookCommandTimes(`http://127.0.0.1:${await freePort()}`, 20);
    results.hook_command_up_ms = up.p50;
    results.hook_command_down_ms = down.p50;
    row("hooks", "sessionstate hook, start to exit, server up / down, 20 runs: median (max) ms", `${up.p50.toFixed(0)} (${up.max.toFixed(0)}) / ${down.p50.toFixed(0)} (${down.max.toFixed(0)})`, "goal < 2000");
  } finally {
    notices.close();
    clients.close();
    await server.stop();
  }
  if (postgresBinDir() === undefined) {
    row("hooks", "replicas", "skipped", "PostgreSQL missing");
    return;
  }
  await replicaRows(rootPath);
}

/** Two PostgreSQL replicas on one host (one node id): the hook to the first, the watcher on the second. */
async function replicaRows(rootPath: string): Promise<void> {
  const cluster = startPostgresCluster();
  const replicas: Listening[] = [];
  const httpPorts: number[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      httpPorts.push(await freePort());
      replicas.push(
        await spawnListening(
          join(root, "bin/sessionstate.js"),
          ["serve", "--db", cluster.url, "--db-schema", "hooks", "--listen", "127.0.0.1:0", "--http-listen", `127.0.0.1:${httpPorts[i]}`, "--transcript-root", rootPath, "--log-level", "warn"],
          serverNodeArgs,
        ),
      );
    }
    const writer = connect(replicas[0]!.address);
    const reader = connect(replicas[1]!.address);
    const notices = new Notices(reader);
    try {
      await sleep(500);
      await promptRows("2 replicas", { http: `127.0.0.1:${httpPorts[0]}`, writer, reader, transcriptRoot: rootPath }, notices, false);
    } finally {
      notices.close();
      writer.close();
      reader.close();
    }
  } finally {
    for (const replica of replicas) await replica.stop();
    cluster.destroy();
  }
}
