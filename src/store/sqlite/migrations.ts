import type Database from "better-sqlite3";
import { encodeVersion2Event, type Version2EventRow } from "./migration-3-wire.js";

/** One schema step: SQL, then optionally code that fills what SQL alone cannot, in the same transaction. */
export interface Migration {
  sql: string;
  fill?: (db: Database.Database) => void;
}

/**
 * The schema, one entry per version. Entry i takes a database from `user_version` i to i + 1. Never edit
 * an entry that has shipped, nor let one call live code (migration 3 has its own frozen encoder): add a
 * new one.
 */
export const migrations: readonly Migration[] = [
  {
    sql: `
  -- One global, strictly increasing sequence that is never reused: AUTOINCREMENT keeps the highest
  -- sequence ever issued in sqlite_sequence, so deletes can never bring a sequence back.
  CREATE TABLE events (
    sequence       INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id       TEXT    NOT NULL,
    session_key    TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    actor_type     TEXT    NOT NULL,
    actor_id       TEXT,
    run_id         TEXT,
    summary        TEXT    NOT NULL,
    occurred_at_ms INTEGER NOT NULL,
    outcome        TEXT,
    channel        TEXT,
    turns          INTEGER,
    catalog_id     TEXT,
    host_id        TEXT,
    dedupe_key     TEXT UNIQUE
  );
  CREATE INDEX events_by_session ON events (agent_id, session_key, sequence);
  CREATE INDEX events_by_time ON events (occurred_at_ms);

  -- One row per session that ever had an event. Survives pruning, so the state version never goes
  -- down while the session exists; pruned_through is the prune watermark.
  CREATE TABLE heads (
    agent_id       TEXT    NOT NULL,
    session_key    TEXT    NOT NULL,
    state_version  INTEGER NOT NULL,
    pruned_through INTEGER NOT NULL DEFAULT 0,
    updated_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, session_key)
  ) WITHOUT ROWID;

  -- A watcher's position on a target: acked (L) <= notified (N) <= material (M).
  CREATE TABLE cursors (
    watcher_key     TEXT    NOT NULL,
    target_agent_id TEXT    NOT NULL,
    target_key      TEXT    NOT NULL,
    acked           INTEGER NOT NULL,
    notified        INTEGER NOT NULL,
    material        INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (watcher_key, target_agent_id, target_key),
    CHECK (acked <= notified AND notified <= material)
  ) WITHOUT ROWID;
  CREATE INDEX cursors_by_target ON cursors (target_agent_id, target_key);
  CREATE INDEX cursors_pending ON cursors (watcher_key) WHERE notified > acked;
  CREATE INDEX cursors_by_time ON cursors (updated_at_ms);
  `,
  },
  {
    sql: `
  -- One upstream link per adopted session: where it lives and how far it has been read.
  CREATE TABLE upstream_links (
    agent_id           TEXT    NOT NULL,
    session_key        TEXT    NOT NULL,
    catalog_id         TEXT    NOT NULL,
    host_id            TEXT    NOT NULL,
    thread_id          TEXT    NOT NULL,
    source             TEXT    NOT NULL,
    marker             TEXT    NOT NULL,
    missed_checks      INTEGER NOT NULL DEFAULT 0,
    last_scanned_at_ms INTEGER,
    updated_at_ms      INTEGER NOT NULL,
    PRIMARY KEY (agent_id, session_key)
  ) WITHOUT ROWID;
  `,
  },
  {
    sql: `
  -- Each event's StateEvent wire bytes, written with the event: reads embed them in responses as they are.
  ALTER TABLE events ADD COLUMN wire BLOB;
  `,
    fill: (db) => {
      const rows = db
        .prepare<[], Version2EventRow>(
          `SELECT sequence, agent_id, session_key, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
             channel, turns, catalog_id, host_id FROM events`,
        )
        .all();
      const setWire = db.prepare<[Uint8Array, number]>("UPDATE events SET wire = ? WHERE sequence = ?");
      for (const row of rows) setWire.run(encodeVersion2Event(row), row.sequence);
    },
  },
  {
    sql: `
  -- Integer session ids. Each head gets a session_id that events refer to, so the per-session index holds
  -- two integers instead of two text keys, and the dedupe index holds only events that carry a key.
  -- Tables are rebuilt (SQLite cannot change a primary key or drop a column constraint in place); the
  -- events sequence counter is carried over, so no sequence is ever issued twice.
  DROP INDEX events_by_session;
  DROP INDEX events_by_time;
  ALTER TABLE events RENAME TO events_v3;
  ALTER TABLE heads RENAME TO heads_v3;

  CREATE TABLE heads (
    session_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id       TEXT    NOT NULL,
    session_key    TEXT    NOT NULL,
    state_version  INTEGER NOT NULL,
    pruned_through INTEGER NOT NULL DEFAULT 0,
    updated_at_ms  INTEGER NOT NULL,
    UNIQUE (agent_id, session_key)
  );
  INSERT INTO heads (agent_id, session_key, state_version, pruned_through, updated_at_ms)
    SELECT agent_id, session_key, state_version, pruned_through, updated_at_ms FROM heads_v3 ORDER BY agent_id, session_key;
  -- Every event has a head by construction; should one not, it gets one rather than being lost.
  INSERT OR IGNORE INTO heads (agent_id, session_key, state_version, updated_at_ms)
    SELECT agent_id, session_key, max(sequence), max(occurred_at_ms) FROM events_v3 GROUP BY agent_id, session_key;

  CREATE TABLE events (
    sequence       INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id     INTEGER NOT NULL REFERENCES heads (session_id),
    kind           TEXT    NOT NULL,
    actor_type     TEXT    NOT NULL,
    actor_id       TEXT,
    run_id         TEXT,
    summary        TEXT    NOT NULL,
    occurred_at_ms INTEGER NOT NULL,
    outcome        TEXT,
    channel        TEXT,
    turns          INTEGER,
    catalog_id     TEXT,
    host_id        TEXT,
    dedupe_key     TEXT,
    wire           BLOB    NOT NULL
  );
  INSERT INTO sqlite_sequence (name, seq) SELECT 'events', seq FROM sqlite_sequence WHERE name = 'events_v3';
  INSERT INTO events (sequence, session_id, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
      channel, turns, catalog_id, host_id, dedupe_key, wire)
    SELECT e.sequence, h.session_id, e.kind, e.actor_type, e.actor_id, e.run_id, e.summary, e.occurred_at_ms, e.outcome,
      e.channel, e.turns, e.catalog_id, e.host_id, e.dedupe_key, e.wire
    FROM events_v3 AS e JOIN heads AS h ON h.agent_id = e.agent_id AND h.session_key = e.session_key
    ORDER BY e.sequence;
  DROP TABLE events_v3;
  DROP TABLE heads_v3;
  CREATE INDEX events_by_session ON events (session_id, sequence);
  CREATE INDEX events_by_time ON events (occurred_at_ms);
  CREATE UNIQUE INDEX events_by_dedupe_key ON events (dedupe_key) WHERE dedupe_key IS NOT NULL;
  `,
  },
  {
    sql: `
  -- What gateways report for the monitor, kept durably like the rest (SPEC §11): whether a run is active
  -- (a flag not refreshed for 6 hours no longer counts) and the recent own texts, as SHA-256 digests only.
  CREATE TABLE run_flags (
    agent_id        TEXT    NOT NULL,
    session_key     TEXT    NOT NULL,
    active          INTEGER NOT NULL,
    starts          INTEGER NOT NULL,
    refreshed_at_ms INTEGER NOT NULL,
    PRIMARY KEY (agent_id, session_key)
  ) WITHOUT ROWID;
  CREATE TABLE own_texts (
    agent_id    TEXT    NOT NULL,
    session_key TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    digest      TEXT    NOT NULL,
    PRIMARY KEY (agent_id, session_key, position)
  ) WITHOUT ROWID;
  `,
  },
  {
    sql: `
  -- Namespaces (SPEC §12.1): the namespace is part of every key of every table, so two gateways' sessions,
  -- cursors, links and reports never meet, and existing rows go to 'default'. Tables whose key changes are
  -- rebuilt (SQLite cannot change a primary key or a UNIQUE constraint in place); heads keep their
  -- session_id, so events keep pointing at them. Cursors also get their provenance (SPEC §12.2) and the
  -- extra kinds that notify their watcher (§12.3): every existing cursor is explicit, with none.
  CREATE TABLE heads_ns (
    session_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace      TEXT    NOT NULL,
    agent_id       TEXT    NOT NULL,
    session_key    TEXT    NOT NULL,
    state_version  INTEGER NOT NULL,
    pruned_through INTEGER NOT NULL DEFAULT 0,
    updated_at_ms  INTEGER NOT NULL,
    UNIQUE (namespace, agent_id, session_key)
  );
  INSERT INTO heads_ns (session_id, namespace, agent_id, session_key, state_version, pruned_through, updated_at_ms)
    SELECT session_id, 'default', agent_id, session_key, state_version, pruned_through, updated_at_ms FROM heads;
  INSERT INTO sqlite_sequence (name, seq) SELECT 'heads_ns', seq FROM sqlite_sequence WHERE name = 'heads';
  DROP TABLE heads;
  ALTER TABLE heads_ns RENAME TO heads;

  -- Dedupe keys are unique within a namespace; retention counts each namespace's events on its own.
  ALTER TABLE events ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
  DROP INDEX events_by_dedupe_key;
  CREATE UNIQUE INDEX events_by_dedupe_key ON events (namespace, dedupe_key) WHERE dedupe_key IS NOT NULL;
  CREATE INDEX events_by_namespace ON events (namespace, sequence);

  CREATE TABLE cursors_ns (
    namespace       TEXT    NOT NULL,
    watcher_key     TEXT    NOT NULL,
    target_agent_id TEXT    NOT NULL,
    target_key      TEXT    NOT NULL,
    acked           INTEGER NOT NULL,
    notified        INTEGER NOT NULL,
    material        INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    provenance      TEXT    NOT NULL DEFAULT 'explicit',
    extra_kinds     TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, watcher_key, target_agent_id, target_key),
    CHECK (acked <= notified AND notified <= material)
  ) WITHOUT ROWID;
  INSERT INTO cursors_ns (namespace, watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms)
    SELECT 'default', watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms FROM cursors;
  DROP TABLE cursors;
  ALTER TABLE cursors_ns RENAME TO cursors;
  CREATE INDEX cursors_by_target ON cursors (namespace, target_agent_id, target_key);
  CREATE INDEX cursors_pending ON cursors (namespace, watcher_key) WHERE notified > acked;
  CREATE INDEX cursors_by_time ON cursors (updated_at_ms);

  CREATE TABLE upstream_links_ns (
    namespace          TEXT    NOT NULL,
    agent_id           TEXT    NOT NULL,
    session_key        TEXT    NOT NULL,
    catalog_id         TEXT    NOT NULL,
    host_id            TEXT    NOT NULL,
    thread_id          TEXT    NOT NULL,
    source             TEXT    NOT NULL,
    marker             TEXT    NOT NULL,
    missed_checks      INTEGER NOT NULL DEFAULT 0,
    last_scanned_at_ms INTEGER,
    updated_at_ms      INTEGER NOT NULL,
    PRIMARY KEY (namespace, agent_id, session_key)
  ) WITHOUT ROWID;
  INSERT INTO upstream_links_ns SELECT 'default', agent_id, session_key, catalog_id, host_id, thread_id, source, marker,
    missed_checks, last_scanned_at_ms, updated_at_ms FROM upstream_links;
  DROP TABLE upstream_links;
  ALTER TABLE upstream_links_ns RENAME TO upstream_links;

  CREATE TABLE run_flags_ns (
    namespace       TEXT    NOT NULL,
    agent_id        TEXT    NOT NULL,
    session_key     TEXT    NOT NULL,
    active          INTEGER NOT NULL,
    starts          INTEGER NOT NULL,
    refreshed_at_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, agent_id, session_key)
  ) WITHOUT ROWID;
  INSERT INTO run_flags_ns SELECT 'default', agent_id, session_key, active, starts, refreshed_at_ms FROM run_flags;
  DROP TABLE run_flags;
  ALTER TABLE run_flags_ns RENAME TO run_flags;

  CREATE TABLE own_texts_ns (
    namespace   TEXT    NOT NULL,
    agent_id    TEXT    NOT NULL,
    session_key TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    digest      TEXT    NOT NULL,
    PRIMARY KEY (namespace, agent_id, session_key, position)
  ) WITHOUT ROWID;
  INSERT INTO own_texts_ns SELECT 'default', agent_id, session_key, position, digest FROM own_texts;
  DROP TABLE own_texts;
  ALTER TABLE own_texts_ns RENAME TO own_texts;
  `,
  },
  {
    sql: `
  -- Costs that do not grow with the data (issue 33). Each namespace's counts, kept by triggers in the
  -- transaction that changes them, so that retention finds the namespaces over their cap, the metrics count
  -- pending notices and ListNamespaces answers, all without counting a table. updated_at_ms is the newest
  -- head update (the last append) of the namespace.
  CREATE TABLE namespaces (
    namespace       TEXT    PRIMARY KEY,
    sessions        INTEGER NOT NULL DEFAULT 0,
    events          INTEGER NOT NULL DEFAULT 0,
    watches         INTEGER NOT NULL DEFAULT 0,
    pending_notices INTEGER NOT NULL DEFAULT 0,
    updated_at_ms   INTEGER NOT NULL DEFAULT 0
  ) WITHOUT ROWID;
  INSERT INTO namespaces (namespace, sessions, events, watches, pending_notices, updated_at_ms)
    SELECT namespace, sum(sessions), sum(events), sum(watches), sum(pending), max(updated) FROM (
      SELECT namespace, count(*) AS sessions, 0 AS events, 0 AS watches, 0 AS pending, max(updated_at_ms) AS updated
        FROM heads GROUP BY namespace
      UNION ALL SELECT namespace, 0, count(*), 0, 0, 0 FROM events GROUP BY namespace
      UNION ALL SELECT namespace, 0, 0, count(*), sum(notified > acked), 0 FROM cursors GROUP BY namespace
    ) GROUP BY namespace;

  CREATE TRIGGER heads_counted AFTER INSERT ON heads BEGIN
    INSERT INTO namespaces (namespace, sessions, updated_at_ms) VALUES (NEW.namespace, 1, NEW.updated_at_ms)
    ON CONFLICT (namespace) DO UPDATE SET sessions = sessions + 1, updated_at_ms = max(updated_at_ms, excluded.updated_at_ms);
  END;
  CREATE TRIGGER heads_touched AFTER UPDATE OF updated_at_ms ON heads BEGIN
    UPDATE namespaces SET updated_at_ms = max(updated_at_ms, NEW.updated_at_ms) WHERE namespace = NEW.namespace;
  END;
  CREATE TRIGGER heads_uncounted AFTER DELETE ON heads BEGIN
    UPDATE namespaces SET sessions = sessions - 1 WHERE namespace = OLD.namespace;
  END;
  CREATE TRIGGER events_counted AFTER INSERT ON events BEGIN
    UPDATE namespaces SET events = events + 1 WHERE namespace = NEW.namespace;
  END;
  CREATE TRIGGER events_uncounted AFTER DELETE ON events BEGIN
    UPDATE namespaces SET events = events - 1 WHERE namespace = OLD.namespace;
  END;
  CREATE TRIGGER cursors_counted AFTER INSERT ON cursors BEGIN
    INSERT INTO namespaces (namespace, watches, pending_notices) VALUES (NEW.namespace, 1, NEW.notified > NEW.acked)
    ON CONFLICT (namespace) DO UPDATE SET watches = watches + 1, pending_notices = pending_notices + excluded.pending_notices;
  END;
  CREATE TRIGGER cursors_recounted AFTER UPDATE OF acked, notified ON cursors
    WHEN (OLD.notified > OLD.acked) <> (NEW.notified > NEW.acked) BEGIN
    UPDATE namespaces SET pending_notices = pending_notices + (NEW.notified > NEW.acked) - (OLD.notified > OLD.acked)
    WHERE namespace = NEW.namespace;
  END;
  CREATE TRIGGER cursors_uncounted AFTER DELETE ON cursors BEGIN
    UPDATE namespaces SET watches = watches - 1, pending_notices = pending_notices - (OLD.notified > OLD.acked)
    WHERE namespace = OLD.namespace;
  END;

  -- The checkpointer starts a long write-ahead log over itself (store/sqlite/checkpointer): a write of its
  -- own, here, right after it has copied all of the log while no other write could begin.
  CREATE TABLE wal_restarts (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    count INTEGER NOT NULL
  );
  INSERT INTO wal_restarts (id, count) VALUES (1, 0);

  -- A subscription's pending notices are paged in pair order: the index holds the whole order, so a page
  -- is a seek and a read of its own rows, however many are pending.
  DROP INDEX cursors_pending;
  CREATE INDEX cursors_pending ON cursors (namespace, watcher_key, target_agent_id, target_key) WHERE notified > acked;
  `,
  },
  {
    sql: `
  -- The console's lists of sessions (issue 36): by key among a prefix's keys across agents, and the most
  -- recently changed first, of a namespace or of one agent; each page a seek in one of these.
  CREATE INDEX heads_by_key ON heads (namespace, session_key, agent_id);
  CREATE INDEX heads_by_time ON heads (namespace, updated_at_ms, agent_id, session_key);
  CREATE INDEX heads_of_agent_by_time ON heads (namespace, agent_id, updated_at_ms, session_key);
  `,
  },
  {
    sql: `
  -- The CLIs' hooks (issue 40) name a transcript, or a session id, not a session: each finds its links by
  -- a seek in one of these, however many links there are.
  CREATE INDEX upstream_links_by_source ON upstream_links (namespace, source);
  CREATE INDEX upstream_links_by_thread ON upstream_links (namespace, thread_id);
  `,
  },
];
