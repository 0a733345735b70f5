import {
  humanVerdict,
  injectedRow,
  isRecord,
  isSyntheticText,
  otherRow,
  type RowClassifier,
  type RowContext,
  type RowVerdict,
  textFromContent,
  timestampFromCandidates,
  toolRow,
} from "./transcript-rows.js";

/** The oldest session file version the monitor reads: the tree format with `custom` messages (SPEC §12.4). */
export const minimumPiSessionVersion = 3;

/** Message roles a person never types: the agent's, tools' and the CLI's own (shell output, extension and summary messages). */
const toolRoles = new Set(["toolResult", "bashExecution"]);
const injectedRoles = new Set(["custom", "hookMessage", "branchSummary", "compactionSummary"]);
/** Entries that are not messages but summaries or injected context the model reads. */
const injectedEntries = new Set(["compaction", "branch_summary", "custom_message"]);

/** A Pi message's time: the entry's ISO timestamp, else the message's ms timestamp. */
function timeFromRow(row: Record<string, unknown>, message: Record<string, unknown>): number | undefined {
  const fromRow = timestampFromCandidates(row.timestamp);
  if (fromRow !== undefined) return fromRow;
  return typeof message.timestamp === "number" && Number.isFinite(message.timestamp) ? message.timestamp : undefined;
}

/**
 * Pi coding-agent sessions (catalog `pi`, `~/.pi/agent/sessions/<cwd>/*.jsonl`), by the rules of SPEC §12.4:
 * the first row is the header `{"type":"session","version":3,...}` (a file of an older version is declined
 * at adoption); a human turn is a `message` entry whose message has role `user`, with text, images or
 * both. Every other entry is not: the agent's messages, tool results, shell commands run with `!`
 * (`bashExecution`), extension and summary messages, compaction and branch summaries, model and thinking
 * changes, labels and session info.
 */
export const piClassifier: RowClassifier = {
  readsFirstRow: false,
  declineReason(firstRow: unknown): string | undefined {
    if (!isRecord(firstRow) || firstRow.type !== "session") return 'the file does not start with a Pi session header ({"type":"session",...})';
    const version = firstRow.version;
    if (typeof version !== "number" || !Number.isInteger(version) || version < minimumPiSessionVersion) {
      return `the Pi session file is version ${typeof version === "number" ? version : 1}; version ${minimumPiSessionVersion} or later is read (open it once in a current pi to upgrade it)`;
    }
    return undefined;
  },
  classify(row: unknown, { syntheticPrefixes }: RowContext): RowVerdict {
    if (!isRecord(row)) return otherRow;
    if (row.type !== "message") return typeof row.type === "string" && injectedEntries.has(row.type) ? injectedRow : otherRow;
    const message = row.message;
    if (!isRecord(message) || typeof message.role !== "string") return otherRow;
    if (message.role === "user") {
      // Text blocks, image blocks, or both: a prompt of images alone is still a person's prompt.
      const text = textFromContent(message.content, ["text"]) ?? { text: "", cut: false };
      // A gateway's relay (a configured synthetic prefix) is injected, as in every catalog.
      if (text.text.trim() !== "" && isSyntheticText(text.text, syntheticPrefixes)) return injectedRow;
      return humanVerdict(text, timeFromRow(row, message));
    }
    if (toolRoles.has(message.role)) return toolRow;
    if (injectedRoles.has(message.role)) return injectedRow;
    return otherRow;
  },
};
