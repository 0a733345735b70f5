/**
 * The consumer groups scenario (`groups`, issue 41), on SQLite and on two PostgreSQL replicas: three member processes share 1,000
 * notices (a checker over every delivery and ack: overlaps, shares); a member killed with SIGKILL while it
 * holds 16 claims, and the time until each reaches another member; append → notice p99 for a group's
 * member beside a plain stream in the same run; and (SQLite) 1,000 members of one group subscribing at once (time
 * to every `synced`, and the server's memory per member).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { atFixedRate, connect, goal, type Clients } from "../../test/support/helpers.js";
import { median, percentile, rssMb, sleep } from "../lib.js";
import { root, row, results, sessionstate, serverNodeArgs } from "../context.js";
import { spawnListening, type Listening } from "../lib.js";
import { postgresBinDir, startPostgresCluster } from "../../test/support/postgres-cluster.js";

const W = "agent:bench:main";

interface Line {
  e: "d" | "a" | "s";
  k?: string;
  n?: number;
  c?: number;
  t: number;
}

/** A member process: its lines as they come. */
interface MemberProcess {
  child: ChildProcess;
  lines: Line[];
  stop(): Promise<void>;
}

function startMember(address: string, group: string, max: number, mode: "ack" | "hold", holdMs: number): MemberProcess {
  const child = spawn(process.execPath, ["--import", "tsx", join(root, "bench/group-member.ts"), address, W, group, String(max), mode, String(holdMs)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: Line[] = [];
  let rest = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    rest += chunk.toString();
    const parts = rest.split("\n");
    rest = parts.pop()!;
    for (const part of parts) if (part !== "") lines.push(JSON.parse(part) as Line);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return {
    child,
    lines,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

async function until(check: () => boolean, limitMs: number, what: string): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`groups: timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Opens one pending notice on each of `count` fresh targets of W. */
async function openNotices(clients: Clients, tag: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, count - i) }, async (_, j) => {
        const key = `agent:bench:subagent:${tag}-${i + j}`;
        await clients.watch.watch({ watcherSessionKey: W, target: { key } });
        await clients.signalLog.append(goal(key));
      }),
    );
  }
}

/**
 * Every member's deliveries and acks: a notice (pair and N) is held from its delivery to its ack (or to
 * the end of its holder); two holders of one notice whose times overlap are an overlap.
 */
function checkDeliveries(members: readonly Line[][], endOf: readonly number[]): { deliveries: number; acks: number; overlaps: number; shares: number[] } {
  const spans = new Map<string, Array<{ member: number; from: number; to: number }>>();
  let deliveries = 0;
  let acks = 0;
  members.forEach((lines, member) => {
    const open = new Map<string, number>();
    for (const line of lines) {
      const key = `${line.k} ${line.n}`;
      if (line.e === "d") {
        deliveries++;
        open.set(key, line.t);
      } else if (line.e === "a") {
        acks++;
        const from = open.get(key)!;
        open.delete(key);
        spans.set(key, [...(spans.get(key) ?? []), { member, from, to: line.t }]);
      }
    }
    for (const [key, from] of open) spans.set(key, [...(spans.get(key) ?? []), { member, from, to: endOf[member]! }]);
  });
  let overlaps = 0;
  for (const list of spans.values()) {
    list.sort((a, b) => a.from - b.from);
    for (let i = 1; i < list.length; i++) if (list[i]!.from < list[i - 1]!.to && list[i]!.member !== list[i - 1]!.member) overlaps++;
  }
  return { deliveries, acks, overlaps, shares: members.map((lines) => lines.filter((line) => line.e === "a").length) };
}

export async function groups(): Promise<void> {
  const server = await sessionstate("groups", ["--http-listen", "off", "--max-streams-per-connection", "1000"]);
  const clients = connect(server.address);
  try {
    await groupRows("SQLite", "groups", [server.address], clients, clients);
    await thousandMembers(server);
  } finally {
    clients.close();
    await server.stop();
  }
  if (postgresBinDir() === undefined) {
    row("groups", "2 replicas", "skipped", "PostgreSQL missing");
    return;
  }
  // Two PostgreSQL replicas: members on both, appends through one, the latency's readers on the other.
  const cluster = startPostgresCluster();
  const replicas: Listening[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await spawnListening(
          join(root, "bin/sessionstate.js"),
          ["serve", "--db", cluster.url, "--db-schema", "groups", "--listen", "127.0.0.1:0", "--http-listen", "off", "--node-id", `replica-${i}`, "--log-level", "warn"],
          serverNodeArgs,
        ),
      );
    }
    const writer = connect(replicas[0]!.address);
    const reader = connect(replicas[1]!.address);
    try {
      await groupRows("2 replicas", "groups_replicas", replicas.map((r) => r.address), writer, reader);
    } finally {
      writer.close();
      reader.close();
    }
  } finally {
    for (const replica of replicas) await replica.stop();
    cluster.destroy();
  }
}

/**
 * The scenario's rows on one backend: members on the `addresses` in turn (the killed one on the first,
 * the one that takes its claims on the last), appends through `writer`, the latency's readers on `reader`.
 */
async function groupRows(label: string, key: string, addresses: readonly string[], writer: Clients, reader: Clients): Promise<void> {
  const at = (i: number): string => addresses[i % addresses.length]!;
  const name = (what: string): string => `${label}: ${what}`;
  // Three equal members, 1,000 notices, each held 5 ms (a turn) and acknowledged.
  await openNotices(writer, "share", 1000);
  const members = [0, 1, 2].map((i) => startMember(at(i), "bench", 16, "ack", 5));
  const started = performance.now();
  await until(() => members.reduce((sum, m) => sum + m.lines.filter((l) => l.e === "a").length, 0) >= 1000, 120_000, "1,000 acks");
  const seconds = (performance.now() - started) / 1000;
  await sleep(300);
  const check = checkDeliveries(members.map((m) => m.lines), members.map(() => Number.POSITIVE_INFINITY));
  for (const member of members) await member.stop();
  // A notice delivered twice: to whom, with which counts, and when against the first holder's ack.
  const seen = new Map<string, Array<{ member: number; line: Line }>>();
  members.forEach((m, member) => m.lines.filter((l) => l.e === "d").forEach((line) => seen.set(`${line.k} ${line.n}`, [...(seen.get(`${line.k} ${line.n}`) ?? []), { member, line }])));
  const twice = [...seen.entries()].filter(([, list]) => list.length > 1);
  for (const [noticeKey, list] of twice.slice(0, 3)) {
    const ack = members[list[0]!.member]!.lines.find((l) => l.e === "a" && `${l.k} ${l.n}` === noticeKey);
    row("groups", name(`delivered twice: ${noticeKey}`), list.map((d) => `m${d.member} c${d.line.c} +${(d.line.t - list[0]!.line.t).toFixed(1)}ms`).join(", ") + ` (first ack +${ack === undefined ? "-" : (ack.t - list[0]!.line.t).toFixed(1)}ms)`);
  }
  row("groups", name("notices delivered more than once (each after its holder's turn ended)"), String(twice.length));
  const even = 1000 / 3;
  const spread = Math.max(...check.shares.map((share) => Math.abs(share - even) / even));
  results[`${key}_overlaps`] = check.overlaps;
  results[`${key}_share_spread`] = spread;
  row("groups", name("3 members, 1,000 notices: deliveries / acks / overlaps"), `${check.deliveries} / ${check.acks} / ${check.overlaps}`, "goal 0 overlaps");
  row("groups", name("each member's share (acks); the widest from even"), `${check.shares.join(" / ")}; ${(spread * 100).toFixed(1)} %`, "goal within 20 %");
  row("groups", name("1,000 notices through the group, s (each held 5 ms)"), seconds.toFixed(2));

  // SIGKILL of a member that holds 16 claims: each reaches another member.
  await openNotices(writer, "kill", 40);
  const holder = startMember(at(0), "kill", 16, "hold", 0);
  await until(() => holder.lines.filter((l) => l.e === "d").length === 16, 20_000, "16 claims held");
  const heldKeys = new Set(holder.lines.filter((l) => l.e === "d").map((l) => l.k!));
  const other = startMember(addresses.at(-1)!, "kill", 64, "hold", 0);
  await until(() => other.lines.some((l) => l.e === "s"), 20_000, "the other member synced");
  const killedAt = performance.timeOrigin + performance.now();
  holder.child.kill("SIGKILL");
  await until(() => [...heldKeys].every((k) => other.lines.some((l) => l.e === "d" && l.k === k)), 20_000, "the killed member's 16 notices handed on");
  const handOver = [...heldKeys].map((k) => other.lines.find((l) => l.e === "d" && l.k === k)!.t - killedAt).sort((a, b) => a - b);
  const counts = [...heldKeys].map((k) => other.lines.find((l) => l.e === "d" && l.k === k)!.c);
  await other.stop();
  results[`${key}_kill_handover_max_ms`] = handOver.at(-1)!;
  row("groups", name("SIGKILL of a member holding 16: each handed on after, ms: first / median / last"), `${handOver[0]!.toFixed(0)} / ${median(handOver).toFixed(0)} / ${handOver.at(-1)!.toFixed(0)}`, "goal <= 2000");
  row("groups", name("their delivery counts"), [...new Set(counts)].join(", "));

  // Append → notice at 200/s: a group's member and a plain stream, side by side, one pair each per target.
  const latency = await groupBesideplain(writer, reader, key);
  results[`${key}_notice_p99_ratio`] = latency.group.p99 / latency.plain.p99;
  row("groups", name("append → notice at 200/s, 1,000 notices: plain stream p50 / p99 ms"), `${latency.plain.p50.toFixed(2)} / ${latency.plain.p99.toFixed(2)}`);
  row("groups", name("the same, a group's member (one of one): p50 / p99 ms"), `${latency.group.p50.toFixed(2)} / ${latency.group.p99.toFixed(2)}`);
  row("groups", name("group p99 / plain p99"), (latency.group.p99 / latency.plain.p99).toFixed(2), "goal <= 1.2");
}

/** 1,000 members of one group subscribe at once (10 connections of 100 streams). */
async function thousandMembers(server: Listening): Promise<void> {
  const rssBefore = rssMb(server.child.pid!);
  const connections = Array.from({ length: 10 }, () => connect(server.address, { ownConnection: true }));
  const subscribedAt = performance.now();
  const calls = connections.flatMap((c) => Array.from({ length: 100 }, () => c.watch.subscribeStaleNotices({ watcherSessionKeys: [W], consumerGroup: "thousand" }, { timeoutMs: 120_000 })));
  const syncedAt = await Promise.all(
    calls.map(async (call) => {
      for await (const item of call) if (item.message.case === "synced") return performance.now();
      return Number.NaN;
    }),
  );
  const allSyncedMs = Math.max(...syncedAt) - subscribedAt;
  const rssAfter = rssMb(server.child.pid!);
  for (const call of calls) call.cancel();
  for (const c of connections) c.close();
  results.groups_1000_synced_ms = allSyncedMs;
  row("groups", "SQLite: 1,000 members subscribe at once: every synced after, ms", allSyncedMs.toFixed(0), "goal < 5000");
  row("groups", "SQLite: the same: server RSS before / after, MB; per member, KB", `${rssBefore.toFixed(0)} / ${rssAfter.toFixed(0)}; ${(((rssAfter - rssBefore) * 1024) / 1000).toFixed(1)}`);
}

/** Append → notice latencies at 200/s over 1,000 targets watched by two watchers: one read by a plain stream, one by a group's member. */
async function groupBesideplain(clients: Clients, reader: Clients, tag: string): Promise<{ plain: { p50: number; p99: number }; group: { p50: number; p99: number } }> {
  const plainWatcher = "agent:bench:plain";
  const groupWatcher = "agent:bench:grouped";
  const targets = Array.from({ length: 1000 }, (_, i) => `agent:bench:subagent:lat-${tag}-${i}`);
  for (let i = 0; i < targets.length; i += 50) {
    await Promise.all(
      targets.slice(i, i + 50).flatMap((key) => [
        clients.watch.watch({ watcherSessionKey: plainWatcher, target: { key } }),
        clients.watch.watch({ watcherSessionKey: groupWatcher, target: { key } }),
      ]),
    );
  }
  const sentAt = new Map<string, number>();
  const arrivals = { plain: [] as number[], group: [] as number[] };
  const read = async (watcher: string, grouped: boolean, into: number[]): Promise<void> => {
    const call = reader.watch.subscribeStaleNotices({ watcherSessionKeys: [watcher], ...(grouped ? { consumerGroup: "latency", maxInFlight: 1000 } : {}) }, { timeoutMs: 120_000 });
    try {
      for await (const item of call) {
        if (item.message.case !== "notice") continue;
        const notice = item.message.value;
        const at = sentAt.get(notice.target!.key);
        if (at !== undefined) into.push(performance.now() - at);
        void reader.watch.ackNotices({ acks: [{ watcherSessionKey: watcher, target: notice.target!, notifiedVersion: notice.notifiedVersion }] }).catch(() => undefined);
        if (into.length === targets.length) return;
      }
    } finally {
      call.cancel();
    }
  };
  const readers = [read(plainWatcher, false, arrivals.plain), read(groupWatcher, true, arrivals.group)];
  await sleep(300);
  await atFixedRate(200, 5000, async (i) => {
    const key = targets[i % targets.length]!;
    sentAt.set(key, performance.now());
    await clients.signalLog.append(goal(key));
  });
  await Promise.race([Promise.all(readers), sleep(10_000)]);
  const summary = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  };
  return { plain: summary(arrivals.plain), group: summary(arrivals.group) };
}
