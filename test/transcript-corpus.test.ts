/**
 * The Claude Code classifier against real transcript rows (test/fixtures/transcripts, where their
 * sources are named), each labelled with the verdict SPEC §8.1 gives it: row by row, and end to end
 * through the monitor and the gRPC API.
 */
import assert from "node:assert/strict";
import { appendFileSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { EventKind } from "../gen/sessionstate/v1/types_pb.js";
import { claudeClassifier, defaultSyntheticPrefixes } from "../src/upstream/claude-classifier.js";
import { classifyLine } from "../src/upstream/transcript-catalogs.js";
import { startTestServer, tempDir } from "./helpers.js";

interface Label {
  human: boolean;
  class: "human" | "injected" | "tool" | "other";
  rule: string;
  from: string;
  version: string | null;
}

const corpusDir = fileURLToPath(new URL("./fixtures/transcripts/claude/", import.meta.url));

/** Every corpus file with its rows and their labels, line for line. */
function corpus(): { name: string; rows: string[]; labels: Label[] }[] {
  return readdirSync(corpusDir)
    .filter((name) => name.endsWith(".jsonl") && !name.endsWith(".labels.jsonl"))
    .map((name) => {
      const lines = (file: string) => readFileSync(join(corpusDir, file), "utf8").split("\n").filter((line) => line !== "");
      const rows = lines(name);
      const labels = lines(name.replace(/\.jsonl$/u, ".labels.jsonl")).map((line) => JSON.parse(line) as Label);
      assert.equal(labels.length, rows.length, `${name}: one label per row`);
      return { name, rows, labels };
    });
}

describe("the Claude Code classifier on real rows", () => {
  test("every row of the corpus gets the verdict its label gives", () => {
    let rows = 0;
    let humans = 0;
    for (const file of corpus()) {
      file.rows.forEach((row, i) => {
        const label = file.labels[i]!;
        const verdict = classifyLine(claudeClassifier, row, { syntheticPrefixes: defaultSyntheticPrefixes });
        assert.equal(verdict.human ? "human" : verdict.rowClass, label.class, `${file.name} line ${i + 1} (${label.from}, ${label.rule})`);
        assert.equal(verdict.human, label.human);
        rows++;
        if (label.human) humans++;
      });
    }
    // The corpus is real: its size is part of what this test claims.
    assert.ok(rows >= 60 && humans >= 20, `${rows} rows, ${humans} human`);
  });

  test("end to end: rows appended one at a time to an adopted transcript record exactly the human ones", async () => {
    const root = tempDir();
    const file = join(realpathSync(root.dir), "session.jsonl");
    writeFileSync(file, "");
    const t = await startTestServer({
      transcriptRoot: realpathSync(root.dir),
      monitorIntervalMs: 86_400_000,
      metricsListen: { host: "127.0.0.1", port: 0 },
    });
    try {
      const key = "agent:main:adopted";
      await t.upstream.adopt({ session: { key }, catalogId: "claude", hostId: "h", source: { case: "localTranscript", value: { path: file } } });
      await t.watch.watch({ watcherSessionKey: "agent:main:main", target: { key } });
      const { rows, labels } = corpus().find((c) => c.name === "spotter-2.1.jsonl")!;
      let expected = 0;
      for (const [i, row] of rows.entries()) {
        appendFileSync(file, `${row}\n`);
        const scan = await t.upstream.scanNow({});
        const human = labels[i]!.human;
        if (human) expected++;
        assert.equal(scan.eventsRecorded, human ? 1 : 0, `line ${i + 1} (${labels[i]!.from}, ${labels[i]!.rule})`);
      }
      const events = (await t.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events;
      assert.equal(events.filter((e) => e.kind === EventKind.HUMAN_DIRECT_MESSAGE).length, expected);
      assert.equal(expected, labels.filter((l) => l.human).length);
      // The metrics say what the monitor counted, by class, exactly as labelled.
      const metrics = await (await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`)).text();
      for (const rowClass of ["human", "injected", "tool", "other"]) {
        const counted = new RegExp(`sessionstate_monitor_rows_total\\{class="${rowClass}"\\} (\\d+)`).exec(metrics)?.[1] ?? "0";
        assert.equal(Number(counted), labels.filter((l) => l.class === rowClass).length, `rows of class ${rowClass}`);
      }
    } finally {
      await t.dispose();
      root.remove();
    }
  });
});
