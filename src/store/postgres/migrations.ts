import type pg from "pg";

/**
 * The PostgreSQL schema (SPEC §11), one entry per version: entry i takes a schema from version i to
 * i + 1. Never edit an entry that has shipped: add one. Text keys use `COLLATE "C"` so that prefix
 * ranges and paging order are byte order, as in SQLite.
 */
export const postgresMigrations: readonly string[] = [
  `
  -- The one order of every write (SPEC §11): each write transaction locks this row first (FOR UPDATE),
  -- takes its event sequences and its change number from it and updates it before COMMIT, so commit
  -- order is sequence order and every reader sees a gap-free prefix.
  CREATE TABLE clock (
    id         int4 PRIMARY KEY CHECK (id = 1),
    event_seq  int8 NOT NULL,
    change_seq int8 NOT NULL
  );
  INSERT INTO clock (id, event_seq, change_seq) VALUES (1, 0, 0);

  -- One row per session that ever had an event; survives pruning, so the state version never goes down.
  CREATE TABLE heads (
    session_id     int8 GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id       text COLLATE "C" NOT NULL,
    session_key    text COLLATE "C" NOT NULL,
    state_version  int8 NOT NULL,
    pruned_through int8 NOT NULL DEFAULT 0,
    updated_at_ms  int8 NOT NULL,
    UNIQUE (agent_id, session_key)
  );

  CREATE TABLE events (
    sequence       int8 PRIMARY KEY,
    session_id     int8 NOT NULL REFERENCES heads (session_id),
    kind           text NOT NULL,
    actor_type     text NOT NULL,
    actor_id       text,
    run_id         text,
    summary        text NOT NULL,
    occurred_at_ms int8 NOT NULL,
    outcome        text,
    channel        text,
    turns          int8,
    catalog_id     text,
    host_id        text,
    dedupe_key     text COLLATE "C",
    wire           bytea NOT NULL
  );
  CREATE INDEX events_by_session ON events (session_id, sequence);
  CREATE INDEX events_by_time ON events (occurred_at_ms);
  CREATE UNIQUE INDEX events_by_dedupe_key ON events (dedupe_key) WHERE dedupe_key IS NOT NULL;

  -- A watcher's position on a target: acked (L) <= notified (N) <= material (M).
  CREATE TABLE cursors (
    watcher_key     text COLLATE "C" NOT NULL,
    target_agent_id text COLLATE "C" NOT NULL,
    target_key      text COLLATE "C" NOT NULL,
    acked           int8 NOT NULL,
    notified        int8 NOT NULL,
    material        int8 NOT NULL,
    updated_at_ms   int8 NOT NULL,
    PRIMARY KEY (watcher_key, target_agent_id, target_key),
    CHECK (acked <= notified AND notified <= material)
  );
  CREATE INDEX cursors_by_target ON cursors (target_agent_id, target_key);
  CREATE INDEX cursors_pending ON cursors (watcher_key) WHERE notified > acked;
  CREATE INDEX cursors_by_time ON cursors (updated_at_ms);

  -- The feed across replicas: every transaction that opens, changes or closes pending notices writes the
  -- pairs here under its change number (taken from the clock) and ends with one pg_notify of that number.
  -- A replica reads what is above the last number it read, in order. A table rather than a column on
  -- the cursor, because a removed cursor closes its notice too. Pruned after an hour.
  CREATE TABLE pair_changes (
    change_seq      int8 NOT NULL,
    watcher_key     text COLLATE "C" NOT NULL,
    target_agent_id text COLLATE "C" NOT NULL,
    target_key      text COLLATE "C" NOT NULL,
    at_ms           int8 NOT NULL
  );
  CREATE INDEX pair_changes_by_seq ON pair_changes (change_seq);

  -- One upstream link per adopted session; node_id is the replica's node that adopted a local transcript.
  CREATE TABLE upstream_links (
    agent_id           text COLLATE "C" NOT NULL,
    session_key        text COLLATE "C" NOT NULL,
    catalog_id         text NOT NULL,
    host_id            text NOT NULL,
    thread_id          text NOT NULL,
    source             text NOT NULL,
    marker             text NOT NULL,
    missed_checks      int8 NOT NULL DEFAULT 0,
    last_scanned_at_ms int8,
    updated_at_ms      int8 NOT NULL,
    node_id            text COLLATE "C",
    PRIMARY KEY (agent_id, session_key)
  );

  -- Jobs that run on one replica at a time (retention; the upstream monitor of a node id).
  CREATE TABLE leases (
    job        text COLLATE "C" PRIMARY KEY,
    holder     text NOT NULL,
    epoch      int8 NOT NULL,
    expires_at timestamptz NOT NULL
  );

  -- What gateways report for the monitor, shared by every replica: texts only as SHA-256 digests.
  CREATE TABLE own_texts (
    agent_id    text COLLATE "C" NOT NULL,
    session_key text COLLATE "C" NOT NULL,
    position    int8 NOT NULL,
    digest      text NOT NULL,
    PRIMARY KEY (agent_id, session_key, position)
  );
  CREATE TABLE run_flags (
    agent_id       text COLLATE "C" NOT NULL,
    session_key    text COLLATE "C" NOT NULL,
    active          boolean NOT NULL,
    starts          int8 NOT NULL,
    refreshed_at_ms int8 NOT NULL,
    PRIMARY KEY (agent_id, session_key)
  );
  `,
  `
  -- Namespaces (SPEC §12.1): the namespace is part of every key of every table, so two gateways' sessions,
  -- cursors, feed rows, links and reports never meet; existing rows go to 'default', and then no column
  -- keeps a default (every write names its namespace). Cursors also get their provenance (§12.2) and the
  -- extra kinds that notify their watcher (§12.3): every existing cursor is explicit, with none.
  ALTER TABLE heads ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default';
  ALTER TABLE heads DROP CONSTRAINT heads_agent_id_session_key_key;
  ALTER TABLE heads ADD CONSTRAINT heads_session UNIQUE (namespace, agent_id, session_key);
  ALTER TABLE heads ALTER COLUMN namespace DROP DEFAULT;

  ALTER TABLE events ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default';
  ALTER TABLE events ALTER COLUMN namespace DROP DEFAULT;
  DROP INDEX events_by_dedupe_key;
  CREATE UNIQUE INDEX events_by_dedupe_key ON events (namespace, dedupe_key) WHERE dedupe_key IS NOT NULL;
  CREATE INDEX events_by_namespace ON events (namespace, sequence);

  ALTER TABLE cursors ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default',
    ADD COLUMN provenance text NOT NULL DEFAULT 'explicit',
    ADD COLUMN extra_kinds text NOT NULL DEFAULT '';
  ALTER TABLE cursors DROP CONSTRAINT cursors_pkey, ADD PRIMARY KEY (namespace, watcher_key, target_agent_id, target_key);
  ALTER TABLE cursors ALTER COLUMN namespace DROP DEFAULT;
  DROP INDEX cursors_by_target;
  CREATE INDEX cursors_by_target ON cursors (namespace, target_agent_id, target_key);
  DROP INDEX cursors_pending;
  CREATE INDEX cursors_pending ON cursors (namespace, watcher_key) WHERE notified > acked;

  ALTER TABLE pair_changes ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default';
  ALTER TABLE pair_changes ALTER COLUMN namespace DROP DEFAULT;

  ALTER TABLE upstream_links ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default';
  ALTER TABLE upstream_links DROP CONSTRAINT upstream_links_pkey, ADD PRIMARY KEY (namespace, agent_id, session_key);
  ALTER TABLE upstream_links ALTER COLUMN namespace DROP DEFAULT;

  ALTER TABLE own_texts ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default';
  ALTER TABLE own_texts DROP CONSTRAINT own_texts_pkey, ADD PRIMARY KEY (namespace, agent_id, session_key, position);
  ALTER TABLE own_texts ALTER COLUMN namespace DROP DEFAULT;

  ALTER TABLE run_flags ADD COLUMN namespace text COLLATE "C" NOT NULL DEFAULT 'default';
  ALTER TABLE run_flags DROP CONSTRAINT run_flags_pkey, ADD PRIMARY KEY (namespace, agent_id, session_key);
  ALTER TABLE run_flags ALTER COLUMN namespace DROP DEFAULT;
  `,
  `
  -- Costs that do not grow with the data (issue 33). Each namespace's counts, kept by statement triggers in
  -- the transaction that changes them (every write holds the clock row, so they never race), so that
  -- retention finds the namespaces over their cap, the metrics count pending notices and ListNamespaces
  -- answers, all without counting a table. updated_at_ms is the newest head update (the last append). A
  -- count only grows through an upsert: the triggers of one statement (a head inserted in a CTE beside its
  -- events) may fire in any order.
  CREATE TABLE namespaces (
    namespace       text COLLATE "C" PRIMARY KEY,
    sessions        int8 NOT NULL DEFAULT 0,
    events          int8 NOT NULL DEFAULT 0,
    watches         int8 NOT NULL DEFAULT 0,
    pending_notices int8 NOT NULL DEFAULT 0,
    updated_at_ms   int8 NOT NULL DEFAULT 0
  );
  INSERT INTO namespaces (namespace, sessions, events, watches, pending_notices, updated_at_ms)
    SELECT namespace, sum(sessions), sum(events), sum(watches), sum(pending), max(updated) FROM (
      SELECT namespace, count(*) AS sessions, 0 AS events, 0 AS watches, 0 AS pending, max(updated_at_ms) AS updated
        FROM heads GROUP BY namespace
      UNION ALL SELECT namespace, 0, count(*), 0, 0, 0 FROM events GROUP BY namespace
      UNION ALL SELECT namespace, 0, 0, count(*), count(*) FILTER (WHERE notified > acked), 0 FROM cursors GROUP BY namespace
    ) AS counts GROUP BY namespace;

  CREATE FUNCTION count_heads() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO namespaces AS s (namespace, sessions, updated_at_ms)
        SELECT namespace, count(*), max(updated_at_ms) FROM new_rows GROUP BY namespace
      ON CONFLICT (namespace) DO UPDATE
        SET sessions = s.sessions + excluded.sessions, updated_at_ms = greatest(s.updated_at_ms, excluded.updated_at_ms);
    ELSIF TG_OP = 'UPDATE' THEN
      UPDATE namespaces AS s SET updated_at_ms = n.updated
        FROM (SELECT namespace, max(updated_at_ms) AS updated FROM new_rows GROUP BY namespace) AS n
        WHERE s.namespace = n.namespace AND n.updated > s.updated_at_ms;
    ELSE
      UPDATE namespaces AS s SET sessions = s.sessions - o.n
        FROM (SELECT namespace, count(*) AS n FROM old_rows GROUP BY namespace) AS o WHERE s.namespace = o.namespace;
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER heads_inserted AFTER INSERT ON heads REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_heads();
  CREATE TRIGGER heads_updated AFTER UPDATE ON heads REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_heads();
  CREATE TRIGGER heads_deleted AFTER DELETE ON heads REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_heads();

  CREATE FUNCTION count_events() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO namespaces AS s (namespace, events) SELECT namespace, count(*) FROM new_rows GROUP BY namespace
      ON CONFLICT (namespace) DO UPDATE SET events = s.events + excluded.events;
    ELSE
      UPDATE namespaces AS s SET events = s.events - o.n
        FROM (SELECT namespace, count(*) AS n FROM old_rows GROUP BY namespace) AS o WHERE s.namespace = o.namespace;
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER events_inserted AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_events();
  CREATE TRIGGER events_deleted AFTER DELETE ON events REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_events();

  CREATE FUNCTION count_cursors() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO namespaces AS s (namespace, watches, pending_notices)
        SELECT namespace, count(*), count(*) FILTER (WHERE notified > acked) FROM new_rows GROUP BY namespace
      ON CONFLICT (namespace) DO UPDATE
        SET watches = s.watches + excluded.watches, pending_notices = s.pending_notices + excluded.pending_notices;
    ELSIF TG_OP = 'UPDATE' THEN
      UPDATE namespaces AS s SET pending_notices = s.pending_notices + d.delta
        FROM (SELECT namespace, sum(delta) AS delta FROM (
                SELECT namespace, 1 AS delta FROM new_rows WHERE notified > acked
                UNION ALL SELECT namespace, -1 FROM old_rows WHERE notified > acked
              ) AS changed GROUP BY namespace) AS d
        WHERE s.namespace = d.namespace AND d.delta <> 0;
    ELSE
      UPDATE namespaces AS s SET watches = s.watches - o.n, pending_notices = s.pending_notices - o.pending
        FROM (SELECT namespace, count(*) AS n, count(*) FILTER (WHERE notified > acked) AS pending FROM old_rows GROUP BY namespace) AS o
        WHERE s.namespace = o.namespace;
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER cursors_inserted AFTER INSERT ON cursors REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_cursors();
  CREATE TRIGGER cursors_updated AFTER UPDATE ON cursors REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_cursors();
  CREATE TRIGGER cursors_deleted AFTER DELETE ON cursors REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_cursors();

  -- A subscription's pending notices are paged in pair order: the index holds the whole order, so a page is
  -- a seek and a read of its own rows, however many are pending.
  DROP INDEX cursors_pending;
  CREATE INDEX cursors_pending ON cursors (namespace, watcher_key, target_agent_id, target_key) WHERE notified > acked;
  `,
  `
  -- The console's lists of sessions (issue 36): by key among a prefix's keys across agents, and the most
  -- recently changed first, of a namespace or of one agent; each page a seek in one of these.
  CREATE INDEX heads_by_key ON heads (namespace, session_key, agent_id);
  CREATE INDEX heads_by_time ON heads (namespace, updated_at_ms, agent_id, session_key);
  CREATE INDEX heads_of_agent_by_time ON heads (namespace, agent_id, updated_at_ms, session_key);
  `,
  `
  -- The CLIs' hooks (issue 40) name a transcript, or a session id, not a session: each finds its links by
  -- a seek in one of these, however many links there are.
  CREATE INDEX upstream_links_by_source ON upstream_links (namespace, source);
  CREATE INDEX upstream_links_by_thread ON upstream_links (namespace, thread_id);
  `,
  `
  -- Consumer groups across replicas (SPEC §6.1, issue 41). A claim's holder is a member stream of one
  -- incarnation of a replica; an incarnation is alive while its row here has not expired. A replica renews
  -- its row every 500 ms for 2 s (never once it has expired: an expired incarnation stays dead, and the
  -- replica goes on under a new one), and ends its members' streams before its last renewal runs out.
  CREATE TABLE claim_holders (
    incarnation text COLLATE "C" PRIMARY KEY,
    expires_at  timestamptz NOT NULL
  );
  -- Per group and pair: the claim on the pair's pending notice (N = notified) as the group last left it.
  -- Held while claim_id is set and its incarnation is alive; generation is the compare-and-set token of a take.
  CREATE TABLE notice_claims (
    namespace       text COLLATE "C" NOT NULL,
    group_name      text COLLATE "C" NOT NULL,
    watcher_key     text COLLATE "C" NOT NULL,
    target_agent_id text COLLATE "C" NOT NULL,
    target_key      text COLLATE "C" NOT NULL,
    notified        int8 NOT NULL,
    delivery_count  int4 NOT NULL,
    generation      int8 NOT NULL,
    claim_id        text COLLATE "C",
    holder          text COLLATE "C",
    incarnation     text COLLATE "C",
    peer            text,
    PRIMARY KEY (namespace, group_name, watcher_key, target_agent_id, target_key)
  );
  CREATE UNIQUE INDEX notice_claims_by_id ON notice_claims (claim_id) WHERE claim_id IS NOT NULL;
  CREATE INDEX notice_claims_by_incarnation ON notice_claims (incarnation) WHERE incarnation IS NOT NULL;
  CREATE INDEX notice_claims_of_pair ON notice_claims (namespace, watcher_key, target_agent_id, target_key);
  -- A claim that ends while its notice is pending is told to the group's members on other replicas through
  -- the feed, as a change of the pair for that group only (other subscribers of the watcher are not told).
  ALTER TABLE pair_changes ADD COLUMN group_name text COLLATE "C" NOT NULL DEFAULT '';
  `,
];

