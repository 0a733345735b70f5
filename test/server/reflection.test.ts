import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { goal, startTestServer, type TestServer } from "../support/helpers.js";

const buf = fileURLToPath(new URL("../../node_modules/.bin/buf", import.meta.url));
const run = promisify(execFile);

describe("reflection and health, through buf curl", () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t.dispose();
  });

  const curl = (...args: string[]) =>
    run(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args], { timeout: 30_000 });

  test("lists the four services and health", async () => {
    const { stdout } = await curl("--list-services", `http://${t.server.address}`);
    assert.deepEqual(stdout.trim().split("\n").sort(), [
      "grpc.health.v1.Health",
      "sessionstate.v1.Reconcile",
      "sessionstate.v1.SignalLog",
      "sessionstate.v1.Upstream",
      "sessionstate.v1.Watch",
    ]);
    const methods = await curl("--list-methods", `http://${t.server.address}`);
    assert.match(methods.stdout, /^sessionstate\.v1\.Reconcile\/SessionStatus$/m);
    assert.match(methods.stdout, /^sessionstate\.v1\.Watch\/SubscribeStaleNotices$/m);
  });

  test("calls SessionStatus and Health/Check with JSON", async () => {
    await t.signalLog.append(goal("agent:main:main"));
    const { stdout } = await curl(
      `http://${t.server.address}/sessionstate.v1.Reconcile/SessionStatus`,
      "-d",
      '{"session":{"key":"agent:main:main"},"changesSince":"0"}',
    );
    const body = JSON.parse(stdout) as { stateVersion: string; stateChanges: { events: { kind: string; summary: string }[] } };
    assert.equal(body.stateVersion, "1");
    assert.deepEqual(
      body.stateChanges.events.map((e) => [e.kind, e.summary]),
      [["EVENT_KIND_GOAL_CHANGED", "goal updated"]],
    );
    const health = await curl(`http://${t.server.address}/grpc.health.v1.Health/Check`, "-d", "{}");
    assert.deepEqual(JSON.parse(health.stdout), { status: "SERVING" });
  });

  test("an error status carries the service's message and code", async () => {
    const failed = await curl(
      `http://${t.server.address}/sessionstate.v1.Reconcile/SessionStatus`,
      "-d",
      '{"session":{"key":"agent:main:main"},"changesSince":"-1"}',
    ).then(
      () => assert.fail("expected a failure"),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(failed.code, 3 * 8, "buf curl exits with the gRPC code times 8");
    assert.match(failed.stderr, /changes_since: must not be negative/);
  });
});
