import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { describe, test } from "node:test";
import { create, fromBinary, toBinary, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { Client, credentials, status } from "@grpc/grpc-js";
import Database from "better-sqlite3";
import { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { AppendBatchResponseSchema, SignalLog } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { Upstream } from "../../gen/sessionstate/v1/upstream_pb.js";
import { Watch } from "../../gen/sessionstate/v1/watch_pb.js";
import { assertNoInternals, connect, goal, human, tempDir } from "../support/helpers.js";
import { spawnServer, type ServerProcess } from "../support/process-helpers.js";

/** A logical checksum of every table, independent of page layout and WAL state. */
function checksum(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const hash = createHash("sha256");
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[];
    for (const table of tables) {
      hash.update(`\u0000${table}\u0000`);
      const columns = db.prepare(`SELECT count(*) FROM pragma_table_info('${table}')`).pluck().get() as number;
      const order = Array.from({ length: columns }, (_, i) => i + 1).join(", ");
      for (const row of db.prepare(`SELECT * FROM "${table}" ORDER BY ${order}`).raw().all()) hash.update(JSON.stringify(row));
    }
    return hash.digest("hex");
  } finally {
    db.close();
  }
}

/** Methods whose success changes the database (run flags and own-text digests are stored too). */
const mutating = new Set([
  "Append", "AppendBatch", "ResetSession", "DeleteSession", "Prune", "Watch", "Unwatch", "AckNotices", "Adopt", "ReportRemoteItems",
  "SetRunActive", "RecordOwnUserText",
]);

let seed = 424242;
function random(n: number): number {
  seed = (seed * 48271) % 2147483647;
  return seed % n;
}
const pick = <T>(items: readonly T[]): T => items[random(items.length)]!;

const junkStrings = [
  "", " ", "\t", "agent:", "agent::x", "agent:main:", "AGENT:Main", "a\u0000b", "line\nbreak", "\u0007bell", "x".repeat(600),
  "é".repeat(300), "😀".repeat(130), "agent:main:" + "k".repeat(600), "../../etc/passwd", "null", "{}", "\u202e", "agent:x:y",
];
const junkInt64 = [-1n, -(2n ** 63n), 2n ** 63n - 1n, 0n, 1n, 2n ** 53n + 1n];
const junkInt32 = [-1, -(2 ** 31), 2 ** 31 - 1, 0, 100000];
const junkUint32 = [0, 1, 2 ** 32 - 1];
const junkEnums = [0, 99, -5, 2 ** 31 - 1];

/** A message of `schema` filled with hostile values, `depth` levels deep. */
function junkMessage(schema: DescMessage, depth: number): Record<string, unknown> {
  const value: Record<string, unknown> = {};
  for (const field of schema.fields) {
    if (random(4) === 0) continue;
    if (field.oneof !== undefined) {
      const current = value[field.oneof.localName] as unknown;
      if (current !== undefined || random(2) === 0) continue;
      value[field.oneof.localName] = { case: field.localName, value: junkValue(field, depth) };
      continue;
    }
    if (field.fieldKind === "list") {
      // Over-long lists only at the top, and of empty messages: they test the count limits, while
      // hundreds of KB of junk per request only congest the one connection the workers share.
      const overLong = depth === 0 && random(8) === 0;
      const n = overLong ? 1100 : random(4);
      value[field.localName] = Array.from({ length: n }, () => (overLong && field.listKind === "message" ? {} : junkValue(field, depth)));
    } else {
      value[field.localName] = junkValue(field, depth);
    }
  }
  return value;
}

function junkValue(field: DescField, depth: number): unknown {
  switch (field.fieldKind) {
    case "enum":
      return pick(junkEnums);
    case "message":
      return depth > 3 ? {} : junkMessage(field.message, depth + 1);
    case "list":
      if (field.listKind === "message") return depth > 3 ? {} : junkMessage(field.message, depth + 1);
      if (field.listKind === "enum") return pick(junkEnums);
      return scalarJunk(field.scalar);
    case "scalar":
      return scalarJunk(field.scalar);
    default:
      return undefined;
  }
}

function scalarJunk(scalar: number): unknown {
  // ScalarType: 9 string, 3 int64, 5 int32, 13 uint32, 8 bool
  switch (scalar) {
    case 9:
      return pick(junkStrings);
    case 3:
      return pick(junkInt64);
    case 5:
      return pick(junkInt32);
    case 13:
      return pick(junkUint32);
    case 8:
      return random(2) === 0;
    default:
      return 0;
  }
}

/** Bytes that are not a valid message, or are valid framing around garbage. */
function junkBytes(): Buffer {
  switch (random(5)) {
    case 0:
      return Buffer.from(Array.from({ length: 1 + random(64) }, () => random(256)));
    case 1:
      return Buffer.from([0x0a, 0x05, 0xff, 0xfe, 0xfd, 0xc3, 0x28]); // field 1: invalid UTF-8
    case 2: {
      // deeply nested junk: field 1 length-delimited inside itself
      let inner = Buffer.from([0x08, 0x01]);
      for (let i = 0; i < 60; i++) inner = Buffer.concat([Buffer.from([0x0a, inner.length < 128 ? inner.length : 127]), inner.subarray(0, 127)]);
      return inner;
    }
    case 3:
      return Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]); // length far past the end
    default:
      return Buffer.from([0x7a, 0x02, 0x01]); // unknown field 15, truncated
  }
}

