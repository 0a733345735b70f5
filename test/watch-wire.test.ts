import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AckNoticesResponseSchema, SubscribeStaleNoticesResponseSchema } from "../gen/sessionstate/v1/watch_pb.js";
import { noticeFromCursor } from "../src/notices/notice.js";
import { boolField, encodeFields, stringField, varintField } from "../src/model/wire-fields.js";
import { ackResponse, noticeResponse } from "../src/services/watch-wire.js";
import type { AckOutcome, CursorRecord } from "../src/store/store.js";

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
  const cursor = (): CursorRecord => {
    const acked = version();
    return {
      watcherKey: `agent:${text()}:${text()}`,
      target: { agentId: text(), key: text() },
      acked,
      notified: Math.min(Number.MAX_SAFE_INTEGER, acked + pick([0, 1, 5000])),
      material: Math.min(Number.MAX_SAFE_INTEGER, acked + pick([0, 1, 7000])),
      updatedAtMs: pick([0, 999, 1000, 1_764_676_800_123, 1_764_676_800_000, 253_402_300_799_999]),
    };
  };
  return { next, pick, cursor };
}

describe("hand-encoded watch messages", () => {
  test("a notice response has exactly the bytes toBinary gives", () => {
    const random = generator(7);
    for (let i = 0; i < 500; i++) {
      const notice = noticeFromCursor(random.cursor());
      if (random.next() < 0.5) notice.wake = !notice.wake;
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
            },
          },
        }),
      );
      assert.deepEqual(Buffer.from(noticeResponse(notice).bytes), Buffer.from(expected), `case ${i}`);
    }
  });

  test("an ack response has exactly the bytes toBinary gives, results without a cursor and empty results included", () => {
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
            cursor:
              outcome.cursor === undefined
                ? undefined
                : {
                    watcherSessionKey: outcome.cursor.watcherKey,
                    target: { key: outcome.cursor.target.key, agentId: outcome.cursor.target.agentId },
                    ackedVersion: BigInt(outcome.cursor.acked),
                    notifiedVersion: BigInt(outcome.cursor.notified),
                    materialVersion: BigInt(outcome.cursor.material),
                    updatedAt: timestampFromMs(outcome.cursor.updatedAtMs),
                  },
          })),
        }),
      );
      assert.deepEqual(Buffer.from(ackResponse(outcomes).bytes), Buffer.from(expected), `case ${i}`);
    }
  });

  test("scalar fields at their default are left out, negative integers are 10-byte two's complement, and unsafe numbers are refused", () => {
    assert.deepEqual(encodeFields([...varintField(3, 0), ...boolField(6, false), ...stringField(1, "")]), Buffer.alloc(0));
    assert.deepEqual(encodeFields([...varintField(3, 300), ...boolField(6, true), ...stringField(1, "é")]), Buffer.from([0x18, 0xac, 0x02, 0x30, 0x01, 0x0a, 0x02, 0xc3, 0xa9]));
    for (const value of [-1, -1000, Number.MIN_SAFE_INTEGER]) {
      assert.deepEqual(encodeFields(varintField(1, value)), Buffer.from(new BinaryWriter().tag(1, WireType.Varint).int64(value).finish()), `${value}`);
    }
    assert.throws(() => varintField(3, 1.5), RangeError);
    assert.throws(() => varintField(3, 2 ** 53), RangeError);
  });
});
