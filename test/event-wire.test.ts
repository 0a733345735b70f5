import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { SessionStatusResponseSchema } from "../gen/sessionstate/v1/reconcile_pb.js";
import { AppendBatchResponseSchema, AppendResponseSchema } from "../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind, RunOutcome, StateEventSchema } from "../gen/sessionstate/v1/types_pb.js";
import { encodeStateEvent, eventToProto } from "../src/model/event-wire.js";
import { encodeFields } from "../src/model/wire-fields.js";
import { sessionStatusResponseFields } from "../src/services/reconcile.js";
import { appendBatchResponseFields, appendResponseFields } from "../src/services/signal-log.js";
import { migrations } from "../src/store/migrations.js";
import { SqliteStore } from "../src/store/sqlite-store.js";
import { human, startTestServer, storeAppend, tempDir } from "./helpers.js";

const event = {
  sequence: 4_000_000_001,
  agentId: "ops",
  sessionKey: "agent:ops:subagent:é✓",
  kind: "run_failed" as const,
  actorType: "system" as const,
  actorId: "agent:ops:main",
  runId: "run-7",
  summary: "failed after 3 turns ✗",
  occurredAtMs: 1_764_676_800_123,
  payload: { outcome: "timeout" as const, channel: "slack", turns: 3, catalogId: "c1", hostId: "h1" },
};

