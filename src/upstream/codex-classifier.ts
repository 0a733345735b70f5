import {
  humanVerdict,
  injectedRow,
  isRecord,
  isSyntheticText,
  otherRow,
  type RowClassifier,
  type RowContext,
  type RowVerdict,
  startsWithAny,
  textFromValue,
  textFromContent,
  timestampFromCandidates,
  toolRow,
} from "./transcript-rows.js";

/** The wrapper of a shell command the person ran with `!`, as Codex hands it to the model. */
const userShellCommandPrefix = "<user_shell_command>";

/** Codex text blocks: `input_text` in response items, `text` in turn items. */
const textBlocks = ["input_text", "text"];

/** `event_msg` payloads that report a tool's work, and completed turn items that are tools. */
const toolEvents = new Set(["exec_command_end", "patch_apply_end", "mcp_tool_call_end", "web_search_end", "image_generation_end", "view_image_tool_call"]);
const toolItems = new Set(["CommandExecution", "McpToolCall", "FileChange", "WebSearch", "ImageGeneration", "DynamicToolCall"]);
/** Response items that are a tool's output (the calls themselves are the agent's: `other`). */
const toolOutputs = new Set(["function_call_output", "custom_tool_call_output", "tool_search_output"]);

/**
 * True when the first row says a sub-agent wrote this rollout: its `session_meta` has a `source` object
 * with a `subagent` key (newer CLIs also say `thread_source: "subagent"`). No person types into those.
 */
function isSubAgentRollout(firstRow: unknown): boolean {
  if (!isRecord(firstRow) || firstRow.type !== "session_meta" || !isRecord(firstRow.payload)) return false;
  const { source, thread_source: threadSource } = firstRow.payload;
  return (isRecord(source) && "subagent" in source) || threadSource === "subagent";
}

/**
 * A prompt the person sent: human unless its text starts with a synthetic prefix (a gateway's relay). Its
 * turn id (newer rollouts' `turn_id`) is the prompt id a Codex hook call names as its `turn_id`.
 */
function promptVerdict(text: { text: string; cut: boolean }, row: Record<string, unknown>, syntheticPrefixes: readonly string[], turnId?: unknown): RowVerdict {
  // A prompt of images alone has no text, and is still a person's prompt.
  if (text.text.trim() !== "" && isSyntheticText(text.text, syntheticPrefixes)) return injectedRow;
  return humanVerdict(text, timestampFromCandidates(row.timestamp), turnId);
}

function eventVerdict(row: Record<string, unknown>, payload: Record<string, unknown>, syntheticPrefixes: readonly string[]): RowVerdict {
  switch (payload.type) {
    case "user_message": {
      // Old CLIs also sent instructions and environment context as user_message events, marked by `kind`.
      if (payload.kind !== undefined && payload.kind !== "plain") return injectedRow;
      return promptVerdict(textFromValue(payload.message) ?? { text: "", cut: false }, row, syntheticPrefixes);
    }
    case "item_completed": {
      const item = payload.item;
      if (!isRecord(item)) return otherRow;
      if (item.type === "UserMessage") return promptVerdict(textFromContent(item.content, textBlocks) ?? { text: "", cut: false }, row, syntheticPrefixes, payload.turn_id);
      if (item.type === "ContextCompaction") return injectedRow;
      return typeof item.type === "string" && toolItems.has(item.type) ? toolRow : otherRow;
    }
    case "turn_aborted":
      // The person pressed Esc: they are acting on the session. Other reasons are the CLI's own.
      return payload.reason === "interrupted" ? humanVerdict({ text: "", cut: false }, timestampFromCandidates(row.timestamp)) : otherRow;
    case "context_compacted":
      return injectedRow;
    default:
      return typeof payload.type === "string" && toolEvents.has(payload.type) ? toolRow : otherRow;
  }
}

function responseItemVerdict(row: Record<string, unknown>, payload: Record<string, unknown>): RowVerdict {
  switch (payload.type) {
    case "message": {
      if (payload.role === "assistant") return otherRow;
      if (payload.role !== "user") return injectedRow; // developer (and system) instructions
      // A shell command the person ran with `!`: Codex writes no user_message for it.
      const text = textFromContent(payload.content, textBlocks);
      if (text !== undefined && startsWithAny(text.text, [userShellCommandPrefix])) return humanVerdict(text, timestampFromCandidates(row.timestamp));
      // The twin of a prompt (its user_message counts), environment context, instructions, skills, notifications.
      return injectedRow;
    }
    case "compaction":
    case "context_compaction":
      return injectedRow;
    default:
      return typeof payload.type === "string" && toolOutputs.has(payload.type) ? toolRow : otherRow;
  }
}

/**
 * Codex CLI rollouts (catalog `codex`, `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), by the rules of
 * SPEC §8.1: a human turn is a `user_message` event (older rollouts) or a completed `UserMessage` item
 * (newer, paginated ones), a shell command the person ran with `!`, or a turn the person interrupted.
 * Every other row is what the CLI or the agent wrote, and every row of a sub-agent's rollout (known from
 * its first row) is the sub-agent's.
 */
export const codexClassifier: RowClassifier = {
  readsFirstRow: true,
  classify(row: unknown, { syntheticPrefixes, firstRow }: RowContext): RowVerdict {
    if (!isRecord(row) || isSubAgentRollout(firstRow)) return otherRow;
    const payload = row.payload;
    switch (row.type) {
      case "event_msg":
        return isRecord(payload) ? eventVerdict(row, payload, syntheticPrefixes) : otherRow;
      case "response_item":
        return isRecord(payload) ? responseItemVerdict(row, payload) : otherRow;
      case "compacted":
        return injectedRow;
      default:
        // session_meta, turn_context, and bookkeeping rows.
        return otherRow;
    }
  },
};
