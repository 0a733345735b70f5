/**
 * A 100 MiB transcript line (a pasted screenshot) is classified by streaming: the prompt beside the
 * image is one human turn, the marker moves past the line, and the scan's peak memory stays far below
 * the line's size. Runs the scan in a process of its own (test/probes/long-line-probe.ts) to measure it.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { runProgram } from "../support/process-helpers.js";

const probe = fileURLToPath(new URL("../probes/long-line-probe.ts", import.meta.url));

interface ProbeResult {
  lineBytes: number;
  eventsRecorded: number;
  linksHeld: number;
  marker: string;
  kinds: number[];
  peakBeforeKiB: number;
  peakAfterKiB: number;
}

async function runProbe(lineMiB: number): Promise<ProbeResult & { growthMiB: number }> {
  const { stdout } = await runProgram(process.execPath, ["--import", "tsx", probe], process.cwd(), {
    SESSIONSTATE_TEST_BACKEND: "sqlite",
    PROBE_LINE_MIB: String(lineMiB),
  });
  // The helpers load node:test, which prints its summary too: the result is the line that is JSON.
  const result = JSON.parse(stdout.split("\n").find((line) => line.startsWith("{"))!) as ProbeResult;
  return { ...result, growthMiB: (result.peakAfterKiB - result.peakBeforeKiB) / 1024 };
}

test("a 100 MiB line: one human turn, the marker past it, and a peak RSS that does not grow with the line", async (t) => {
  const result = await runProbe(100);
  assert.ok(result.lineBytes >= 100 * 1024 * 1024, `${result.lineBytes} bytes`);
  assert.equal(result.eventsRecorded, 1);
  assert.equal(result.linksHeld, 0);
  assert.equal(result.marker, String(result.lineBytes), "the marker moves past the line");
  assert.deepEqual(result.kinds, [EventKind.ADOPTED, EventKind.HUMAN_DIRECT_MESSAGE]);
  // The same scan over a line five times shorter: what the scan costs besides the line's length.
  const small = await runProbe(20);
  assert.equal(small.eventsRecorded, 1);
  t.diagnostic(
    `peak RSS grew by ${result.growthMiB.toFixed(1)} MiB scanning a 100 MiB line (to ${(result.peakAfterKiB / 1024).toFixed(0)} MiB), ` +
      `by ${small.growthMiB.toFixed(1)} MiB for a 20 MiB line`,
  );
  // Parsed whole, the longer line alone would take 100 MiB of bytes and 200 MiB as a string.
  assert.ok(result.growthMiB < 96, `peak RSS grew by ${result.growthMiB.toFixed(1)} MiB`);
  // Read whole, the longer line would cost at least its 80 MiB more of bytes over the shorter one's; a scan
  // that streams costs about the same for both, give or take when the collector runs (Node 20 here: 41-45
  // against 36-37 MiB; Node 24: 30-59 against 30-39, once 58.9 against 32.2 in CI). 48 tells them apart.
  assert.ok(result.growthMiB < small.growthMiB + 48, `${result.growthMiB.toFixed(1)} MiB for 100 MiB, ${small.growthMiB.toFixed(1)} MiB for 20 MiB`);
});
