/** The transcript classifiers of Claude Code, Codex and Pi on rows written here (real rows: transcript-corpus). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { claudeClassifier, defaultSyntheticPrefixes } from "../../src/upstream/claude-classifier.js";
import { codexClassifier } from "../../src/upstream/codex-classifier.js";
import { piClassifier } from "../../src/upstream/pi-classifier.js";
import { classifyLine } from "../../src/upstream/transcript-catalogs.js";
import { loadConfig } from "../../src/config.js";

const classifyWithPrefixes = (row: unknown, syntheticPrefixes: readonly string[]) =>
  classifyLine(claudeClassifier, typeof row === "string" ? row : JSON.stringify(row), { syntheticPrefixes });
const classify = (row: unknown) => classifyWithPrefixes(row, defaultSyntheticPrefixes);
const user = (content: unknown, extra: Record<string, unknown> = {}) => ({
  type: "user",
  message: { role: "user", content },
  timestamp: "2026-12-01T11:30:00.000Z",
  ...extra,
});
/** A prompt typed while the agent was busy: Claude Code writes it as an attachment and no user row. */
const queued = (prompt: unknown, extra: Record<string, unknown> = {}) => ({
  type: "attachment",
  attachment: { type: "queued_command", prompt, commandMode: "prompt", ...extra },
  timestamp: "2026-12-01T11:31:00.000Z",
});

