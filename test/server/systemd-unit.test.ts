/**
 * The systemd unit docs/operations.md gives (issue 42) is one systemd takes as written: `systemd-analyze
 * verify` accepts it without a word (it warns, and still exits 0, on a setting it cannot parse), with its
 * ExecStart pointed at this checkout's launcher. And it says what the graceful stop needs.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { tempDir } from "../support/helpers.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const haveSystemd = spawnSync("systemd-analyze", ["--version"]).status === 0;

/** The ```ini block of docs/operations.md. */
function documentedUnit(): string {
  const docs = readFileSync(join(root, "docs/operations.md"), "utf8");
  const match = /^```ini\n([\s\S]*?)^```$/mu.exec(docs);
  assert.ok(match !== null, "docs/operations.md has a ```ini block");
  return match[1]!;
}

test("the documented unit runs sessionstate serve directly, restarts on failure and leaves the stop its time", () => {
  const unit = documentedUnit();
  assert.match(unit, /^ExecStart=\/usr\/local\/bin\/sessionstate serve /mu);
  assert.doesNotMatch(unit, /npm/u);
  assert.match(unit, /^Restart=on-failure$/mu);
  assert.match(unit, /^KillSignal=SIGTERM$/mu);
  const stopSeconds = Number(/^TimeoutStopSec=(\d+)$/mu.exec(unit)?.[1]);
  assert.ok(stopSeconds > 5, "above the graceful stop's 5 s");
});

test("systemd-analyze verify takes the documented unit without a warning", { skip: haveSystemd ? false : "systemd-analyze is not installed (Debian's systemd package)" }, () => {
  const dir = tempDir();
  try {
    const file = join(dir.dir, "sessionstate.service");
    writeFileSync(file, documentedUnit().replace("/usr/local/bin/sessionstate", join(root, "bin/sessionstate.js")));
    const verified = spawnSync("systemd-analyze", ["verify", "--man=no", file], { encoding: "utf8" });
    assert.deepEqual({ status: verified.status, stderr: verified.stderr, stdout: verified.stdout }, { status: 0, stderr: "", stdout: "" });
  } finally {
    dir.remove();
  }
});
