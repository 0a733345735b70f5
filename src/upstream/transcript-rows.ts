import { LongText } from "./json-skim.js";

/**
 * The class of a row that is not a human turn, for the monitor's counts: `injected`, written as a user
 * turn by the CLI or a gateway (notifications, command output, instructions, environment context, meta
 * and compaction rows, the gateway's own echo); `tool`, a tool's result; `other`, everything else (the
 * agent's own rows, system and bookkeeping rows, sub-agents' rows, malformed lines).
 */
export type NonHumanClass = "injected" | "tool" | "other";

/**
 * A transcript row's verdict. A human turn carries its text (for the own-echo test), whether that text
 * was cut while skimming an oversized line (a cut text is longer than any text a gateway records as its
 * own), its time when the row has one, and the CLI's id of the prompt when the row names one (Claude
 * Code's `promptId`: a hook call names the same id, and a scan it triggered waits for this row).
 */
export type RowVerdict =
  | { human: false; rowClass: NonHumanClass }
  | { human: true; text: string; textCut: boolean; timestampMs?: number; promptId?: string };

export const injectedRow: RowVerdict = { human: false, rowClass: "injected" };
export const toolRow: RowVerdict = { human: false, rowClass: "tool" };
export const otherRow: RowVerdict = { human: false, rowClass: "other" };

/** What a classifier knows beside the row itself. */
export interface RowContext {
  /** Text prefixes of rows no person typed: the built-in ones and the configured ones. */
  syntheticPrefixes: readonly string[];
  /** The transcript's first row, parsed, for catalogs whose classifier reads it (`undefined` if unreadable). */
  firstRow?: unknown;
}

/** Classifies one parsed row of one catalog's transcripts. */
export interface RowClassifier {
  /** True when rows cannot be classified without the transcript's first row. */
  readsFirstRow: boolean;
  classify(row: unknown, context: RowContext): RowVerdict;
  /**
   * For catalogs that read only some files: why a transcript whose first row is `firstRow` is declined at
   * adoption (`undefined`: it is read). Absent: every file is read.
   */
  declineReason?(firstRow: unknown): string | undefined;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof LongText);
}

/** A text value as classifiers read it: a string, or the head of one too long to keep (`cut`). */
export function textFromValue(value: unknown): { text: string; cut: boolean } | undefined {
  if (typeof value === "string") return { text: value, cut: false };
  if (value instanceof LongText) return { text: value.head, cut: true };
  return undefined;
}

/**
 * The text of a message's content: a string, or the text of its blocks whose `type` is one of
 * `blockTypes`, joined by newlines; undefined when it has none.
 */
export function textFromContent(content: unknown, blockTypes: readonly string[]): { text: string; cut: boolean } | undefined {
  const whole = textFromValue(content);
  if (whole !== undefined) return whole;
  if (!Array.isArray(content)) return undefined;
  const texts = content.flatMap((block) => {
    if (!isRecord(block) || typeof block.type !== "string" || !blockTypes.includes(block.type)) return [];
    const text = textFromValue(block.text);
    return text === undefined ? [] : [text];
  });
  if (texts.length === 0) return undefined;
  return { text: texts.map((t) => t.text).join("\n"), cut: texts.some((t) => t.cut) };
}

/** The first of the candidates that is a parseable time, in ms since the epoch. */
export function timestampFromCandidates(...candidates: unknown[]): number | undefined {
  for (const candidate of candidates) {
    const ms = typeof candidate === "string" ? Date.parse(candidate) : Number.NaN;
    if (Number.isFinite(ms)) return ms;
  }
  return undefined;
}

export function humanVerdict(text: { text: string; cut: boolean }, timestampMs: number | undefined, promptId?: unknown): RowVerdict {
  const verdict: RowVerdict = { human: true, text: text.text, textCut: text.cut };
  if (timestampMs !== undefined) verdict.timestampMs = timestampMs;
  if (typeof promptId === "string" && promptId !== "") verdict.promptId = promptId;
  return verdict;
}

/** True when a text starts (after leading whitespace) with one of the prefixes. */
export function startsWithAny(text: string, prefixes: readonly string[]): boolean {
  const start = text.trimStart();
  return prefixes.some((prefix) => start.startsWith(prefix));
}

/** True when a user text is empty or starts (after leading whitespace) with one of the synthetic prefixes. */
export function isSyntheticText(text: string, syntheticPrefixes: readonly string[]): boolean {
  return text.trim() === "" || startsWithAny(text, syntheticPrefixes);
}