describe("Claude Code transcript classifier", () => {
  test("a typed user prompt is a human turn, with its timestamp", () => {
    assert.deepEqual(classify(user("fix the build")), {
      human: true,
      text: "fix the build",
      textCut: false,
      timestampMs: Date.parse("2026-12-01T11:30:00.000Z"),
    });
    assert.deepEqual(classify(user([{ type: "text", text: "look" }, { type: "image" }])), {
      human: true,
      text: "look",
      textCut: false,
      timestampMs: Date.parse("2026-12-01T11:30:00.000Z"),
    });
    assert.deepEqual(classify(user("no time", { timestamp: "yesterday-ish" })), { human: true, text: "no time", textCut: false });
  });

  test("slash commands, bash-mode input and interruptions are a person acting on the session: human", () => {
    for (const text of [
      "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
      "<bash-input>git status</bash-input>",
      "[Request interrupted by user for tool use]",
    ]) {
      assert.deepEqual(classify(user(text)), { human: true, text, textCut: false, timestampMs: Date.parse("2026-12-01T11:30:00.000Z") }, text);
    }
    assert.deepEqual(classify(user([{ type: "text", text: "[Request interrupted by user]" }])).human, true);
  });

  test("a queued_command a person typed while the agent was busy is human: origin human, or no origin and commandMode prompt", () => {
    const at = Date.parse("2026-12-01T11:31:00.000Z");
    assert.deepEqual(classify(queued("also check the logs", { origin: { kind: "human" } })), { human: true, text: "also check the logs", textCut: false, timestampMs: at });
    assert.deepEqual(classify(queued("and convert the prices to euros")), { human: true, text: "and convert the prices to euros", textCut: false, timestampMs: at });
    assert.deepEqual(classify(queued([{ type: "text", text: "see this" }, { type: "image" }], { origin: { kind: "human" } })).human, true);
  });

  test("queued task notifications, other attachments and rows of another origin are not human", () => {
    const notHuman = [
      queued("<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>", {
        commandMode: "task-notification",
        origin: { kind: "task-notification", producer: "session-task" },
      }),
      queued("a hand-back", { commandMode: "prompt", origin: { kind: "coordinator" } }),
      queued("no mode", { commandMode: undefined }),
      queued("<bash-notification>shell b2 exited</bash-notification>"),
      { type: "attachment", attachment: { type: "deferred_tools_delta", addedNames: ["WebFetch"] } },
      { type: "attachment", attachment: { type: "queued_command", commandMode: "prompt" } },
      user("woken by a task", { origin: { kind: "task-notification" } }),
    ];
    for (const row of notHuman) assert.equal(classify(row).human, false, JSON.stringify(row));
  });

  test("a row holding a tool result is not human, even beside a text block (the deferred tool's acknowledgement)", () => {
    const row = user([
      { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "Tool loaded." }] },
      { type: "text", text: "Tool loaded." },
    ]);
    assert.deepEqual(classify(row), { human: false, rowClass: "tool" });
  });

  test("rows that are not human are classed for the monitor's counts: injected, tool or other", () => {
    const classes: [unknown, string][] = [
      [user("<task-notification>done</task-notification>"), "injected"],
      [user("hello", { isMeta: true }), "injected"],
      [user("summary", { isCompactSummary: true }), "injected"],
      [user("woken", { origin: { kind: "task-notification" } }), "injected"],
      [queued("<task-notification>x</task-notification>", { commandMode: "task-notification", origin: { kind: "task-notification" } }), "injected"],
      [user([{ type: "tool_result", tool_use_id: "t1", content: "ok" }]), "tool"],
      [{ type: "assistant", message: { role: "assistant", content: [{ type: "text", text: "hi" }] } }, "other"],
      [user("from a sidechain", { isSidechain: true }), "other"],
      [{ type: "progress", data: {} }, "other"],
      ["{not json", "other"],
    ];
    for (const [row, rowClass] of classes) assert.deepEqual(classify(row), { human: false, rowClass }, JSON.stringify(row));
  });

  test("every prefix of SPEC §8.1 marks a user row no person typed", () => {
    for (const text of [
      "<bash-stdout>ok</bash-stdout><bash-stderr></bash-stderr>",
      "<bash-stderr>fatal</bash-stderr>",
      "<bash-notification>\n<shell-id>b3</shell-id>\n</bash-notification>",
      "<task-notification>\n<task-id>t1</task-id>\n</task-notification>",
      "<agent-notification>done</agent-notification>",
      '<teammate-message teammate_id="lead">hi</teammate-message>',
      '<cross-session-message from="agent:main:other">hi</cross-session-message>',
      "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages.",
    ]) {
      assert.deepEqual(classify(user(text)), { human: false, rowClass: "injected" }, text);
    }
  });

  test("configured synthetic prefixes add to the built-in ones; they never replace them", () => {
    const config = loadConfig(["--synthetic-prefixes", '["<my-gateway-relay>"]'], {});
    assert.deepEqual(config.syntheticPrefixes, [...defaultSyntheticPrefixes, "<my-gateway-relay>"]);
    const classifyWith = (text: string) => classifyWithPrefixes(user(text), config.syntheticPrefixes).human;
    assert.equal(classifyWith("<my-gateway-relay>from telegram"), false);
    assert.equal(classifyWith("<task-notification>done</task-notification>"), false);
    assert.equal(classifyWith("a real prompt"), true);
    // A prefix must fit in the head a streamed long line keeps of each string.
    assert.throws(() => loadConfig(["--synthetic-prefixes", JSON.stringify(["x".repeat(4097)])], {}), /--synthetic-prefixes: must be a JSON array of non-empty strings of at most 4096 characters/u);
    assert.equal(loadConfig(["--synthetic-prefixes", JSON.stringify(["x".repeat(4096)])], {}).syntheticPrefixes.length, defaultSyntheticPrefixes.length + 1);
  });

  test("tool results, meta, compaction summaries, sidechains and synthetic texts are not human", () => {
    const notHuman = [
      user([{ type: "tool_result", tool_use_id: "t1", content: "ok" }]),
      user("hello", { isMeta: true }),
      user("summary of the conversation", { isCompactSummary: true }),
      user("from a sidechain", { isSidechain: true }),
      user("[Inter-session message] from agent:main:other"),
      user("  <local-command-stdout>done</local-command-stdout>"),
      user("Caveat: The messages below were generated by the user while running local commands. DO NOT respond."),
      user("<conversation-reseed>...</conversation-reseed>"),
      user("   "),
      { type: "user", message: { role: "assistant", content: "odd" } },
      { type: "assistant", message: { role: "assistant", content: [{ type: "text", text: "hi" }] } },
      { type: "summary", summary: "..." },
      { type: "system", content: "..." },
      { type: "file-history-snapshot" },
      { type: "queue-operation", operation: "enqueue", content: "typed ahead" },
      "{not json",
      "42",
      "",
    ];
    for (const row of notHuman) assert.equal(classify(row).human, false, JSON.stringify(row));
  });
});

