import assert from "node:assert/strict";
import { test } from "node:test";
import { consumerGroupProblem, decideClaim } from "../../src/domain/consumer-group.js";

test("a group's name is 1-128 characters of [A-Za-z0-9._:-]; max_in_flight is 0 to 1000 and only with a group", () => {
  assert.equal(consumerGroupProblem("", 0), undefined);
  assert.equal(consumerGroupProblem("gateway-a.prod:1_x", 0), undefined);
  assert.equal(consumerGroupProblem("g", 1000), undefined);
  assert.equal(consumerGroupProblem("x".repeat(128), 1), undefined);
  assert.deepEqual(consumerGroupProblem("", 4), { field: "max_in_flight", problem: "is only for a consumer group (set consumer_group)" });
  for (const bad of ["x".repeat(129), "a b", "é", "a/b"]) assert.equal(consumerGroupProblem(bad, 0)?.field, "consumer_group", bad);
  for (const bad of [-1, 1001]) assert.equal(consumerGroupProblem("g", bad)?.field, "max_in_flight", String(bad));
});

test("a notice held by another member is not taken; one held by the member itself is not sent again", () => {
  const member = { self: "a", held: 0, maxInFlight: 2, declined: undefined };
  assert.deepEqual(decideClaim({ notified: 5, holder: "b", deliveryCount: 1 }, 5, member), { take: false, why: "held" });
  assert.deepEqual(decideClaim({ notified: 5, holder: "a", deliveryCount: 1 }, 5, member), { take: false, why: "mine" });
});

test("the first claim counts 1; one handed on counts one more; a reopened notice is a new one and ends the stale claim", () => {
  const member = { self: "a", held: 0, maxInFlight: 2, declined: undefined };
  assert.deepEqual(decideClaim(undefined, 5, member), { take: true, deliveryCount: 1, endsStaleClaim: false });
  assert.deepEqual(decideClaim({ notified: 5, holder: undefined, deliveryCount: 2 }, 5, member), { take: true, deliveryCount: 3, endsStaleClaim: false });
  assert.deepEqual(decideClaim({ notified: 5, holder: "b", deliveryCount: 4 }, 9, member), { take: true, deliveryCount: 1, endsStaleClaim: true });
});

test("a member at its max_in_flight takes nothing; one that gave a notice back does not take that notice again", () => {
  assert.deepEqual(decideClaim(undefined, 5, { self: "a", held: 2, maxInFlight: 2, declined: undefined }), { take: false, why: "full" });
  assert.deepEqual(decideClaim({ notified: 5, holder: undefined, deliveryCount: 1 }, 5, { self: "a", held: 0, maxInFlight: 2, declined: 5 }), { take: false, why: "declined" });
  assert.deepEqual(decideClaim(undefined, 6, { self: "a", held: 0, maxInFlight: 2, declined: 5 }), { take: true, deliveryCount: 1, endsStaleClaim: false });
});
