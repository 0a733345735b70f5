import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { create, fromBinary, isFieldSet, toBinary, type DescMessage, type Message, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { AppendBatchResponseSchema, AppendResponseSchema } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, CursorSchema, EventKind, RunOutcome, StateEventSchema } from "../../gen/sessionstate/v1/types_pb.js";
import {
  AckNoticesResponseSchema,
  ListWatchesResponseSchema,
  SubscribeStaleNoticesResponseSchema,
  WatchResponseSchema,
} from "../../gen/sessionstate/v1/watch_pb.js";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import { actorsToProto, kindsToProto, outcomesToProto, provenancesToProto } from "../../src/codec/proto-enums.js";
import {
  ackResponse,
  appendBatchResponse,
  appendResponse,
  listWatchesResponse,
  noticeResponse,
  sessionStatusResponse,
  syncedResponse,
  watchResponse,
} from "../../src/codec/response-codec.js";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { newWriter, writeInteger } from "../../src/codec/wire-writer.js";
import type { EventFields } from "../../src/domain/event.js";
import { hasLiveNotice } from "../../src/domain/cursor-rules.js";
import { noticeFromCursor } from "../../src/domain/notice.js";
import type { AckOutcome, AppendOutcome, CursorRecord } from "../../src/domain/records.js";
import { encodeVersion2Event } from "../../src/store/sqlite/migration-3-wire.js";
import { migrations } from "../../src/store/sqlite/migrations.js";
import { human, seededRandom, startTestServer, storeAppend, tempDir, openTestStore } from "../support/helpers.js";

/** An event with every field set to something other than its default. */
const event: EventFields = {
  sequence: 4_000_000_001,
  namespace: "default",
  agentId: "ops",
  sessionKey: "agent:ops:subagent:é✓",
  kind: "run_failed",
  actorType: "system",
  actorId: "agent:ops:main",
  runId: "run-7",
  summary: "failed after 3 turns ✗",
  occurredAtMs: 1_764_676_800_123,
  payload: { outcome: "timeout", channel: "slack", turns: 3, catalogId: "c1", hostId: "h1", reason: "out of memory" },
};

/** A cursor with every field set to something other than its default. */
const cursor: CursorRecord = {
  watcherKey: "agent:main:boss",
  target: { namespace: "default", agentId: "ops", key: "agent:ops:worker" },
  acked: 3,
  notified: 5,
  material: 2 ** 40,
  updatedAtMs: 1_764_676_800_456,
  provenance: "ambient",
  extraKinds: ["run_completed", "compacted"],
};

/** The StateEvent of an event, built field by field from the proto's own types (the reference). */
function stateEventInit(e: EventFields): MessageInitShape<typeof StateEventSchema> {
  return {
    sequence: BigInt(e.sequence),
    session: { key: e.sessionKey, agentId: e.agentId },
    kind: kindsToProto.get(e.kind)!,
    actorType: actorsToProto.get(e.actorType)!,
    actorId: e.actorId ?? "",
    runId: e.runId ?? "",
    summary: e.summary,
    occurredAt: timestampFromMs(e.occurredAtMs),
    payload: {
      outcome: e.payload.outcome === undefined ? RunOutcome.UNSPECIFIED : outcomesToProto.get(e.payload.outcome)!,
      channel: e.payload.channel ?? "",
      turns: e.payload.turns ?? 0,
      catalogId: e.payload.catalogId ?? "",
      hostId: e.payload.hostId ?? "",
      reason: e.payload.reason ?? "",
    },
  };
}

function cursorInit(c: CursorRecord): MessageInitShape<typeof CursorSchema> {
  return {
    watcherSessionKey: c.watcherKey,
    target: { key: c.target.key, agentId: c.target.agentId },
    ackedVersion: BigInt(c.acked),
    notifiedVersion: BigInt(c.notified),
    materialVersion: BigInt(c.material),
    updatedAt: timestampFromMs(c.updatedAtMs),
    provenance: provenancesToProto.get(c.provenance)!,
    extraMaterialKinds: c.extraKinds.map((kind) => kindsToProto.get(kind)!),
    pendingNoticeText: hasLiveNotice(c) ? noticeFromCursor(c).text : "",
  };
}

