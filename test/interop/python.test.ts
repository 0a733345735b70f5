import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startTestServer, type TestServer } from "../support/helpers.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../..", import.meta.url));
// Debian's interpreter has python3-grpcio; another python3 first on PATH may not.
const python = "/usr/bin/python3";

describe("a Python client on the raw generated stubs (Debian python3-grpcio; the stubs of clients/python)", () => {
  let t: TestServer;
  before(async () => {
    assert.ok(existsSync(python), `${python} is missing: apt-get install python3-grpcio python3-protobuf`);
    t = await startTestServer();
  });
  after(async () => {
    await t?.dispose();
  });

  test("appends an event and reads it back; bad input is INVALID_ARGUMENT naming the field", async () => {
    const { stdout } = await run(python, [join(root, "test/interop/python_client.py"), t.server.address], {
      env: { ...process.env, PYTHONPATH: join(root, "clients/python") },
      timeout: 60_000,
    });
    assert.deepEqual(JSON.parse(stdout), {
      sequence: 1,
      agent_id: "py",
      state_version: 1,
      has_state_changes: true,
      events: 1,
      kind: "EVENT_KIND_RUN_FAILED",
      outcome: "RUN_OUTCOME_TIMEOUT",
      summary: "worker run timed out (from Python)",
      refused: { code: "INVALID_ARGUMENT", details: "kind: must be a known EventKind other than UNSPECIFIED (got 0)" },
    });
    const fromNode = await t.reconcile.sessionStatus({ session: { key: "agent:py:worker" } });
    assert.equal(fromNode.stateVersion, 1n);
  });
});
