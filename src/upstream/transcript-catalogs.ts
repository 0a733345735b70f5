import { claudeClassifier } from "./claude-classifier.js";
import { codexClassifier } from "./codex-classifier.js";
import { piClassifier } from "./pi-classifier.js";
import { JsonSkimmer, type SkimResult } from "./json-skim.js";
import { readCompleteLines, type LineSink, type LongLineSink } from "./transcript-reader.js";
import { otherRow, type RowClassifier, type RowContext, type RowVerdict } from "./transcript-rows.js";

/**
 * The catalogs whose local transcripts the monitor can read, each with its classifier (SPEC §8.1).
 * `claude-code` is the name earlier versions documented for `claude`, kept as an alias.
 */
const classifiers: ReadonlyMap<string, RowClassifier> = new Map([
  ["claude", claudeClassifier],
  ["claude-code", claudeClassifier],
  ["codex", codexClassifier],
  ["pi", piClassifier],
]);

/** The catalog ids with a transcript classifier, for messages: "claude, claude-code, codex, pi". */
export const knownCatalogIds: readonly string[] = [...classifiers.keys()];

/** The classifier for a catalog's local transcripts, or undefined when there is none. */
export function classifierForCatalog(catalogId: string): RowClassifier | undefined {
  return classifiers.get(catalogId);
}

/** A parsed line: its value, or `undefined` when it is not one JSON value. */
export function parseRow(line: Buffer | string): unknown {
  try {
    return JSON.parse(typeof line === "string" ? line : line.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

/** Classifies one whole line (malformed JSON is `other`). */
export function classifyLine(classifier: RowClassifier, line: Buffer | string, context: RowContext): RowVerdict {
  const row = parseRow(line);
  return row === undefined ? otherRow : classifier.classify(row, context);
}

/** Classifies what skimming a line too long to parse whole gave (an unreadable line is `other`). */
export function classifySkimmed(classifier: RowClassifier, skimmed: SkimResult, context: RowContext): RowVerdict {
  return "value" in skimmed ? classifier.classify(skimmed.value, context) : otherRow;
}

/** A sink for one line too long to parse whole: skims its pieces and hands the result to `done` at its end. */
export function skimmingSink(done: (skimmed: SkimResult) => void): LongLineSink {
  const skimmer = new JsonSkimmer();
  return {
    write: (piece) => skimmer.write(piece),
    end: async () => done(await skimmer.end()),
  };
}

/** The first row of a transcript, parsed (a line too long to keep whole is skimmed); `undefined` when unreadable. */
export async function readFirstRow(path: string, maxLineBytes: number): Promise<unknown> {
  let firstRow: unknown;
  const sink: LineSink = {
    line: (bytes) => {
      firstRow = parseRow(bytes);
    },
    longLine: () =>
      skimmingSink((skimmed) => {
        firstRow = "value" in skimmed ? skimmed.value : undefined;
      }),
  };
  await readCompleteLines(path, 0, maxLineBytes, sink, 1);
  return firstRow;
}