/** Thrown when the schema is newer than this program knows; names both versions. */
export class NewerSchemaError extends Error {
  constructor(
    readonly schema: string,
    readonly found: number,
    readonly known: number,
  ) {
    super(`database schema "${schema}" is at version ${found}, newer than this program knows (${known}): upgrade sessionstate`);
    this.name = "NewerSchemaError";
  }
}

/** A schema name as `--db-schema` takes it: a plain lower-case SQL identifier. */
export function isValidSchemaName(name: string): boolean {
  return /^[a-z_][a-z0-9_]{0,62}$/u.test(name);
}

/**
 * Creates the schema if missing and brings it to the newest version, in one transaction under an
 * advisory lock named after the schema, so replicas starting together do not race: the first migrates,
 * the others wait and then find it done. Throws `NewerSchemaError` for a schema this program does not
 * know. `client` is a connection of its own (not pipelined): a migration is several statements a step.
 */
export async function migratePostgres(client: pg.ClientBase, schema: string): Promise<{ from: number; to: number }> {
  if (!isValidSchemaName(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`);
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`sessionstate schema ${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".schema_version (id int4 PRIMARY KEY CHECK (id = 1), version int4 NOT NULL)`);
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM "${schema}".schema_version WHERE id = 1`);
    const from = rows[0]?.version ?? 0;
    const known = postgresMigrations.length;
    if (from > known) throw new NewerSchemaError(schema, from, known);
    if (from < known) {
      await client.query(`SET LOCAL search_path TO "${schema}"`);
      for (const step of postgresMigrations.slice(from)) await client.query(step);
      await client.query(
        `INSERT INTO "${schema}".schema_version (id, version) VALUES (1, ${known})
         ON CONFLICT (id) DO UPDATE SET version = excluded.version`,
      );
    }
    await client.query("COMMIT");
    return { from, to: known };
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