describe("Codex transcript classifier", () => {
  const meta = (payload: Record<string, unknown> = {}) => ({ type: "session_meta", payload: { id: "s", cli_version: "0.152.1", source: "cli", ...payload } });
  const at = "2026-12-01T11:30:00.000Z";
  const codex = (row: unknown, firstRow: unknown = meta(), syntheticPrefixes = defaultSyntheticPrefixes) =>
    classifyLine(codexClassifier, JSON.stringify(row), { syntheticPrefixes, firstRow });
  const event = (payload: Record<string, unknown>) => ({ timestamp: at, type: "event_msg", payload });
  const userItem = (text: string) => ({ timestamp: at, type: "response_item", payload: { type: "message", role: "user", content: [{ type: "input_text", text }] } });

  test("a prompt is one human turn: the user_message event or the completed UserMessage item, never its role-user twin", () => {
    const human = { human: true, text: "run the tests", textCut: false, timestampMs: Date.parse(at) };
    assert.deepEqual(codex(event({ type: "user_message", message: "run the tests", images: [], local_images: [], text_elements: [] })), human);
    assert.deepEqual(codex(event({ type: "item_completed", item: { type: "UserMessage", id: "u", content: [{ type: "text", text: "run the tests", text_elements: [] }] } })), human);
    assert.deepEqual(codex(userItem("run the tests")), { human: false, rowClass: "injected" });
    // A prompt of images alone is still a person's prompt.
    assert.equal(codex(event({ type: "user_message", message: "", images: ["data:image/png;base64,AAAA"] })).human, true);
  });

  test("a shell command run with ! and an interrupted turn are a person acting; other aborts are not", () => {
    const shell = "<user_shell_command>\n<command>\ngit status\n</command>\n<result>\nExit code: 0\n</result>\n</user_shell_command>";
    assert.deepEqual(codex(userItem(shell)), { human: true, text: shell, textCut: false, timestampMs: Date.parse(at) });
    assert.deepEqual(codex(event({ type: "turn_aborted", reason: "interrupted" })), { human: true, text: "", textCut: false, timestampMs: Date.parse(at) });
    assert.deepEqual(codex(event({ type: "turn_aborted", reason: "replaced" })), { human: false, rowClass: "other" });
    assert.deepEqual(codex(event({ type: "turn_aborted", reason: "review_ended" })), { human: false, rowClass: "other" });
  });

  test("what the CLI injects is not human: context, instructions, old kinds of user_message, compaction, hook prompts", () => {
    const injected = { human: false, rowClass: "injected" };
    assert.deepEqual(codex(userItem("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")), injected);
    assert.deepEqual(codex(userItem("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>use uv</INSTRUCTIONS>")), injected);
    assert.deepEqual(codex({ type: "response_item", payload: { type: "message", role: "developer", content: [{ type: "input_text", text: "<permissions instructions>" }] } }), injected);
    assert.deepEqual(codex(event({ type: "user_message", kind: "environment_context", message: "<environment_context>..." })), injected);
    assert.deepEqual(codex(event({ type: "user_message", kind: "user_instructions", message: "<user_instructions>..." })), injected);
    assert.equal(codex(event({ type: "user_message", kind: "plain", message: "hi" })).human, true);
    assert.deepEqual(codex({ type: "compacted", payload: { message: "", replacement_history: [] } }), injected);
    assert.deepEqual(codex(event({ type: "context_compacted" })), injected);
    assert.deepEqual(codex(event({ type: "item_completed", item: { type: "HookPrompt", id: "h", fragments: [{ text: "REASON" }] } })), { human: false, rowClass: "other" });
    // A gateway's relay marked with a synthetic prefix is not a person's prompt, in codex too.
    assert.deepEqual(codex(event({ type: "user_message", message: "[Inter-session message] from agent:main:other" })), injected);
  });

  test("tool output is class tool; the agent's own rows and bookkeeping are other", () => {
    assert.deepEqual(codex({ type: "response_item", payload: { type: "function_call_output", call_id: "c", output: "ok" } }), { human: false, rowClass: "tool" });
    assert.deepEqual(codex(event({ type: "item_completed", item: { type: "CommandExecution", id: "e" } })), { human: false, rowClass: "tool" });
    assert.deepEqual(codex(event({ type: "exec_command_end", call_id: "c" })), { human: false, rowClass: "tool" });
    for (const row of [
      { type: "response_item", payload: { type: "function_call", name: "exec_command", arguments: "{}", call_id: "c" } },
      { type: "response_item", payload: { type: "message", role: "assistant", content: [{ type: "output_text", text: "done" }] } },
      { type: "response_item", payload: { type: "reasoning", summary: [] } },
      event({ type: "agent_message", message: "done" }),
      event({ type: "token_count", info: null }),
      { type: "turn_context", payload: { cwd: "/w" } },
      meta(),
      "{not json",
    ]) {
      assert.equal(codex(row).human, false, JSON.stringify(row));
    }
  });

  test("every row of a sub-agent's rollout is the sub-agent's: known from the first row (source.subagent, or thread_source)", () => {
    const prompt = event({ type: "user_message", message: "review the last commit" });
    assert.equal(codex(prompt, meta({ source: { subagent: { thread_spawn: { parent_thread_id: "p", depth: 1 } } } })).human, false);
    assert.equal(codex(prompt, meta({ source: { subagent: { other: "guardian" } }, thread_source: "guardian_review" })).human, false);
    assert.equal(codex(prompt, meta({ thread_source: "subagent" })).human, false);
    assert.equal(codex(prompt, meta({ thread_source: "user" })).human, true);
    assert.equal(codex(prompt, undefined).human, true, "an unreadable first row is not a sub-agent's");
  });
});