describe("events in wire form", () => {
  test("the hand-written wire bytes equal toBinary of the event's StateEvent, for every kind, actor, outcome and time", () => {
    const kinds = ["human_direct_message", "goal_changed", "upstream_missing", "child_spawned", "run_completed", "run_failed", "compacted", "adopted"] as const;
    const actors = ["human", "agent", "system"] as const;
    const outcomes = [undefined, "error", "timeout", "cancelled"] as const;
    const times = [0, 999, 1000, -1, -1001, 1_764_676_800_123, 253_402_300_799_999];
    let n = 0;
    for (const kind of kinds) {
      for (const actorType of actors) {
        for (const [i, outcome] of outcomes.entries()) {
          const occurredAtMs = times[n++ % times.length]!;
          const variant = {
            ...event,
            sequence: [1, 127, 128, 2 ** 40, Number.MAX_SAFE_INTEGER][n % 5]!,
            kind,
            actorType,
            occurredAtMs,
            summary: n % 3 === 0 ? "" : `${kind} 𝄞 ${n}`,
            payload: outcome === undefined ? (i === 0 && n % 2 === 0 ? {} : { turns: 0, channel: "" }) : { ...event.payload, outcome, turns: 2 ** 32 - 1 },
          };
          if (n % 4 === 0) delete (variant as { actorId?: string }).actorId;
          const expected = toBinary(StateEventSchema, create(StateEventSchema, eventToProto(variant)));
          assert.deepEqual(Buffer.from(encodeStateEvent(variant)), Buffer.from(expected), `${kind} ${actorType} ${outcome} ${occurredAtMs}`);
        }
      }
    }
  });

  test("an event's wire bytes decode to the StateEvent of its fields", () => {
    const decoded = fromBinary(StateEventSchema, encodeStateEvent(event));
    assert.equal(decoded.sequence, 4_000_000_001n);
    assert.deepEqual([decoded.session?.key, decoded.session?.agentId], ["agent:ops:subagent:é✓", "ops"]);
    assert.deepEqual([decoded.kind, decoded.actorType], [EventKind.RUN_FAILED, ActorType.SYSTEM]);
    assert.deepEqual([decoded.actorId, decoded.runId, decoded.summary], ["agent:ops:main", "run-7", "failed after 3 turns ✗"]);
    assert.deepEqual([decoded.occurredAt?.seconds, decoded.occurredAt?.nanos], [1_764_676_800n, 123_000_000]);
    assert.deepEqual(
      [decoded.payload?.outcome, decoded.payload?.channel, decoded.payload?.turns, decoded.payload?.catalogId, decoded.payload?.hostId],
      [RunOutcome.TIMEOUT, "slack", 3, "c1", "h1"],
    );
  });

  test("hand-encoded Append, AppendBatch and SessionStatus responses are byte for byte what toBinary gives", () => {
    const wires = [encodeStateEvent(event), encodeStateEvent({ ...event, sequence: 9, payload: {}, summary: "" })];
    const whole = create(SessionStatusResponseSchema, {
      session: { key: "agent:ops:x", agentId: "ops" },
      stateVersion: 12n,
      stateChanges: {
        events: [eventToProto(event), eventToProto({ ...event, sequence: 9, payload: {}, summary: "" })],
        historyGap: true,
        truncated: true,
        earliestAvailableSequence: 5n,
      },
    });
    const stored = [
      { ...event, wire: wires[0]! },
      { ...event, sequence: 9, payload: {}, summary: "", wire: wires[1]! },
    ];
    const status = sessionStatusResponseFields(
      { key: "agent:ops:x", agentId: "ops" },
      { stateVersion: 12, changes: { events: stored, historyGap: true, truncated: true, earliestAvailableSequence: 5 } },
    );
    assert.deepEqual(encodeFields(status), Buffer.from(toBinary(SessionStatusResponseSchema, whole)));
    const headOnly = sessionStatusResponseFields({ key: "agent:ops:x", agentId: "ops" }, { stateVersion: 0 });
    const headOnlyWhole = create(SessionStatusResponseSchema, { session: { key: "agent:ops:x", agentId: "ops" } });
    assert.deepEqual(encodeFields(headOnly), Buffer.from(toBinary(SessionStatusResponseSchema, headOnlyWhole)));

    const recorded = { recorded: true, deduplicated: false, event: stored[0]!, stateVersion: 4_000_000_001, noticesOpened: 0 } as const;
    const appendWhole = create(AppendResponseSchema, { recorded: true, event: eventToProto(event), stateVersion: 4_000_000_001n });
    assert.deepEqual(encodeFields(appendResponseFields(recorded)), Buffer.from(toBinary(AppendResponseSchema, appendWhole)));
    const notWatched = appendResponseFields({ recorded: false, stateVersion: 7 });
    assert.deepEqual(encodeFields(notWatched), Buffer.from(toBinary(AppendResponseSchema, create(AppendResponseSchema, { stateVersion: 7n }))));

    const batch = appendBatchResponseFields([appendResponseFields(recorded), { code: 3, message: "appends[1]: summary: é" }, notWatched, []]);
    const batchWhole = create(AppendBatchResponseSchema, {
      results: [
        { result: { case: "response", value: appendWhole } },
        { result: { case: "failure", value: { code: 3, message: "appends[1]: summary: é" } } },
        { result: { case: "response", value: { stateVersion: 7n } } },
        { result: { case: "response", value: {} } },
      ],
    });
    assert.deepEqual(encodeFields(batch), Buffer.from(toBinary(AppendBatchResponseSchema, batchWhole)));
  });

  test("sequences stay strictly increasing and never reused when the wire bytes are taken before the insert", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "seq.db");
    try {
      const store = SqliteStore.open(path, "normal");
      const first = await store.append(storeAppend("agent:main:a", 1));
      const second = await store.append(storeAppend("agent:main:b", 1));
      await store.deleteSession({ agentId: "main", key: "agent:main:b" });
      await store.close();
      const reopened = SqliteStore.open(path, "normal");
      const third = await reopened.append(storeAppend("agent:main:c", 1));
      const status = await reopened.sessionStatus({ agentId: "main", key: "agent:main:c" }, 0, 10);
      await reopened.close();
      assert.deepEqual([first, second, third].map((o) => (o.recorded ? o.event.sequence : 0)), [1, 2, 3]);
      assert.equal(fromBinary(StateEventSchema, status.changes!.events[0]!.wire).sequence, 3n);
    } finally {
      dir.remove();
    }
  });

  test("a database from before wire bytes is filled in when opened, and answers SessionStatus", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "v2.db");
    try {
      const old = new Database(path);
      for (const migration of migrations.slice(0, 2)) old.exec(migration.sql);
      old.pragma("user_version = 2");
      old
        .prepare(
          `INSERT INTO events (agent_id, session_key, kind, actor_type, actor_id, summary, occurred_at_ms, outcome, turns)
           VALUES ('main', 'agent:main:old', 'run_failed', 'agent', 'agent:main:boss', 'it broke', 1796126400123, 'error', 2)`,
        )
        .run();
      old.prepare("INSERT INTO heads (agent_id, session_key, state_version, updated_at_ms) VALUES ('main', 'agent:main:old', 1, 1)").run();
      old.close();

      const store = SqliteStore.open(path, "normal");
      await store.close();
      const clients = await startTestServer({ dbPath: path });
      try {
        const status = await clients.reconcile.sessionStatus({ session: { key: "agent:main:old" }, changesSince: 0n });
        const [stored] = status.stateChanges!.events;
        assert.equal(status.stateChanges!.events.length, 1);
        assert.deepEqual(
          [stored!.sequence, stored!.kind, stored!.actorId, stored!.summary, stored!.payload?.outcome, stored!.payload?.turns],
          [1n, EventKind.RUN_FAILED, "agent:main:boss", "it broke", RunOutcome.ERROR, 2],
        );
        assert.equal(stored!.occurredAt?.nanos, 123_000_000);
        const next = await clients.signalLog.append(human("agent:main:old"));
        assert.equal(next.event?.sequence, 2n);
      } finally {
        await clients.dispose();
      }
    } finally {
      dir.remove();
    }
  });
});
