/**
 * The floor under Append on this design: a bare grpc-js server whose one unary method stores one event
 * per call exactly as sessionstate's SQLite store does (the same file settings and schema, the same
 * `EventTables.insertEvent`, group-committed by the same `GroupCommit`) and answers with the request's
 * bytes, like the echo server. It decodes nothing, checks nothing, encodes nothing (every row gets the
 * same pre-encoded event bytes), reads no cursors and counts no metrics: what Append costs with all of its
 * own work taken away except the write it must make before it answers.
 *
 *   node --import tsx bench/append-floor-server.ts <database file>    (prints "listening on 127.0.0.1:PORT")
 *
 * The number of stored events, which proves the calls succeeded, is in the file once the server has
 * stopped (SIGTERM).
 */
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from "@grpc/grpc-js";
import type { EventFields } from "../src/domain/event.js";
import { encodeStateEvent } from "../src/codec/event-codec.js";
import { EventTables } from "../src/store/sqlite/event-tables.js";
import { GroupCommit } from "../src/store/sqlite/group-commit.js";
import { openDatabase } from "../src/store/sqlite/open-database.js";
import { Checkpointer } from "../src/store/sqlite/checkpointer.js";
import { rawUnaryMethod } from "./lib.js";

const path = process.argv[2];
if (path === undefined) throw new Error("usage: append-floor-server.ts <database file>");
const { db } = openDatabase(path, "normal");
// Checkpoints on a worker thread, as the store's: the floor's write path is the store's.
new Checkpointer(path, 100, () => undefined);
const events = new EventTables(db);
const groupCommit = new GroupCommit(
  db,
  () => undefined,
  () => undefined,
);
const fields: EventFields = {
  sequence: 1,
  namespace: "default",
  agentId: "bench",
  sessionKey: "agent:bench:subagent:s0",
  kind: "goal_changed",
  actorType: "agent",
  summary: "goal updated by the benchmark",
  occurredAtMs: Date.now(),
  payload: {},
};
const wire = encodeStateEvent(fields);

function store(nowMs: number) {
  events.insertEvent({ ...fields, sequence: events.nextSequence(), occurredAtMs: nowMs, wire }, undefined, nowMs);
  return { value: undefined, changes: [] };
}

const server = new Server({ "grpc.enable_channelz": 0 });
server.addService(
  { append: rawUnaryMethod("/bench.Floor/Append") },
  {
    append: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      groupCommit.enqueue(() => store(Date.now())).then(
        () => callback(null, call.request),
        (error: Error) => callback(error, null),
      );
    },
  },
);
server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) throw err;
  process.stdout.write(`listening on 127.0.0.1:${port}\n`);
});
process.on("SIGTERM", () =>
  server.tryShutdown(() => {
    db.close();
    process.exit(0);
  }),
);
