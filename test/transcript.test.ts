import assert from "node:assert/strict";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { claudeClassifier, defaultSyntheticPrefixes } from "../src/upstream/claude-classifier.js";
import { codexClassifier } from "../src/upstream/codex-classifier.js";
import { piClassifier } from "../src/upstream/pi-classifier.js";
import { classifyLine } from "../src/upstream/transcript-catalogs.js";
import { type LineSink, readCompleteLines } from "../src/upstream/transcript-reader.js";
import { normalizeUserText, SessionActivity } from "../src/upstream/session-activity.js";
import { loadConfig } from "../src/config.js";
import { FakeClock, openTestStore, tempDir } from "./support/helpers.js";

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

describe("transcript reader", () => {
  /** A sink that collects whole lines, and long lines as the pieces they were streamed in. */
  const collector = () => {
    const lines: string[] = [];
    const long: { pieces: number; text: string; ended: boolean }[] = [];
    const sink: LineSink = {
      line: (bytes) => lines.push(bytes.toString()),
      longLine: () => {
        const entry = { pieces: 0, text: "", ended: false };
        long.push(entry);
        return {
          write: async (piece) => {
            entry.pieces++;
            entry.text += piece.toString();
          },
          end: async () => {
            entry.ended = true;
          },
        };
      },
    };
    return { lines, long, sink };
  };

  test("reads complete lines only, in order, and leaves a partial line for later", async () => {
    const dir = tempDir();
    try {
      const path = join(dir.dir, "t.jsonl");
      writeFileSync(path, "one\ntwo\nthr");
      const { lines, sink } = collector();
      const first = await readCompleteLines(path, 0, 1024, sink);
      assert.deepEqual(lines, ["one", "two"]);
      assert.deepEqual(first, { endOffset: 8 });
      appendFileSync(path, "ee\n");
      const second = await readCompleteLines(path, first.endOffset, 1024, sink);
      assert.deepEqual(lines, ["one", "two", "three"]);
      assert.deepEqual(second, { endOffset: 14 });
      assert.deepEqual(await readCompleteLines(path, 0, 1024, collector().sink, 1), { endOffset: 4 }, "maxLines stops after the first line");
    } finally {
      dir.remove();
    }
  });

  test("lines spanning many chunks are whole; a line over the limit streams in pieces, and reading goes on after it", async () => {
    const dir = tempDir();
    try {
      const path = join(dir.dir, "big.jsonl");
      const long = "a".repeat(200_000);
      const over = "b".repeat(300_001);
      writeFileSync(path, `x\n${long}\n${over}\nafter\n`);
      const { lines, long: streamed, sink } = collector();
      const read = await readCompleteLines(path, 0, 300_000, sink);
      assert.deepEqual(lines.map((line) => line.length), [1, 200_000, 5]);
      assert.equal(streamed.length, 1);
      assert.equal(streamed[0]!.text, over, "every byte of the long line, in order");
      assert.ok(streamed[0]!.pieces >= 5, `streamed in ${streamed[0]!.pieces} pieces`);
      assert.equal(streamed[0]!.ended, true);
      assert.deepEqual(read, { endOffset: 2 + 200_001 + 300_002 + 6 });
      const exact = collector();
      await readCompleteLines(path, 0, 300_001, exact.sink);
      assert.deepEqual(exact.lines.map((line) => line.length), [1, 200_000, 300_001, 5]);
      assert.equal(exact.long.length, 0);
    } finally {
      dir.remove();
    }
  });

  test("a long line still being written (no newline yet) waits: the offset stays at its start", async () => {
    const dir = tempDir();
    try {
      const path = join(dir.dir, "growing.jsonl");
      writeFileSync(path, `x\n${"c".repeat(5000)}`);
      const { lines, long, sink } = collector();
      assert.deepEqual(await readCompleteLines(path, 0, 1024, sink), { endOffset: 2, longLineWaitingAt: 2 });
      assert.deepEqual(lines, ["x"]);
      assert.equal(long[0]!.ended, false, "never ended: it is not complete");
      appendFileSync(path, "\n");
      const again = collector();
      assert.deepEqual(await readCompleteLines(path, 2, 1024, again.sink), { endOffset: 5003 });
      assert.equal(again.long[0]!.text.length, 5000);
    } finally {
      dir.remove();
    }
  });
});

describe("what gateways report for the monitor, kept in the store", () => {
  const withActivity = async (body: (activity: SessionActivity, clock: FakeClock, reopen: () => Promise<SessionActivity>) => Promise<void>) => {
    const dir = tempDir();
    const path = join(dir.dir, "activity.db");
    const clock = new FakeClock();
    let store = openTestStore(path);
    try {
      await body(new SessionActivity(store, clock), clock, async () => {
        await store.close();
        store = openTestStore(path);
        return new SessionActivity(store, clock);
      });
    } finally {
      await store.close();
      dir.remove();
    }
  };
  const session = { namespace: "default", agentId: "main", key: "agent:main:main" };

  test("keeps the 10 most recent own texts, compared normalised and case-sensitively, per session", () =>
    withActivity(async (activity) => {
      assert.equal(normalizeUserText("  hello \n\t world  "), "hello world");
      await activity.recordOwnText(session, "Deploy  the\nservice");
      let isEcho = await activity.ownEchoTest(session);
      assert.equal(isEcho(" Deploy the service "), true);
      assert.equal(isEcho("deploy the service"), false);
      assert.equal((await activity.ownEchoTest({ namespace: "default", agentId: "ops", key: "agent:main:main" }))("Deploy the service"), false);
      for (let i = 0; i < 10; i++) await activity.recordOwnText(session, `text ${i}`);
      isEcho = await activity.ownEchoTest(session);
      assert.equal(isEcho("Deploy the service"), false, "the 11th most recent is forgotten");
      assert.equal(isEcho("text 0"), true);
      assert.equal(isEcho("text 9"), true);
    }));

  test("deleting a session forgets its run flag and own texts", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "delete.db"));
    try {
      const activity = new SessionActivity(store, new FakeClock());
      await activity.setRunActive(session, true);
      await activity.recordOwnText(session, "hello");
      await store.deleteSession(session);
      assert.deepEqual(await activity.runState(session), { active: false, starts: 0 });
      assert.equal((await activity.ownEchoTest(session))("hello"), false);
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("a run flag counts runs started, survives a restart, and expires 6 hours after its last report", () =>
    withActivity(async (activity, clock, reopen) => {
      assert.deepEqual(await activity.runState(session), { active: false, starts: 0 });
      await activity.setRunActive(session, true);
      await activity.recordOwnText(session, "hello");
      assert.deepEqual(await activity.runState(session), { active: true, starts: 1 });
      const again = await reopen();
      assert.deepEqual(await again.runState(session), { active: true, starts: 1 }, "a restart keeps the flag");
      assert.equal((await again.ownEchoTest(session))("hello"), true, "and the own texts");
      clock.advance(6 * 60 * 60 * 1000 - 1);
      assert.deepEqual(await again.runState(session), { active: true, starts: 1 });
      clock.advance(1);
      assert.deepEqual(await again.runState(session), { active: false, starts: 1 }, "a crashed gateway's flag expires");
      await again.setRunActive(session, true);
      assert.deepEqual(await again.runState(session), { active: true, starts: 2 }, "a refresh counts again");
      await again.setRunActive(session, false);
      assert.deepEqual(await again.runState(session), { active: false, starts: 2 });
    }));
});