/** A small deterministic generator, so a failure names a case that can be replayed. */
function generator(seed: number) {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const text = (): string => {
    const pieces = ["", "a", "agent:main:", "subagent:", "é", "✓", "𝄞", "中文", "-", "0", " "];
    let out = "";
    for (let n = Math.floor(next() * 6); n > 0; n--) out += pick(pieces);
    return out;
  };
  const version = (): number =>
    pick([0, 1, 127, 128, 16_383, 16_384, 2 ** 31 - 1, 2 ** 32, 2 ** 35 + 3, Number.MAX_SAFE_INTEGER, Math.floor(next() * 1e6)]);
  const randomCursor = (): CursorRecord => {
    const acked = version();
    return {
      watcherKey: `agent:${text()}:${text()}`,
      target: { namespace: "default", agentId: text(), key: text() },
      acked,
      notified: Math.min(Number.MAX_SAFE_INTEGER, acked + pick([0, 1, 5000])),
      material: Math.min(Number.MAX_SAFE_INTEGER, acked + pick([0, 1, 7000])),
      updatedAtMs: pick([0, 999, 1000, -1, -1001, 1_764_676_800_123, 1_764_676_800_000, 253_402_300_799_999]),
      provenance: pick(["explicit", "ambient"] as const),
      extraKinds: pick([[], ["run_failed"], ["run_completed", "run_failed", "compacted"]] as const),
    };
  };
  return { next, pick, cursor: randomCursor };
}

/** Every `Message.field` reachable from `schema`, as "TypeName.field". */
function reachableFields(schema: DescMessage, out = new Set<string>(), visited = new Set<string>()): Set<string> {
  if (visited.has(schema.typeName)) return out;
  visited.add(schema.typeName);
  for (const field of schema.fields) {
    out.add(`${schema.typeName}.${field.name}`);
    if (field.fieldKind === "message") reachableFields(field.message, out, visited);
    if (field.fieldKind === "list" && field.listKind === "message") reachableFields(field.message, out, visited);
  }
  return out;
}

/** Adds to `seen` every field set in `message` and, recursively, in the messages it holds. */
function collectSetFields(schema: DescMessage, message: Message, seen: Set<string>): void {
  for (const field of schema.fields) {
    if (!isFieldSet(message, field)) continue;
    seen.add(`${schema.typeName}.${field.name}`);
    const fields = message as unknown as Record<string, unknown>;
    const value = field.oneof === undefined ? fields[field.localName] : (fields[field.oneof.localName] as { value: unknown }).value;
    if (field.fieldKind === "message") collectSetFields(field.message, value as Message, seen);
    if (field.fieldKind === "list" && field.listKind === "message") {
      for (const item of value as Message[]) collectSetFields(field.message, item, seen);
    }
  }
}

/**
 * Decodes what an encoder wrote and checks it is canonical (re-encoding gives the same bytes); returns
 * the message so a test can look at its values.
 */
function decodeCanonical<S extends DescMessage>(schema: S, bytes: Uint8Array): Message {
  const message = fromBinary(schema, bytes);
  assert.deepEqual(Buffer.from(toBinary(schema, message)), Buffer.from(bytes), `${schema.typeName} is canonical`);
  return message as Message;
}

const storedEvent = { ...event, wire: encodeStateEvent(event) };
const recorded: AppendOutcome = { recorded: true, deduplicated: true, event: storedEvent, stateVersion: 4_000_000_002, noticesOpened: 0 };

