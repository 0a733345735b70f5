import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  applyAck,
  applyMaterialEvent,
  isPending,
  seedCursor,
  type CursorMarks,
} from "../../src/domain/cursor-machine.js";

const marks = (acked: number, notified: number, material: number): CursorMarks => ({ acked, notified, material });

describe("cursor machine", () => {
  test("a seed has nothing pending", () => {
    assert.deepEqual(seedCursor(7), marks(7, 7, 7));
    assert.equal(isPending(seedCursor(7)), false);
  });

  test("the first material event opens a notice; later ones leave N frozen", () => {
    const first = applyMaterialEvent(seedCursor(3), 5);
    assert.deepEqual(first, { cursor: marks(3, 5, 5), opened: true });
    const second = applyMaterialEvent(first.cursor, 9);
    assert.deepEqual(second, { cursor: marks(3, 5, 9), opened: false });
  });

  test("a material event for a watcher without a cursor starts at L = 0", () => {
    assert.deepEqual(applyMaterialEvent(undefined, 4), { cursor: marks(0, 4, 4), opened: true });
  });

  test("an ack moves L to N and reopens exactly one notice for the remainder", () => {
    assert.deepEqual(applyAck(marks(3, 5, 9), 5), { cursor: marks(5, 9, 9), acknowledged: true, reopened: true });
    assert.deepEqual(applyAck(marks(3, 5, 5), 5), { cursor: marks(5, 5, 5), acknowledged: true, reopened: false });
  });

  test("an ack with reconciled_through skips what the watcher already caught up on", () => {
    assert.deepEqual(applyAck(marks(3, 5, 9), 5, 9), { cursor: marks(9, 9, 9), acknowledged: true, reopened: false });
    assert.deepEqual(applyAck(marks(3, 5, 9), 5, 7), { cursor: marks(7, 9, 9), acknowledged: true, reopened: true });
    assert.deepEqual(applyAck(marks(3, 5, 9), 5, 4), { cursor: marks(5, 9, 9), acknowledged: true, reopened: true });
    assert.deepEqual(applyAck(marks(3, 5, 9), 5, 100), { cursor: marks(9, 9, 9), acknowledged: true, reopened: false });
  });

  test("a stale or repeated ack changes nothing", () => {
    const pending = marks(3, 5, 9);
    assert.deepEqual(applyAck(pending, 4), { cursor: pending, acknowledged: false, reopened: false });
    const settled = marks(5, 5, 5);
    assert.deepEqual(applyAck(settled, 5), { cursor: settled, acknowledged: false, reopened: false });
  });

  test("random events and acks never break L <= N <= M and never lose a material event", () => {
    let seed = 12345;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let run = 0; run < 500; run++) {
      let cursor: CursorMarks | undefined = random(2) === 0 ? undefined : seedCursor(random(5));
      let sequence = cursor?.material ?? 0;
      let notices = 0;
      for (let step = 0; step < 60; step++) {
        if (cursor === undefined || random(3) > 0) {
          sequence += 1 + random(4);
          const next = applyMaterialEvent(cursor, sequence);
          assert.equal(next.opened, !(cursor !== undefined && isPending(cursor)), "opens iff nothing was pending");
          cursor = next.cursor;
          if (next.opened) notices++;
        } else {
          const version = random(4) === 0 ? cursor.notified - 1 : cursor.notified;
          const through = random(2) === 0 ? undefined : random(sequence + 2);
          const result = applyAck(cursor, version, through);
          if (result.reopened) notices++;
          cursor = result.cursor;
        }
        assert.ok(cursor.acked <= cursor.notified && cursor.notified <= cursor.material, JSON.stringify(cursor));
        assert.equal(cursor.material, sequence, "M is always the newest material event");
        if (isPending(cursor)) assert.ok(notices > 0);
      }
      // A final ack that reconciles through the head leaves nothing unseen.
      if (isPending(cursor!)) cursor = applyAck(cursor!, cursor!.notified, sequence).cursor;
      assert.equal(cursor!.acked, cursor!.material);
      assert.equal(cursor!.acked, sequence);
    }
  });
});
