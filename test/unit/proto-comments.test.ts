/**
 * The .proto comments are the API's documentation (they reach the generated code and `buf curl`'s users):
 * every document they point at is in the repository, and none cites the spec's section numbers, which are
 * not (issue 42).
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const root = fileURLToPath(new URL("../..", import.meta.url));
const protoDir = join(root, "proto/sessionstate/v1");

test("proto comments point at documents in the repository, never at SPEC sections", () => {
  const files = readdirSync(protoDir).filter((name) => name.endsWith(".proto"));
  assert.ok(files.length >= 5);
  const pointers = new Set<string>();
  for (const file of files) {
    const comments = readFileSync(join(protoDir, file), "utf8")
      .split("\n")
      .filter((line) => line.trim().startsWith("//"));
    for (const line of comments) {
      assert.doesNotMatch(line, /\bSPEC\b/u, `${file}: ${line.trim()}`);
      for (const [path] of line.matchAll(/\b(?:docs\/[\w./-]+\.md|README\.md)\b/gu)) pointers.add(path);
    }
  }
  assert.ok(pointers.size > 0, "the comments point at some documents");
  for (const path of pointers) assert.ok(existsSync(join(root, path)), `${path} exists`);
});
