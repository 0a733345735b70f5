import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { openTestStore, tempDir } from "../support/helpers.js";

/**
 * Statements that read a whole namespace (or table) on purpose, each with why it may. Anything else must
 * reach its rows through an index by more than the namespace: a namespace is one gateway's every session,
 * so a statement that reads all of it makes a call's cost grow with the gateway's size.
 */
const wholeReadsAllowed: ReadonlyArray<readonly [RegExp, string]> = [
  [/ FROM namespaces( WHERE events > \? ORDER BY namespace)?$/, "one row per namespace, never per event or cursor: retention's caps, the pending-notices gauge"],
  [/^SELECT \* FROM namespaces WHERE namespace > \? AND \(sessions > 0 OR watches > 0\) AND /, "ListNamespaces: one row per namespace, and the token's own list of namespaces (json_each)"],
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
      // A page of pending notices seeks to its start by all three columns of pair order, so a page costs its
      // own rows however many pending pairs a watcher has before it.
      const pendingPage = statements.find((sql) => sql.includes("INDEXED BY cursors_pending"));
      const plan = db.prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${pendingPage}`).all(...(pendingPage!.match(/\?/g) ?? []).map(() => null));
      assert.deepEqual(
        plan.map((step) => step.detail),
        ["SEARCH cursors USING INDEX cursors_pending (namespace=? AND (watcher_key,target_agent_id,target_key)>(?,?,?) AND watcher_key<?)"],
      );
      // Every page of sessions (by agent, by key prefix, most recent first; of a namespace or of one agent)
      // is read in its index's order: no sort, so a page costs its own rows however many sessions there are.
      const sessionPages = statements.filter((sql) => /FROM heads WHERE namespace = \? .* LIMIT \?$/.test(sql));
      assert.equal(sessionPages.length, 6, sessionPages.join("\n"));
      for (const sql of sessionPages) {
        const steps = db.prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`).all(...(sql.match(/\?/g) ?? []).map(() => null));
        const details = steps.map((step) => step.detail).join(" | ");
        assert.doesNotMatch(details, /TEMP B-TREE|^SCAN heads/, `${sql}\n${details}`);
        assert.match(details, /^SEARCH heads USING (COVERING )?INDEX (heads_by_key|heads_by_time|heads_of_agent_by_time|sqlite_autoindex_heads_1) \(namespace=\? AND /, `${sql}\n${details}`);
      }
    } finally {
      db.close();
    }
  } finally {
    dir.remove();
  }
});
