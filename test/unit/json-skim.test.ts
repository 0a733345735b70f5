/**
 * The skimmer that classifies transcript lines too long to parse whole: it must give what JSON.parse
 * gives (long strings aside), whatever the pieces the bytes arrive in, and keep memory bounded.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { claudeClassifier, defaultSyntheticPrefixes } from "../../src/upstream/claude-classifier.js";
import { codexClassifier } from "../../src/upstream/codex-classifier.js";
import { JsonSkimmer, LongText, type SkimLimits, defaultSkimLimits, type SkimResult } from "../../src/upstream/json-skim.js";
import { classifyLine, classifySkimmed } from "../../src/upstream/transcript-catalogs.js";

async function skim(bytes: Buffer, pieceBytes: number, limits: SkimLimits = defaultSkimLimits): Promise<SkimResult> {
  const skimmer = new JsonSkimmer(limits);
  for (let at = 0; at < bytes.length; at += pieceBytes) await skimmer.write(bytes.subarray(at, at + pieceBytes));
  return skimmer.end();
}

/** Plain objects, for comparison with JSON.parse (the skimmer builds prototype-less ones). */
function plain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof LongText) return value;
  if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  return value;
}

describe("JsonSkimmer", () => {
  const samples = [
    '{"type":"user","message":{"role":"user","content":"héllo ✓ 𝄞 wörld"},"n":-12.5e3,"ok":true,"no":false,"nil":null}',
    '{"a":[1,2,[3,[4,{"b":"c"}]]],"esc":"\\"quoted\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9 \\ud834\\udd1e","empty":{},"list":[]}',
    '  {"dup":1,"dup":2,"__proto__":{"x":1},"constructor":"c"}  ',
    '[{"type":"text","text":"a"},"b",3]',
    '"just a string"',
    "42",
  ];

  test("gives what JSON.parse gives, for bytes split anywhere (multi-byte characters too)", async () => {
    for (const sample of samples) {
      const bytes = Buffer.from(sample);
      for (const pieceBytes of [1, 2, 3, 7, 64, bytes.length]) {
        const result = await skim(bytes, pieceBytes);
        assert.ok("value" in result, `${sample} in pieces of ${pieceBytes}`);
        assert.deepEqual(plain(result.value), JSON.parse(sample), `${sample} in pieces of ${pieceBytes}`);
      }
    }
  });

  test("what JSON.parse refuses, the skimmer calls malformed", async () => {
    for (const bad of ["{", '{"a":}', '{"a":1} {"b":2}', '{"a":1}x', "", "   ", "{'a':1}", '{"a":"unterminated}', "[1,]"]) {
      assert.throws(() => JSON.parse(bad));
      assert.deepEqual(await skim(Buffer.from(bad), 3), { unreadable: "malformed" }, bad);
    }
  });

  test("a string past the limit keeps only its head, from its first character that is not whitespace, and its length", async () => {
    const limits = { ...defaultSkimLimits, keepChars: 100, headChars: 10 };
    const long = `   \n  ${"x".repeat(20)}${"y".repeat(500)}`;
    const result = await skim(Buffer.from(JSON.stringify({ short: "kept whole", long })), 16, limits);
    assert.ok("value" in result);
    const value = result.value as Record<string, unknown>;
    assert.equal(value.short, "kept whole");
    assert.deepEqual(value.long, new LongText("xxxxxxxxxx", long.length));
  });

  test("past the line's budget of kept characters, a string longer than what is left keeps only its head", async () => {
    const limits = { ...defaultSkimLimits, keepChars: 100, headChars: 4, lineChars: 150 };
    const result = await skim(Buffer.from(JSON.stringify(["a".repeat(100), "b".repeat(40), "c".repeat(20), "d"])), 5, limits);
    assert.ok("value" in result);
    assert.deepEqual(result.value, ["a".repeat(100), "b".repeat(40), new LongText("cccc", 20), "d"]);
  });

  test("containers deeper than keepDepth are passed over; too many values make the line too complex", async () => {
    const limits = { ...defaultSkimLimits, keepDepth: 2 };
    const deep = await skim(Buffer.from('{"a":{"b":{"c":"d"}},"e":"f"}'), 4, limits);
    assert.ok("value" in deep);
    assert.deepEqual(Object.keys((deep.value as { a: object }).a), ["b"]);
    assert.deepEqual(Object.keys((deep.value as { a: { b: object } }).a.b), [], "passed over, not kept");
    assert.equal((deep.value as { e: string }).e, "f");
    assert.deepEqual(await skim(Buffer.from(JSON.stringify(Array(50).fill(1))), 8, { ...defaultSkimLimits, maxValues: 20 }), { unreadable: "too-complex" });
  });

  test("classifying a skimmed line gives the verdict of a whole parse", async () => {
    const image = "QUJD".repeat(300_000); // 1.2 MB of base64 beside the typed text
    const rows = [
      { type: "user", message: { role: "user", content: [{ type: "image", source: { type: "base64", data: image } }, { type: "text", text: "what is this?" }] }, timestamp: "2026-12-01T10:00:00Z" },
      { type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: image }] } },
      { type: "user", message: { role: "user", content: `<bash-stdout>${image}</bash-stdout>` } },
      { type: "assistant", message: { role: "assistant", content: [{ type: "text", text: image }] } },
    ];
    for (const row of rows) {
      const line = JSON.stringify(row);
      const whole = classifyLine(claudeClassifier, line, { syntheticPrefixes: defaultSyntheticPrefixes });
      const skimmed = classifySkimmed(claudeClassifier, await skim(Buffer.from(line), 65_536), { syntheticPrefixes: defaultSyntheticPrefixes });
      assert.deepEqual(skimmed, whole, line.slice(0, 80));
    }
    // A typed text longer than the limit: the same verdict, marked as cut (so never taken for an own echo).
    const longPrompt = JSON.stringify({ type: "event_msg", payload: { type: "user_message", message: `fix this:\n${image}` } });
    const verdict = classifySkimmed(codexClassifier, await skim(Buffer.from(longPrompt), 65_536), { syntheticPrefixes: defaultSyntheticPrefixes });
    assert.equal(verdict.human, true);
    assert.equal(verdict.human && verdict.textCut, true);
    assert.equal(verdict.human && verdict.text, `fix this:\n${image}`.slice(0, defaultSkimLimits.headChars));
  });
});
