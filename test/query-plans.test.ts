import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { openTestStore, tempDir } from "./support/helpers.js";

/**
 * Statements that read a whole namespace (or table) on purpose, each with why it may. Anything else must
 * reach its rows through an index by more than the namespace: a namespace is one gateway's every session,
 * so a statement that reads all of it makes a call's cost grow with the gateway's size.
 */
const wholeReadsAllowed: ReadonlyArray<readonly [RegExp, string]> = [
  [/^SELECT count\(\*\) AS n FROM cursors WHERE notified > acked$/, "the pending-notices gauge, at scrape time, through the partial index"],
  [/^SELECT namespace, count\(\*\) AS n FROM events GROUP BY namespace$/, "retention, once per run"],
  [/FROM sqlite_sequence WHERE name = 'events'/, "the sequence counter: one row per AUTOINCREMENT table"],
  [/^SELECT \* FROM upstream_links AS l WHERE (namespace = \? AND )?EXISTS/, "the monitor's tick lists every watched link"],
  [/^SELECT sequence, session_id FROM events WHERE namespace = \? ORDER BY sequence LIMIT \?$/, "retention: a namespace's oldest events, in index order, LIMIT"],
  [/ WHERE namespace = \? AND (provenance GLOB \? AND )?\([a-z_, ]+\) > \([?, ]+\) ORDER BY [a-z_, ]+ LIMIT \?$/, "listing a namespace's sessions, links or watches: a page in key order"],
];

/**
 * A plan step that reads a whole table, or a namespace's whole range of an index: `(namespace=?)` and
 * nothing more, or that and a keyset page (`(namespace=? AND (a,b)>(?,?))`), which reads the namespace
 * until the page is full.
 */
function wholeRead(detail: string): boolean {
  return /^SCAN (?!CONSTANT ROW|\(subquery)/.test(detail) || /\(namespace=\?( AND \([a-z_,]+\)>\([?,]+\))?\)$/.test(detail);
}

test("every statement the SQLite store prepares finds its rows by more than the namespace (a namespace in every key costs no scan)", async () => {
  const dir = tempDir();
  const path = join(dir.dir, "plans.db");
  try {
    await openTestStore(path).close();
    // Open again, migrated: what is prepared now is what serves calls.
    const prepared = new Set<string>();
    const prepare = Database.prototype.prepare;
    Database.prototype.prepare = function (this: Database.Database, source: string) {
      prepared.add(source.replace(/\s+/g, " ").trim());
      return prepare.call(this, source);
    } as typeof prepare;
    try {
      await openTestStore(path).close();
    } finally {
      Database.prototype.prepare = prepare;
    }
    const db = new Database(path);
    try {
      const statements = [...prepared].filter((sql) => /^(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(sql));
      assert.ok(statements.length >= 40, `only ${statements.length} statements seen: the capture is broken`);
      const offenders: string[] = [];
      for (const sql of statements) {
        const parameters = (sql.match(/\?/g) ?? []).map(() => null);
        const plan = db
          .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
          .all(...parameters)
          .map((step) => step.detail);
        if (plan.some(wholeRead) && !wholeReadsAllowed.some(([pattern]) => pattern.test(sql))) offenders.push(`${plan.join(" | ")}  <-  ${sql}`);
      }
      assert.deepEqual(offenders, []);
    } finally {
      db.close();
    }
  } finally {
    dir.remove();
  }
});