describe("the codec", () => {
  test("every field of every hot message is written by its encoder (the schema is walked, so a new proto field fails here)", () => {
    /** Each hot message, with samples that between them set every field an encoder can write. */
    const cases: { schema: DescMessage; samples: Uint8Array[] }[] = [
      { schema: StateEventSchema, samples: [encodeStateEvent(event)] },
      { schema: AppendResponseSchema, samples: [appendResponse(recorded).bytes] },
      {
        schema: AppendBatchResponseSchema,
        samples: [appendBatchResponse([recorded, { code: "INVALID_ARGUMENT", message: "appends[1]: summary: too long" }]).bytes],
      },
      {
        schema: SessionStatusResponseSchema,
        samples: [
          sessionStatusResponse(
            { namespace: "default", key: "agent:ops:x", agentId: "ops" },
            { stateVersion: 12, changes: { events: [storedEvent], historyGap: true, truncated: true, earliestAvailableSequence: 5 } },
          ).bytes,
        ],
      },
      {
        schema: SubscribeStaleNoticesResponseSchema,
        // An ambient notice (queue only) and a waking one: between them every field is set once.
        samples: [
          noticeResponse(noticeFromCursor(cursor)).bytes,
          noticeResponse(noticeFromCursor({ ...cursor, provenance: "explicit" }), { claimId: "claim-1", deliveryCount: 2 }).bytes,
          syncedResponse(4).bytes,
        ],
      },
      { schema: AckNoticesResponseSchema, samples: [ackResponse([{ acknowledged: true, reopened: true, cursor }], () => "gw ipv4:127.0.0.1:5000").bytes] },
      { schema: WatchResponseSchema, samples: [watchResponse({ cursor }, () => "gw ipv4:127.0.0.1:5000").bytes, watchResponse({ reason: "not agent-qualified" }).bytes] },
      { schema: ListWatchesResponseSchema, samples: [listWatchesResponse([cursor], "next-page", () => "gw ipv4:127.0.0.1:5000").bytes] },
    ];
    for (const { schema, samples } of cases) {
      const seen = new Set<string>();
      for (const bytes of samples) collectSetFields(schema, decodeCanonical(schema, bytes), seen);
      const missing = [...reachableFields(schema)].filter((field) => !seen.has(field));
      assert.deepEqual(missing, [], `${schema.typeName}: fields its encoder never writes`);
    }
  });

  test("StateEvent bytes equal toBinary of the event's StateEvent, for every kind, actor, outcome and time", () => {
    const kinds = ["human_direct_message", "goal_changed", "upstream_missing", "child_spawned", "run_completed", "run_failed", "compacted", "adopted"] as const;
    const actors = ["human", "agent", "system"] as const;
    const outcomes = [undefined, "error", "timeout", "cancelled"] as const;
    const times = [0, 999, 1000, -1, -1001, 1_764_676_800_123, 253_402_300_799_999];
    let n = 0;
    for (const kind of kinds) {
      for (const actorType of actors) {
        for (const [i, outcome] of outcomes.entries()) {
          const occurredAtMs = times[n++ % times.length]!;
          const variant: EventFields = {
            ...event,
            sequence: [1, 127, 128, 2 ** 40, Number.MAX_SAFE_INTEGER][n % 5]!,
            kind,
            actorType,
            occurredAtMs,
            summary: n % 3 === 0 ? "" : `${kind} 𝄞 ${n}`,
            payload: outcome === undefined ? (i === 0 && n % 2 === 0 ? {} : { turns: 0, channel: "" }) : { ...event.payload, outcome, turns: 2 ** 32 - 1 },
          };
          if (n % 4 === 0) delete variant.actorId;
          const expected = toBinary(StateEventSchema, create(StateEventSchema, stateEventInit(variant)));
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

  test("migration 3's frozen encoder still writes what the live encoder writes for a schema-2 row", () => {
    const row = {
      sequence: event.sequence,
      agent_id: event.agentId,
      session_key: event.sessionKey,
      kind: event.kind,
      actor_type: event.actorType,
      actor_id: event.actorId!,
      run_id: event.runId!,
      summary: event.summary,
      occurred_at_ms: event.occurredAtMs,
      outcome: event.payload.outcome!,
      channel: event.payload.channel!,
      turns: event.payload.turns!,
      catalog_id: event.payload.catalogId!,
      host_id: event.payload.hostId!,
    };
    // A schema-2 row had no failure reason: the live encoder writes the same bytes for an event without one.
    const { reason: _reason, ...payloadOfVersion2 } = event.payload;
    assert.deepEqual(Buffer.from(encodeVersion2Event(row)), Buffer.from(encodeStateEvent({ ...event, payload: payloadOfVersion2 })));
    const bare = { ...row, actor_id: null, run_id: null, outcome: null, channel: null, turns: null, catalog_id: null, host_id: null, occurred_at_ms: -1001 };
    const { actorId: _actorId, runId: _runId, ...withoutActorOrRun } = event;
    assert.deepEqual(
      Buffer.from(encodeVersion2Event(bare)),
      Buffer.from(encodeStateEvent({ ...withoutActorOrRun, payload: {}, occurredAtMs: -1001 })),
    );
  });

  test("Append, AppendBatch and SessionStatus responses are byte for byte what toBinary gives", () => {
    const second: EventFields = { ...event, sequence: 9, payload: {}, summary: "" };
    const stored = [storedEvent, { ...second, wire: encodeStateEvent(second) }];
    const whole = create(SessionStatusResponseSchema, {
      session: { key: "agent:ops:x", agentId: "ops" },
      stateVersion: 12n,
      stateChanges: { events: [stateEventInit(event), stateEventInit(second)], historyGap: true, truncated: true, earliestAvailableSequence: 5n },
    });
    const status = sessionStatusResponse(
      { namespace: "default", key: "agent:ops:x", agentId: "ops" },
      { stateVersion: 12, changes: { events: stored, historyGap: true, truncated: true, earliestAvailableSequence: 5 } },
    );
    assert.deepEqual(Buffer.from(status.bytes), Buffer.from(toBinary(SessionStatusResponseSchema, whole)));
    const headOnly = sessionStatusResponse({ namespace: "default", key: "agent:ops:x", agentId: "ops" }, { stateVersion: 0 });
    const headOnlyWhole = create(SessionStatusResponseSchema, { session: { key: "agent:ops:x", agentId: "ops" } });
    assert.deepEqual(Buffer.from(headOnly.bytes), Buffer.from(toBinary(SessionStatusResponseSchema, headOnlyWhole)));

    const fresh: AppendOutcome = { recorded: true, deduplicated: false, event: stored[0]!, stateVersion: 4_000_000_001, noticesOpened: 0 };
    const appendWhole = create(AppendResponseSchema, { recorded: true, event: stateEventInit(event), stateVersion: 4_000_000_001n });
    assert.deepEqual(Buffer.from(appendResponse(fresh).bytes), Buffer.from(toBinary(AppendResponseSchema, appendWhole)));
    const notWatched: AppendOutcome = { recorded: false, stateVersion: 7 };
    assert.deepEqual(
      Buffer.from(appendResponse(notWatched).bytes),
      Buffer.from(toBinary(AppendResponseSchema, create(AppendResponseSchema, { stateVersion: 7n }))),
    );
    const batch = appendBatchResponse([fresh, { code: "INVALID_ARGUMENT", message: "appends[1]: summary: é" }, notWatched, { recorded: false, stateVersion: 0 }]);
    const batchWhole = create(AppendBatchResponseSchema, {
      results: [
        { result: { case: "response", value: appendWhole } },
        { result: { case: "failure", value: { code: 3, message: "appends[1]: summary: é" } } },
        { result: { case: "response", value: { stateVersion: 7n } } },
        { result: { case: "response", value: {} } },
      ],
    });
    assert.deepEqual(Buffer.from(batch.bytes), Buffer.from(toBinary(AppendBatchResponseSchema, batchWhole)));
  });

  test("notice responses have exactly the bytes toBinary gives", () => {
    const random = generator(7);
    for (let i = 0; i < 500; i++) {
      const notice = noticeFromCursor(random.cursor());
      if (random.next() < 0.5) notice.wake = !notice.wake;
      // A consumer group's notice carries its claim.
      const claim = random.next() < 0.5 ? { claimId: `claim-${i}`, deliveryCount: 1 + (i % 3) } : undefined;
      const expected = toBinary(
        SubscribeStaleNoticesResponseSchema,
        create(SubscribeStaleNoticesResponseSchema, {
          message: {
            case: "notice",
            value: {
              watcherSessionKey: notice.watcherKey,
              target: { key: notice.target.key, agentId: notice.target.agentId },
              changesSince: BigInt(notice.changesSince),
              notifiedVersion: BigInt(notice.notifiedVersion),
              text: notice.text,
              wake: notice.wake,
              contextKey: notice.contextKey,
              queueOnly: notice.queueOnly,
              ...(claim === undefined ? {} : { claimId: claim.claimId, deliveryCount: claim.deliveryCount }),
            },
          },
        }),
      );
      assert.deepEqual(Buffer.from(noticeResponse(notice, claim).bytes), Buffer.from(expected), `case ${i}`);
    }
    const synced = create(SubscribeStaleNoticesResponseSchema, { message: { case: "synced", value: { pendingDelivered: 0 } } });
    assert.deepEqual(Buffer.from(syncedResponse(0).bytes), Buffer.from(toBinary(SubscribeStaleNoticesResponseSchema, synced)));
  });

  test("ack, watch and list-watches responses have exactly the bytes toBinary gives, results without a cursor included", () => {
    const random = generator(11);
    for (let i = 0; i < 300; i++) {
      const outcomes: AckOutcome[] = Array.from({ length: random.pick([0, 1, 2, 5]) }, () => {
        const outcome: AckOutcome = { acknowledged: random.next() < 0.5, reopened: random.next() < 0.3 };
        if (random.next() < 0.8) outcome.cursor = random.cursor();
        return outcome;
      });
      const expected = toBinary(
        AckNoticesResponseSchema,
        create(AckNoticesResponseSchema, {
          results: outcomes.map((outcome) => ({
            acknowledged: outcome.acknowledged,
            reopened: outcome.reopened,
            cursor: outcome.cursor === undefined ? undefined : cursorInit(outcome.cursor),
          })),
        }),
      );
      assert.deepEqual(Buffer.from(ackResponse(outcomes).bytes), Buffer.from(expected), `case ${i}`);
      const cursors = outcomes.flatMap((outcome) => (outcome.cursor === undefined ? [] : [outcome.cursor]));
      const token = i % 2 === 0 ? "" : `token-${i}`;
      // Every other list names a holder of each pair's claim (consumer groups).
      const claimedBy = (c: { watcherKey: string }): string => (i % 2 === 0 ? "" : `gw-${i} ipv4:127.0.0.1:${c.watcherKey.length}`);
      const list = create(ListWatchesResponseSchema, { cursors: cursors.map((c) => ({ ...cursorInit(c), claimedBy: claimedBy(c) })), nextPageToken: token });
      assert.deepEqual(Buffer.from(listWatchesResponse(cursors, token, claimedBy).bytes), Buffer.from(toBinary(ListWatchesResponseSchema, list)), `list ${i}`);
    }
    const watched = create(WatchResponseSchema, { watched: true, cursor: cursorInit(cursor) });
    assert.deepEqual(Buffer.from(watchResponse({ cursor }).bytes), Buffer.from(toBinary(WatchResponseSchema, watched)));
  });

  test("the wire writer writes what protobuf-es's BinaryWriter writes, nested messages of every length size included", () => {
    const random = seededRandom(3);
    for (let round = 0; round < 200; round++) {
      const ours = newWriter();
      const theirs = new BinaryWriter();
      // Nested messages whose bodies need 1, 2 or 3 length bytes, holding every kind of field these encoders write.
      const write = (depth: number): void => {
        const fields = 1 + random(6);
        for (let i = 0; i < fields; i++) {
          const field = 1 + random(3000);
          switch (random(6)) {
            case 0: {
              const value = random(2) === 0 ? random(200) : random(2 ** 31) * 2;
              ours.tag(field, WireType.Varint).uint32(value);
              theirs.tag(field, WireType.Varint).uint32(value);
              break;
            }
            case 1: {
              const value = BigInt(random(2 ** 31)) * BigInt(random(2 ** 22)) * (random(2) === 0 ? -1n : 1n);
              ours.tag(field, WireType.Varint).int64(value);
              theirs.tag(field, WireType.Varint).int64(value);
              break;
            }
            case 2: {
              const value = random(2) === 0 ? -random(100) : random(100);
              ours.tag(field, WireType.Varint).int32(value).bool(value > 50);
              theirs.tag(field, WireType.Varint).int32(value).bool(value > 50);
              break;
            }
            case 3: {
              const text = "é✓x".repeat(random(2) === 0 ? random(10) : random(7000));
              ours.tag(field, WireType.LengthDelimited).string(text);
              theirs.tag(field, WireType.LengthDelimited).string(text);
              break;
            }
            case 4: {
              const bytes = new Uint8Array(random(300)).map((_, j) => j);
              ours.tag(field, WireType.LengthDelimited).bytes(bytes);
              theirs.tag(field, WireType.LengthDelimited).bytes(bytes);
              break;
            }
            default:
              if (depth < 3) {
                ours.tag(field, WireType.LengthDelimited).fork();
                theirs.tag(field, WireType.LengthDelimited).fork();
                write(depth + 1);
                ours.join();
                theirs.join();
              }
          }
        }
      };
      write(0);
      assert.deepEqual(Buffer.from(ours.finish()), Buffer.from(theirs.finish()), `round ${round}`);
    }
  });

  test("integers at 0 are left out, negative ones are 10-byte two's complement, and unsafe numbers are refused", () => {
    const write = (value: number): Buffer => {
      const writer = newWriter();
      writeInteger(writer, 1, value);
      return Buffer.from(writer.finish());
    };
    assert.deepEqual(write(0), Buffer.alloc(0));
    assert.deepEqual(write(300), Buffer.from([0x08, 0xac, 0x02]));
    assert.deepEqual(write(2 ** 32), Buffer.from([0x08, 0x80, 0x80, 0x80, 0x80, 0x10]));
    assert.deepEqual(write(-1), Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
    assert.throws(() => write(1.5), RangeError);
    assert.throws(() => write(2 ** 53), RangeError);
  });

  test("sequences stay strictly increasing and never reused when the wire bytes are taken before the insert", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "seq.db");
    try {
      const store = openTestStore(path);
      const first = await store.append(storeAppend("agent:main:a", 1));
      const second = await store.append(storeAppend("agent:main:b", 1));
      await store.deleteSession({ namespace: "default", agentId: "main", key: "agent:main:b" });
      await store.close();
      const reopened = openTestStore(path);
      const third = await reopened.append(storeAppend("agent:main:c", 1));
      const status = await reopened.sessionStatus({ namespace: "default", agentId: "main", key: "agent:main:c" }, 0, 10);
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

      const store = openTestStore(path);
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