describe("Pi transcript classifier", () => {
  const at = "2026-12-01T11:30:00.000Z";
  const pi = (row: unknown, syntheticPrefixes = defaultSyntheticPrefixes) => classifyLine(piClassifier, JSON.stringify(row), { syntheticPrefixes });
  // Entries shaped as pi-mono's packages/coding-agent/docs/session.md describes version 3 (the corpus holds real rows).
  const entry = (message: Record<string, unknown>) => ({ type: "message", id: "a1b2c3d4", parentId: "prev1234", timestamp: at, message });

  test("a user message is a person's prompt: text, images, or both", () => {
    const human = { human: true, text: "Hello", textCut: false, timestampMs: Date.parse(at) };
    assert.deepEqual(pi(entry({ role: "user", content: "Hello" })), human);
    assert.deepEqual(pi(entry({ role: "user", content: [{ type: "text", text: "Hello" }] })), human);
    assert.deepEqual(pi(entry({ role: "user", content: [{ type: "image", data: "AAAA", mimeType: "image/png" }] })), { ...human, text: "" });
    // Without the entry's time, the message's own (ms since the epoch).
    const { timestamp: _t, ...untimed } = entry({ role: "user", content: "Hello", timestamp: 1_764_588_600_000 });
    assert.equal((pi(untimed) as { timestampMs: number }).timestampMs, 1_764_588_600_000);
  });

  test("every other entry is not: the agent, tools, shell commands, extension and summary messages, summaries and bookkeeping", () => {
    assert.deepEqual(pi(entry({ role: "assistant", content: [{ type: "text", text: "Hi!" }] })), { human: false, rowClass: "other" });
    assert.deepEqual(pi(entry({ role: "toolResult", toolCallId: "c", toolName: "bash", content: [], isError: false })), { human: false, rowClass: "tool" });
    assert.deepEqual(pi(entry({ role: "bashExecution", command: "ls", output: "", exitCode: 0 })), { human: false, rowClass: "tool" });
    for (const role of ["custom", "hookMessage", "branchSummary", "compactionSummary"]) {
      assert.deepEqual(pi(entry({ role, content: "Injected context..." })), { human: false, rowClass: "injected" }, role);
    }
    for (const type of ["compaction", "branch_summary", "custom_message"]) {
      assert.deepEqual(pi({ type, id: "x", parentId: null, timestamp: at, summary: "s", content: "c" }), { human: false, rowClass: "injected" }, type);
    }
    for (const type of ["session", "model_change", "thinking_level_change", "custom", "label", "session_info"]) {
      assert.deepEqual(pi({ type, id: "x", parentId: null, timestamp: at }), { human: false, rowClass: "other" }, type);
    }
    assert.deepEqual(pi("not json" as unknown), { human: false, rowClass: "other" });
  });

  test("a configured synthetic prefix makes a user message injected, as in every catalog", () => {
    assert.deepEqual(pi(entry({ role: "user", content: "[Inter-session message] hi" })), { human: false, rowClass: "injected" });
    assert.deepEqual(pi(entry({ role: "user", content: "<relay> hi" }), [...defaultSyntheticPrefixes, "<relay>"]), { human: false, rowClass: "injected" });
  });

  test("the header decides whether a file is read: version 3 or later", () => {
    assert.equal(piClassifier.declineReason!({ type: "session", version: 3, id: "u", cwd: "/w" }), undefined);
    assert.equal(piClassifier.declineReason!({ type: "session", version: 4 }), undefined);
    assert.match(piClassifier.declineReason!({ type: "session", version: 2 })!, /version 2; version 3 or later/u);
    assert.match(piClassifier.declineReason!({ type: "session" })!, /version 1/u);
    assert.match(piClassifier.declineReason!(undefined)!, /does not start with a Pi session header/u);
  });
});