/** Forces a request of a mutating method to be invalid: an empty required key. */
function breakIt(method: DescMethod, value: Record<string, unknown>): Record<string, unknown> {
  if (method.name === "AppendBatch") {
    const appends = (value.appends as Record<string, unknown>[] | undefined) ?? [];
    return { appends: (appends.length === 0 ? [{}] : appends).map((append) => ({ ...append, session: { key: "" } })) };
  }
  const required = method.input.fields.find((f) => ["session", "target"].includes(f.localName));
  if (required !== undefined) return { ...value, [required.localName]: { key: "" } };
  const watcher = method.input.fields.find((f) => f.localName === "watcherSessionKey");
  if (watcher !== undefined) return { ...value, watcherSessionKey: "" };
  if (method.name === "AckNotices") return { acks: [{ watcherSessionKey: "", notifiedVersion: -1n }] };
  return value;
}

describe("bad input", () => {
  test("10,000 malformed requests at every RPC get proper statuses; no crash, no leak, no change", async () => {
    const dir = tempDir();
    const dbPath = join(dir.dir, "fuzz.db");
    let server: ServerProcess | undefined;
    try {
      server = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0", "--log-level", "fatal"]);
      let clients = connect(server.address);
      await clients.watch.watch({ watcherSessionKey: "agent:main:main", target: { key: "agent:main:subagent:c" } });
      for (let i = 0; i < 20; i++) await clients.signalLog.append(i % 2 === 0 ? human("agent:main:subagent:c") : goal("global"));
      clients.close();
      server.child.kill("SIGTERM");
      await server.exited;
      const before = checksum(dbPath);

      server = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0", "--log-level", "fatal"]);
      const channel = new Client(server.address, credentials.createInsecure());
      const methods = [SignalLog, Watch, Reconcile, Upstream].flatMap((service) => service.methods);
      const codes = new Map<string, number>();
      let sent = 0;
      const one = async (): Promise<void> => {
        const method = pick(methods);
        const path = `/${method.parent.typeName}/${method.name}`;
        let bytes: Buffer;
        // Structured requests to mutating methods are broken on purpose and must be refused; raw bytes
        // that happen to decode (an empty AckNotices, say) are valid requests.
        let mustRefuse = false;
        if (random(3) === 0) {
          bytes = junkBytes();
        } else {
          mustRefuse = mutating.has(method.name) && method.name !== "Prune";
          let value = junkMessage(method.input, 0);
          if (mutating.has(method.name)) value = breakIt(method, value);
          const encoded = toBinary(method.input, create(method.input, value as never));
          bytes = Buffer.from(encoded);
        }
        const pass = (b: Buffer) => b;
        const result = await new Promise<{ code: number; details: string; response?: Buffer | undefined }>((resolve) => {
          if (method.methodKind === "server_streaming") {
            const call = channel.makeServerStreamRequest(path, pass, pass, bytes, { deadline: Date.now() + 5000 });
            call.on("data", () => {
              call.cancel();
              resolve({ code: status.OK, details: "" });
            });
            call.on("error", (err: { code: number; details: string }) => resolve({ code: err.code, details: err.details }));
            call.on("end", () => resolve({ code: status.OK, details: "" }));
          } else {
            channel.makeUnaryRequest(path, pass, pass, bytes, { deadline: Date.now() + 5000 }, (err, response) =>
              resolve(err === null ? { code: status.OK, details: "", response } : { code: err.code, details: err.details }),
            );
          }
        });
        sent++;
        codes.set(`${method.name}:${status[result.code]}`, (codes.get(`${method.name}:${status[result.code]}`) ?? 0) + 1);
        assert.ok(
          ![status.INTERNAL, status.UNKNOWN, status.DEADLINE_EXCEEDED, status.UNAVAILABLE].includes(result.code),
          `${path} answered ${status[result.code]}: ${result.details}`,
        );
        if (mustRefuse && method.name === "AppendBatch" && result.code === status.OK) {
          // The call succeeds; every entry must fail on its own.
          const { results } = fromBinary(AppendBatchResponseSchema, result.response!);
          assert.ok(results.length > 0 && results.every((r) => r.result.case === "failure"), `${path} accepted a malformed entry`);
          for (const r of results) if (r.result.case === "failure") assertNoInternals(r.result.value.message);
        } else if (mustRefuse) {
          assert.notEqual(result.code, status.OK, `${path} accepted a malformed request`);
        }
        assertNoInternals(result.details);
      };
      const workers = Array.from({ length: 32 }, async () => {
        while (sent < 10_000) await one();
      });
      await Promise.all(workers);
      channel.close();
      clients = connect(server.address);
      assert.equal((await clients.reconcile.sessionStatus({ session: { key: "agent:main:subagent:c" } })).stateVersion > 0n, true);
      clients.close();
      server.child.kill("SIGTERM");
      assert.equal(await server.exited, 0, "the server never crashed");
      assert.equal(checksum(dbPath), before, "refused requests changed nothing");
      const invalid = [...codes].filter(([key]) => key.endsWith(":INVALID_ARGUMENT")).reduce((n, [, count]) => n + count, 0);
      assert.ok(invalid > 5000, `mostly INVALID_ARGUMENT (${invalid})`);
    } finally {
      // After a failed assertion the server is still up: never leave it (and this test file) running.
      server?.child.kill("SIGKILL");
      dir.remove();
    }
  });
});
