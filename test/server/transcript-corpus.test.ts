/**
 * The transcript classifiers against real rows (test/fixtures/transcripts, where their sources are
 * named), each labelled with the verdict SPEC §8.1 gives it: row by row, and end to end through the
 * monitor and the gRPC API. One folder per catalog; a file's first row is what a classifier that reads
 * the first row sees.
 */
import assert from "node:assert/strict";
import { appendFileSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { defaultSyntheticPrefixes } from "../../src/upstream/claude-classifier.js";
import { JsonSkimmer } from "../../src/upstream/json-skim.js";
import { classifierForCatalog, classifyLine, classifySkimmed, parseRow } from "../../src/upstream/transcript-catalogs.js";
import { metricValue, scrapeMetrics, startTestServer, tempDir } from "../support/helpers.js";

interface Label {
  human: boolean;
  class: "human" | "injected" | "tool" | "other";
  rule: string;
  from: string;
  version: string | null;
}

interface CorpusFile {
  name: string;
  rows: string[];
  labels: Label[];
}

/** Every corpus file of a catalog with its rows and their labels, line for line. */
function corpus(catalogId: string): CorpusFile[] {
  const dir = fileURLToPath(new URL(`../fixtures/transcripts/${catalogId}/`, import.meta.url));
  return readdirSync(dir)
    .filter((name) => name.endsWith(".jsonl") && !name.endsWith(".labels.jsonl"))
    .map((name) => {
      const lines = (file: string) => readFileSync(join(dir, file), "utf8").split("\n").filter((line) => line !== "");
      const rows = lines(name);
      const labels = lines(name.replace(/\.jsonl$/u, ".labels.jsonl")).map((line) => JSON.parse(line) as Label);
      assert.equal(labels.length, rows.length, `${name}: one label per row`);
      return { name, rows, labels };
    });
}

function checkEveryRow(catalogId: string, files: CorpusFile[]): { rows: number; humans: number } {
  const classifier = classifierForCatalog(catalogId)!;
  let rows = 0;
  let humans = 0;
  for (const file of files) {
    const context = { syntheticPrefixes: defaultSyntheticPrefixes, firstRow: parseRow(file.rows[0]!) };
    file.rows.forEach((row, i) => {
      const label = file.labels[i]!;
      const verdict = classifyLine(classifier, row, context);
      assert.equal(verdict.human ? "human" : verdict.rowClass, label.class, `${file.name} line ${i + 1} (${label.from}, ${label.rule})`);
      assert.equal(verdict.human, label.human);
      rows++;
      if (label.human) humans++;
    });
  }
  return { rows, humans };
}

/**
 * Adopts a transcript under the catalog (empty, or holding the file's first `preamble` rows: a header the
 * catalog checks at adoption), appends the other rows one at a time with a scan after each, and checks
 * that exactly the human rows recorded a human_direct_message, and that the metrics counted every row
 * in its labelled class.
 */
async function replayThroughTheMonitor(catalogId: string, file: CorpusFile, preamble = 0): Promise<void> {
  const root = tempDir();
  const path = join(realpathSync(root.dir), "session.jsonl");
  writeFileSync(path, file.rows.slice(0, preamble).map((row) => `${row}\n`).join(""));
  const t = await startTestServer({
    transcriptRoot: realpathSync(root.dir),
    monitorIntervalMs: 86_400_000,
    metricsListen: { host: "127.0.0.1", port: 0 },
  });
  try {
    const key = "agent:main:adopted";
    await t.upstream.adopt({ session: { key }, catalogId, hostId: "h", source: { case: "localTranscript", value: { path } } });
    await t.watch.watch({ watcherSessionKey: "agent:main:main", target: { key } });
    let expected = 0;
    for (const [i, row] of file.rows.entries()) {
      if (i < preamble) continue;
      appendFileSync(path, `${row}\n`);
      const scan = await t.upstream.scanNow({});
      const label = file.labels[i]!;
      if (label.human) expected++;
      assert.equal(scan.eventsRecorded, label.human ? 1 : 0, `${file.name} line ${i + 1} (${label.from}, ${label.rule})`);
    }
    const events = (await t.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events;
    const human = events.filter((e) => e.kind === EventKind.HUMAN_DIRECT_MESSAGE);
    assert.equal(human.length, expected);
    assert.equal(expected, file.labels.filter((l) => l.human).length);
    for (const event of human) assert.equal(event.summary, `human message via ${catalogId}`);
    // The metrics say what the monitor counted, by class, exactly as labelled.
    const metrics = await scrapeMetrics(t.server.metricsPort);
    for (const rowClass of ["human", "injected", "tool", "other"]) {
      const counted = metricValue(metrics, `sessionstate_monitor_rows_total{class="${rowClass}"}`, 0);
      assert.equal(counted, file.labels.slice(preamble).filter((l) => l.class === rowClass).length, `rows of class ${rowClass}`);
    }
  } finally {
    await t.dispose();
    root.remove();
  }
}

/**
 * Every real row, streamed through the skimmer that reads lines too long to parse whole (in pieces of
 * 7 bytes, and with limits small enough that strings past 64 characters keep only their heads, 128
 * characters, longer than any built-in prefix), gets the verdict a
 * whole parse gives: the same human turns, the same classes, the same texts unless cut.
 */
async function checkSkimmedVerdicts(catalogId: string): Promise<number> {
  const classifier = classifierForCatalog(catalogId)!;
  let checked = 0;
  for (const file of corpus(catalogId)) {
    const context = { syntheticPrefixes: defaultSyntheticPrefixes, firstRow: parseRow(file.rows[0]!) };
    for (const [i, row] of file.rows.entries()) {
      const skimmer = new JsonSkimmer({ keepChars: 64, headChars: 128, lineChars: 4096, maxValues: 100_000, keepDepth: 8 });
      const bytes = Buffer.from(row);
      for (let at = 0; at < bytes.length; at += 7) await skimmer.write(bytes.subarray(at, at + 7));
      const skimmed = classifySkimmed(classifier, await skimmer.end(), context);
      const whole = classifyLine(classifier, row, context);
      const where = `${file.name} line ${i + 1}`;
      assert.equal(skimmed.human, whole.human, where);
      if (!skimmed.human && !whole.human) assert.equal(skimmed.rowClass, whole.rowClass, where);
      if (skimmed.human && whole.human) {
        assert.equal(skimmed.timestampMs, whole.timestampMs, where);
        if (!skimmed.textCut) assert.equal(skimmed.text, whole.text, where);
        else assert.ok(whole.text.trimStart().startsWith(skimmed.text.trimStart().slice(0, 128)), where);
      }
      checked++;
    }
  }
  return checked;
}

describe("the Claude Code classifier on real rows", () => {
  test("every row of the corpus gets the verdict its label gives", () => {
    const { rows, humans } = checkEveryRow("claude", corpus("claude"));
    // The corpus is real: its size is part of what this test claims.
    assert.ok(rows >= 60 && humans >= 20, `${rows} rows, ${humans} human`);
  });

  test("streamed through the skimmer of long lines, every row gets the verdict of a whole parse", async () => {
    assert.equal(await checkSkimmedVerdicts("claude"), corpus("claude").reduce((n, f) => n + f.rows.length, 0));
  });

  test("end to end: rows appended one at a time to an adopted transcript record exactly the human ones", () =>
    replayThroughTheMonitor("claude", corpus("claude").find((c) => c.name === "spotter-2.1.jsonl")!));
});

describe("the Codex classifier on real rows", () => {
  test("every row of the corpus gets the verdict its label gives", () => {
    const { rows, humans } = checkEveryRow("codex", corpus("codex"));
    assert.ok(rows >= 150 && humans >= 7, `${rows} rows, ${humans} human`);
  });

  test("streamed through the skimmer of long lines, every row gets the verdict of a whole parse", async () => {
    assert.equal(await checkSkimmedVerdicts("codex"), corpus("codex").reduce((n, f) => n + f.rows.length, 0));
  });

  for (const name of ["localpush-0.104-session.jsonl", "localpush-0.104-rows.jsonl", "capy-0.125-0.152.jsonl", "capy-subagent-0.125.jsonl"]) {
    test(`end to end (${name}): rows appended one at a time record exactly the human ones`, () =>
      replayThroughTheMonitor("codex", corpus("codex").find((c) => c.name === name)!));
  }
});

describe("the Pi classifier on real rows", () => {
  test("every row of the corpus gets the verdict its label gives", () => {
    const { rows, humans } = checkEveryRow("pi", corpus("pi"));
    assert.ok(rows >= 150 && humans >= 100, `${rows} rows, ${humans} human`);
  });

  test("streamed through the skimmer of long lines, every row gets the verdict of a whole parse", async () => {
    assert.equal(await checkSkimmedVerdicts("pi"), corpus("pi").reduce((n, f) => n + f.rows.length, 0));
  });

  test("end to end: a version-3 session adopted, its rows appended one at a time record exactly the human ones", () =>
    replayThroughTheMonitor("pi", corpus("pi").find((c) => c.name === "pi-mono-sessions.jsonl")!, 1));

  test("a session file older than version 3 is declined at adoption, with a reason, and never linked", async () => {
    const root = tempDir();
    const path = join(realpathSync(root.dir), "old.jsonl");
    const file = corpus("pi").find((c) => c.name === "pi-mono-sessions.jsonl")!;
    // The corpus holds the real version-1 header of before-compaction.jsonl (no version field) as a row.
    const versionOne = file.rows.find((row, i) => i > 0 && (JSON.parse(row) as { type: string }).type === "session")!;
    writeFileSync(path, `${versionOne}\n${file.rows[2]}\n`);
    const t = await startTestServer({ transcriptRoot: realpathSync(root.dir), monitorIntervalMs: 86_400_000 });
    try {
      const adopted = await t.upstream.adopt({ session: { key: "agent:main:old" }, catalogId: "pi", source: { case: "localTranscript", value: { path } } });
      assert.equal(adopted.linked, false);
      assert.match(adopted.reason, /version 1; version 3 or later is read/u);
      writeFileSync(path, "not a header\n");
      const notPi = await t.upstream.adopt({ session: { key: "agent:main:old" }, catalogId: "pi", source: { case: "localTranscript", value: { path } } });
      assert.match(notPi.reason, /does not start with a Pi session header/u);
      assert.deepEqual((await t.upstream.listUpstreamLinks({})).links, []);
    } finally {
      await t.dispose();
      root.remove();
    }
  });
});
