import { performance } from "node:perf_hooks";
import type { EventEncoder, StoredEvent } from "../../domain/event.js";
import type {
  AckInput,
  AckOutcome,
  AdoptInput,
  AppendInput,
  AppendOutcome,
  CursorRecord,
  CursorsRead,
  LinkRecord,
  PairChange,
  PruneStep,
  RetentionPolicy,
  ScanCommit,
  SessionHead,
  SessionStatus,
  WatchRequest,
} from "../../domain/records.js";
import { watcherIdOfKey, type SessionId } from "../../domain/session-key.js";
import { pageStartIn, type PairPosition, type WatcherRange } from "../../domain/pair-order.js";
import { runFlagAfter, type RunFlag } from "../../domain/session-activity.js";
import {
  appendNeedsTargetCursors,
  applyAcks,
  isWatcherOf,
  linkUpdatedAtAfterReset,
  pairChangesOfRemoved,
  pairKeyOf,
  watchCursor,
} from "../../domain/write-rules.js";
import {
  isLocalTranscript,
  planAdoption,
  planAppend,
  planNamespaceTrim,
  planOwnText,
  planScanCommit,
  pruneCursorBudget,
  pruneNeedsCounts,
  pruneStepOutcome,
  scanCommitOutcome,
  sessionPageStart,
  type AppendReads,
  type NamespaceCount,
} from "../../domain/write-plans.js";
import type { CommitObserver, Durability } from "../store.js";
import type { WriteResult } from "../store.js";
import { settleWithin } from "../../settle-within.js";
import { rawSql, sql, type SqlQuery } from "./pg-sql.js";
import { DatabaseUnreachableError, PostgresDatabase, type PgDeadlines, type PgTransaction } from "./postgres-database.js";
import { PairChangeFeed, type StatusChanges } from "./postgres-feed.js";
import { ChangeStamps } from "../change-stamps.js";
import { StorageTracker, type StorageObserver } from "../storage-tracker.js";
import { migratePostgres } from "./postgres-schema.js";
import type { PostgresTarget } from "./postgres-url.js";
import { dedupeIdOf, dedupeKeyOfId, PgGroupCommit, targetKeyOf, type PgWriteContext, type Prefetched, type WriteHints } from "./postgres-writes.js";
import {
  cursorFromRow,
  eventFromRow,
  headFromRow,
  eventsFromConcatenation,
  linkFromRow,
  runFlagFromRow,
  type CursorRow,
  type EventRow,
  type HeadRow,
  type LinkRow,
  type RunFlagRow,
} from "../rows.js";
import type { Store } from "../store.js";

/** How long the feed's rows are kept: a replica away for longer resynchronises its subscribers instead. */
const pairChangesKeptMs = 60 * 60 * 1000;

/** Where a PostgreSQL store connects, and who this replica is. */
export interface PostgresStoreOptions {
  target: PostgresTarget;
  /** The schema holding the tables; created or migrated on open. */
  schema: string;
  durability: Durability;
  /** The replica's node id: local transcript links belong to the node that adopted them. */
  nodeId: string;
  encodeEvent: EventEncoder;
  nowMs: () => number;
  /** Told when a read of other replicas' changes fails (it is tried again on the next wake-up or tick). */
  onFeedError?: (error: unknown) => void;
  /** Deadlines of round trips to the database (tests shorten them). */
  deadlines?: PgDeadlines;
  /** Hears of writes refused for lack of space (a full disk or tablespace, a quota), and of space again. */
  storage?: StorageObserver;
  /** Hears how long each write transaction took, and how long its oldest write waited for it. */
  commits?: CommitObserver;
}

const eventColumns = `e.sequence, h.namespace, h.agent_id, h.session_key, e.kind, e.actor_type, e.actor_id, e.run_id, e.summary,
  e.occurred_at_ms, e.outcome, e.channel, e.turns, e.catalog_id, e.host_id, e.wire`;

/** The cursors of some pairs, in one statement. */
function cursorsOfPairs(pairs: readonly PairChange[]): SqlQuery {
  return sql`
    SELECT c.* FROM cursors AS c
    JOIN unnest(${pairs.map((p) => p.target.namespace)}::text[], ${pairs.map((p) => p.watcherKey)}::text[],
                ${pairs.map((p) => p.target.agentId)}::text[], ${pairs.map((p) => p.target.key)}::text[]) AS t (n, w, a, k)
      ON c.namespace = t.n AND c.watcher_key = t.w AND c.target_agent_id = t.a AND c.target_key = t.k`;
}

/**
 * The statements of a retention step that choose rows (SPEC §4: a step costs the rows it removes): each walks
 * an index in its order and stops at its LIMIT, with sequential and bitmap scans off for the step.
 */
export const pruneChoices = {
  /** Events older than the cutoff, oldest first. */
  olderThan: (cutoffMs: number, limit: number): SqlQuery =>
    sql`SELECT sequence FROM events WHERE occurred_at_ms < ${cutoffMs} ORDER BY occurred_at_ms LIMIT ${limit}`,
  /** A namespace's oldest events. */
  oldestOf: (namespace: string, count: number): SqlQuery =>
    sql`SELECT sequence FROM events WHERE namespace = ${namespace} ORDER BY sequence LIMIT ${count}`,
  /** Cursors untouched since the cutoff. */
  untouchedCursors: (cutoffMs: number, limit: number): SqlQuery =>
    sql`SELECT namespace, watcher_key, target_agent_id, target_key FROM cursors WHERE updated_at_ms < ${cutoffMs} ORDER BY updated_at_ms LIMIT ${limit}`,
  /** The feed's oldest rows older than `beforeMs`, among the `limit` oldest. */
  oldFeedRows: (beforeMs: number, limit: number): SqlQuery =>
    sql`SELECT change_seq FROM (SELECT change_seq, at_ms FROM pair_changes ORDER BY change_seq LIMIT ${limit}) AS oldest WHERE at_ms < ${beforeMs}`,
};

/**
 * Cursor rows read with the clock's change number in the same statement (one snapshot: since commit order is
 * change order, it holds exactly the changes numbered up to it). A read that finds no cursor still answers
 * one row, with the number and no cursor.
 */
async function readThrough(db: PostgresDatabase, cursors: SqlQuery, inPairOrder = false): Promise<CursorsRead> {
  const order = inPairOrder ? sql`ORDER BY c.watcher_key, c.target_agent_id, c.target_key` : sql``;
  const rows = await db.query<CursorRow & { through: number }>(sql`
    SELECT k.change_seq AS through, c.* FROM clock AS k LEFT JOIN LATERAL (${cursors}) AS c ON true WHERE k.id = 1 ${order}`);
  return { cursors: rows.filter((row) => row.watcher_key !== null).map(cursorFromRow), through: rows[0]!.through };
}

/**
 * The PostgreSQL backend (SPEC §11): any number of replicas share one schema. SQL and transactions only;
 * each method reads, asks a plan of domain/write-plans (or a rule of domain/write-rules) and writes what it says, as in SqliteStore. Writes are group-committed under
 * the clock row lock (store/postgres/postgres-writes); single-statement reads see one snapshot, and since commit
 * order is sequence order, every snapshot holds a gap-free prefix of the log. Pair changes reach this
 * replica's listeners at once after a local commit, and from other replicas through LISTEN/NOTIFY
 * plus a catch-up read (store/postgres/postgres-feed).
 */
export class PostgresStore implements Store {
  private readonly listeners = new Set<(changes: readonly PairChange[], changeNumber: number) => void>();
  private readonly gapListeners = new Set<() => void>();
  /** Stamps of the sessions' SessionStatus answers: bumped by this replica's commits and by the feed. */
  private readonly stamps = new ChangeStamps();
  private readonly db: PostgresDatabase;
  private readonly writes: PgGroupCommit;
  private readonly channel: string;
  /** Listening to other replicas' changes: from `start()` on. */
  private feed: PairChangeFeed | undefined;

  /**
   * A store that has not talked to the database yet: `start()` connects (and may be tried again until it
   * succeeds); `open()` does both. Nothing may be asked of it before `start()` has resolved.
   */
  constructor(private readonly options: PostgresStoreOptions) {
    this.db = new PostgresDatabase({
      target: options.target,
      schema: options.schema,
      durability: options.durability,
      ...(options.deadlines === undefined ? {} : { deadlines: options.deadlines }),
    });
    this.channel = `sessionstate_${options.schema}`;
    this.writes = new PgGroupCommit(
      this.db,
      this.channel,
      {
        reserve: (changeSeq) => this.feed?.reserveOwn(changeSeq) ?? (() => undefined),
        announce: (changes, changeNumber) => this.announce(changes, changeNumber),
        statusChanged: (status) => this.bumpStamps(status),
      },
      options.nowMs,
      (tx, hints) => this.prefetch(tx, hints),
      new StorageTracker(options.storage),
      options.commits,
    );
  }

  /**
   * Reads, in two statements sent at once, every event holding a hinted dedupe key and every cursor on
   * a hinted target: what the batch's appends decide with, without a round trip each under the lock.
   */
  private async prefetch(tx: PgTransaction, hints: readonly WriteHints[]): Promise<Prefetched> {
    const dedupeKeys = new Set(hints.flatMap((hint) => hint.dedupeKeys ?? []));
    const targets = new Map(hints.flatMap((hint) => hint.targets ?? []).map((target) => [targetKeyOf(target), target]));
    const events =
      dedupeKeys.size === 0
        ? Promise.resolve([])
        : tx.query<EventRow & { state_version: number; dedupe_key: string }>(sql`
            SELECT ${rawSql(eventColumns)}, h.state_version, e.dedupe_key
            FROM unnest(${[...dedupeKeys].map((id) => dedupeKeyOfId(id).namespace)}::text[],
                        ${[...dedupeKeys].map((id) => dedupeKeyOfId(id).dedupeKey)}::text[]) AS d (n, k)
            JOIN events AS e ON e.namespace = d.n AND e.dedupe_key = d.k
            JOIN heads AS h USING (session_id)`);
    const cursors =
      targets.size === 0
        ? Promise.resolve([])
        : tx.query<CursorRow>(sql`
            SELECT c.* FROM cursors AS c
            JOIN unnest(${[...targets.values()].map((t) => t.namespace)}::text[], ${[...targets.values()].map((t) => t.agentId)}::text[],
                        ${[...targets.values()].map((t) => t.key)}::text[]) AS t (n, a, k)
              ON c.namespace = t.n AND c.target_agent_id = t.a AND c.target_key = t.k`);
    // Both are under way: awaited together, so a failed transaction never leaves one rejection unhandled.
    const [eventRows, cursorRows] = await Promise.all([events, cursors]);
    const prefetched: Prefetched = {
      eventsByDedupeKey: new Map(),
      dedupeKeys,
      cursorsByTarget: new Map([...targets.keys()].map((key) => [key, []])),
    };
    for (const row of eventRows) {
      prefetched.eventsByDedupeKey.set(dedupeIdOf(row.namespace, row.dedupe_key), { event: eventFromRow(row), stateVersion: row.state_version });
    }
    for (const row of cursorRows) {
      const cursor = cursorFromRow(row);
      prefetched.cursorsByTarget.get(targetKeyOf(cursor.target))!.push(cursor);
    }
    return prefetched;
  }

  /** Connects, creates or migrates the schema, and starts listening for other replicas' changes. Close it. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const store = new PostgresStore(options);
    try {
      await store.start();
      return store;
    } catch (error) {
      await store.close();
      throw error;
    }
  }

  /**
   * Creates or migrates the schema and starts listening for other replicas' changes. Throws when the
   * database cannot be reached (then it may be called again) or the schema is newer than this program.
   */
  async start(): Promise<void> {
    if (this.feed !== undefined) return;
    const client = await this.db.connectClient("migration");
    const swallow = (): void => undefined;
    client.on("error", swallow);
    try {
      await migratePostgres(client, this.options.schema);
    } finally {
      await client.end().catch(() => undefined);
    }
    const [clock] = await this.db.query<{ change_seq: number }>(sql`SELECT change_seq FROM clock WHERE id = 1`);
    const feed = new PairChangeFeed(this.db, this.channel, clock!.change_seq, {
      changes: (changes, status) => {
        this.bumpStamps(status);
        for (const { changeNumber, pairs } of changes) this.announce(pairs, changeNumber);
      },
      gap: () => {
        this.stamps.bumpAll();
        for (const listener of this.gapListeners) listener();
      },
      error: (error) => this.options.onFeedError?.(error),
    });
    await feed.start();
    this.feed = feed;
  }

  /** True while the database answers round trips (SPEC §11: health follows it). */
  get isReachable(): boolean {
    return this.db.isReachable;
  }

  /** Calls `listener` with false when the database stops answering and with true when it answers again. */
  onReachabilityChange(listener: (reachable: boolean) => void): () => void {
    return this.db.onReachabilityChange(listener);
  }

  private bumpStamps(status: StatusChanges): void {
    if (status.all) this.stamps.bumpAll();
    for (const session of status.sessions) this.stamps.bump(session);
  }

  /** The session's stamp as far as this replica has heard (see statusStampsCurrent). */
  statusStamp(session: SessionId): number {
    return this.stamps.of(session);
  }

  /**
   * Resolves once the stamps hold every write committed before the call, this replica's and the others':
   * the feed has read to the end in a read that began after it (calls at once share that read).
   */
  statusStampsCurrent(): Promise<void> {
    if (this.feed === undefined) return Promise.reject(new DatabaseUnreachableError("the store has not started"));
    return this.feed.heardAll();
  }

  private announce(changes: readonly PairChange[], changeNumber: number): void {
    if (changes.length === 0) return;
    for (const listener of this.listeners) listener(changes, changeNumber);
  }

  onPairChanges(listener: (changes: readonly PairChange[], changeNumber: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** What the feed has read through (this replica's own commits are announced before it passes them). */
  changesHeardThrough(): number {
    return this.feed?.heardThrough ?? 0;
  }

  onFeedGap(listener: () => void): () => void {
    this.gapListeners.add(listener);
    return () => this.gapListeners.delete(listener);
  }

  /** Runs one write, group-committed with whatever else is queued (it names no rows to read up front). */
  private runWrite<T>(write: (ctx: PgWriteContext) => Promise<WriteResult<T>>): Promise<T> {
    return this.writes.enqueue(write);
  }

  // ---- reads and writes of rows, inside a write transaction ----

  private async cursor(ctx: PgWriteContext, watcherKey: string, target: SessionId): Promise<CursorRecord | undefined> {
    const [row] = await ctx.tx.query<CursorRow>(sql`
      SELECT * FROM cursors WHERE watcher_key = ${watcherKey} AND namespace = ${target.namespace} AND target_agent_id = ${target.agentId} AND target_key = ${target.key}`);
    return row === undefined ? undefined : cursorFromRow(row);
  }

  private putCursors(ctx: PgWriteContext, cursors: readonly CursorRecord[]): void {
    ctx.deferCursors(cursors);
  }

  private async versionOf(ctx: PgWriteContext, session: SessionId): Promise<number> {
    const [row] = await ctx.tx.query<{ state_version: number }>(sql`
      SELECT state_version FROM heads WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
    return row?.state_version ?? 0;
  }

  private async linkIn(ctx: PgWriteContext, session: SessionId): Promise<LinkRecord | undefined> {
    const [row] = await ctx.tx.query<LinkRow>(sql`
      SELECT * FROM upstream_links WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
    return row === undefined ? undefined : linkFromRow(row);
  }

  private removeLink(ctx: PgWriteContext, session: SessionId): Promise<boolean> {
    return ctx.tx
      .send(sql`DELETE FROM upstream_links WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`)
      .then((result) => (result.rowCount ?? 0) > 0);
  }

  /**
   * An append inside a write transaction. On the common path it reads nothing (its dedupe key and its
   * target's cursors were read up front with the batch) and writes nothing yet (its rows are held back
   * for the batch's one insert); `ctx.tx` is touched only when something was not read up front.
   */
  private async appendIn(ctx: PgWriteContext, input: AppendInput): Promise<WriteResult<AppendOutcome>> {
    const plan = planAppend(input, await this.appendReads(ctx, input), () => ctx.nextSequence(), this.options.encodeEvent);
    switch (plan.action) {
      case "deduplicated":
        return { value: plan.outcome, changes: [] };
      case "gated":
        return { value: { recorded: false, stateVersion: await this.versionOf(ctx, input.session) }, changes: [] };
      case "record":
        ctx.deferEvent(plan.event, input.dedupeKey, input.nowMs);
        ctx.noteEvent(input.dedupeKey, plan.event);
        ctx.noteAppended(input.session, plan.event.sequence);
        this.putCursors(ctx, plan.cursorWrites);
        return { value: plan.outcome, changes: plan.changes };
    }
  }

  /**
   * What an append's plan needs, from what the batch read up front when it can (the event holding its
   * dedupe key, its target's cursors), else read now.
   */
  private async appendReads(ctx: PgWriteContext, input: AppendInput): Promise<AppendReads> {
    if (input.dedupeKey !== undefined) {
      let found = ctx.dedupedEvent(input.session.namespace, input.dedupeKey);
      if (found === undefined) {
        const [row] = await ctx.tx.query<EventRow & { state_version: number }>(sql`
          SELECT ${rawSql(eventColumns)}, h.state_version
          FROM events AS e JOIN heads AS h USING (session_id)
          WHERE e.namespace = ${input.session.namespace} AND e.dedupe_key = ${input.dedupeKey}`);
        found = row === undefined ? null : { event: eventFromRow(row), stateVersion: row.state_version };
      }
      if (found !== null) {
        // The session's version now: an append earlier in this batch may have moved it since the read.
        const session = { namespace: found.event.namespace, agentId: found.event.agentId, key: found.event.sessionKey };
        return { duplicate: { event: found.event, stateVersion: Math.max(found.stateVersion, ctx.versionAppended(session)) }, cursorsOnTarget: [] };
      }
    }
    if (!appendNeedsTargetCursors(input)) return { cursorsOnTarget: [] };
    const prefetched = ctx.cursorsOn(input.session);
    if (prefetched !== undefined) return { cursorsOnTarget: prefetched.slice() };
    const rows = await ctx.tx.query<CursorRow>(sql`
      SELECT * FROM cursors WHERE namespace = ${input.session.namespace} AND target_agent_id = ${input.session.agentId} AND target_key = ${input.session.key}`);
    return { cursorsOnTarget: rows.map(cursorFromRow) };
  }

  // ---- the Store port ----

  append(input: AppendInput): Promise<AppendOutcome> {
    const hints: WriteHints = {
      ...(input.dedupeKey === undefined ? {} : { dedupeKeys: [dedupeIdOf(input.session.namespace, input.dedupeKey)] }),
      ...(appendNeedsTargetCursors(input) ? { targets: [input.session] } : {}),
    };
    return this.writes.enqueue((ctx) => this.appendIn(ctx, input), hints);
  }

  /** One statement, so one snapshot: the head and the events agree. */
  async sessionStatus(session: SessionId, changesSince: number | undefined, limit: number): Promise<SessionStatus> {
    // Past 2^53 (Infinity from the service) is past every head: ask for no events.
    const after = changesSince === undefined || !Number.isSafeInteger(changesSince) ? Number.MAX_SAFE_INTEGER : changesSince;
    // The events as one row, as SQLite reads them (store/rows: eventsFromConcatenation).
    const [head] = await this.db.query<{ state_version: number; pruned_through: number; earliest: number; lengths: string | null; bytes: Uint8Array | null }>(sql`
      SELECT h.state_version, h.pruned_through,
        coalesce((SELECT min(sequence) FROM events AS m WHERE m.session_id = h.session_id), 0) AS earliest,
        e.lengths, e.bytes
      FROM heads AS h
      CROSS JOIN LATERAL (
        SELECT string_agg(sequence || ':' || octet_length(wire), ',' ORDER BY sequence) AS lengths,
          string_agg(wire, ''::bytea ORDER BY sequence) AS bytes
        FROM (
          SELECT sequence, wire FROM events AS x
          WHERE x.session_id = h.session_id AND x.sequence > ${after} ORDER BY x.sequence LIMIT ${limit + 1}
        ) AS page
      ) AS e
      WHERE h.namespace = ${session.namespace} AND h.agent_id = ${session.agentId} AND h.session_key = ${session.key}`);
    const stateVersion = head?.state_version ?? 0;
    if (changesSince === undefined || changesSince > stateVersion) return { stateVersion };
    if (head === undefined) return { stateVersion, changes: { events: [], truncated: false, historyGap: false, earliestAvailableSequence: 0 } };
    const events = eventsFromConcatenation(head.lengths, head.bytes);
    const truncated = events.length > limit;
    if (truncated) events.length = limit;
    return {
      stateVersion,
      changes: { events, truncated, historyGap: changesSince < head.pruned_through, earliestAvailableSequence: head.earliest },
    };
  }

  async listSessions(filter: Parameters<Store["listSessions"]>[0]): Promise<SessionHead[]> {
    const hasUpstream = sql`EXISTS (SELECT 1 FROM upstream_links AS l
      WHERE l.namespace = heads.namespace AND l.agent_id = heads.agent_id AND l.session_key = heads.session_key)`;
    const start = sessionPageStart(filter.agentId, filter.after);
    const rows =
      filter.agentId === undefined
        ? await this.db.query<HeadRow>(sql`
            SELECT namespace, agent_id, session_key, state_version, pruned_through, updated_at_ms, ${hasUpstream} AS has_upstream
            FROM heads WHERE namespace = ${filter.namespace} AND (agent_id, session_key) > (${start.agentId}, ${start.key})
            ORDER BY agent_id, session_key LIMIT ${filter.limit}`)
        : await this.db.query<HeadRow>(sql`
            SELECT namespace, agent_id, session_key, state_version, pruned_through, updated_at_ms, ${hasUpstream} AS has_upstream
            FROM heads WHERE namespace = ${filter.namespace} AND agent_id = ${filter.agentId} AND session_key > ${start.key}
            ORDER BY session_key LIMIT ${filter.limit}`);
    return rows.map(headFromRow);
  }

  async getStateVersions(sessions: readonly SessionId[]): Promise<(number | undefined)[]> {
    if (sessions.length === 0) return [];
    const rows = await this.db.query<{ i: number; state_version: number }>(sql`
      SELECT t.i, h.state_version
      FROM unnest(${sessions.map((s) => s.namespace)}::text[], ${sessions.map((s) => s.agentId)}::text[], ${sessions.map((s) => s.key)}::text[])
        WITH ORDINALITY AS t (n, a, k, i)
      JOIN heads AS h ON h.namespace = t.n AND h.agent_id = t.a AND h.session_key = t.k`);
    const versions: (number | undefined)[] = sessions.map(() => undefined);
    for (const row of rows) versions[row.i - 1] = row.state_version;
    return versions;
  }

  deleteSession(session: SessionId) {
    return this.runWrite(async (ctx) => {
      ctx.forgetPrefetched();
      const { tx } = ctx;
      const [{ count: eventsRemoved }] = (await tx.query<{ count: number }>(sql`
        WITH gone AS (
          DELETE FROM events WHERE session_id =
            (SELECT session_id FROM heads WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key})
          RETURNING 1
        ) SELECT count(*)::int8 AS count FROM gone`)) as unknown as [{ count: number }];
      ctx.send(sql`DELETE FROM heads WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
      const removed = (
        await tx.query<CursorRow>(sql`
          DELETE FROM cursors WHERE namespace = ${session.namespace}
            AND ((target_agent_id = ${session.agentId} AND target_key = ${session.key})
              OR (${isWatcherOf(session.key, session)} AND watcher_key = ${session.key}))
          RETURNING *`)
      ).map(cursorFromRow);
      ctx.send(sql`DELETE FROM run_flags WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
      ctx.send(sql`DELETE FROM own_texts WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
      const linkRemoved = await this.removeLink(ctx, session);
      ctx.sessionChanged(session);
      return { value: { eventsRemoved, cursorsRemoved: removed.length, linkRemoved }, changes: pairChangesOfRemoved(removed) };
    });
  }

  watch(watcherKey: string, target: SessionId, nowMs: number, request?: WatchRequest): Promise<CursorRecord> {
    return this.runWrite(async (ctx) => {
      const existing = await this.cursor(ctx, watcherKey, target);
      const effect = watchCursor(watcherKey, target, existing, await this.versionOf(ctx, target), nowMs, request);
      // A refreshed lifetime is written as the whole row too: one statement for every cursor of the batch.
      if (effect.write !== "none") this.putCursors(ctx, [effect.cursor]);
      return { value: effect.cursor, changes: effect.pairChanges };
    });
  }

  unwatch(watcherKey: string, target: SessionId): Promise<boolean> {
    return this.runWrite(async (ctx) => {
      ctx.forgetPrefetched();
      const removed = (
        await ctx.tx.query<CursorRow>(sql`
          DELETE FROM cursors WHERE watcher_key = ${watcherKey} AND namespace = ${target.namespace} AND target_agent_id = ${target.agentId} AND target_key = ${target.key}
          RETURNING *`)
      ).map(cursorFromRow);
      return { value: removed.length > 0, changes: pairChangesOfRemoved(removed) };
    });
  }

  async listWatches(filter: Parameters<Store["listWatches"]>[0]): Promise<CursorRecord[]> {
    const [w, a, k] = filter.after ?? ["", "", ""];
    const { watcherKey, target } = filter;
    const rows = await this.db.query<CursorRow>(sql`
      SELECT * FROM cursors
      WHERE namespace = ${filter.namespace} AND (watcher_key, target_agent_id, target_key) > (${w}, ${a}, ${k})
        ${filter.provenance === undefined ? sql`` : sql`AND provenance = ${filter.provenance}`}
        ${watcherKey === undefined ? sql`` : sql`AND watcher_key = ${watcherKey}`}
        ${target === undefined ? sql`` : sql`AND target_agent_id = ${target.agentId} AND target_key = ${target.key}`}
      ORDER BY watcher_key, target_agent_id, target_key LIMIT ${filter.limit}`);
    return rows.map(cursorFromRow);
  }

  resetWatcher(namespace: string, watcherKey: string, nowMs: number): Promise<number> {
    return this.runWrite(async (ctx) => {
      ctx.forgetPrefetched();
      const removed = (
        await ctx.tx.query<CursorRow>(sql`DELETE FROM cursors WHERE namespace = ${namespace} AND watcher_key = ${watcherKey} RETURNING *`)
      ).map(cursorFromRow);
      const session = watcherIdOfKey(watcherKey, namespace);
      const link = session === undefined ? undefined : await this.linkIn(ctx, session);
      if (link !== undefined) {
        ctx.send(sql`
          UPDATE upstream_links SET updated_at_ms = ${linkUpdatedAtAfterReset(link, nowMs)}
          WHERE namespace = ${link.session.namespace} AND agent_id = ${link.session.agentId} AND session_key = ${link.session.key}`);
      }
      return { value: removed.length, changes: pairChangesOfRemoved(removed) };
    });
  }

  async getCursors(pairs: readonly PairChange[]): Promise<CursorsRead> {
    return readThrough(this.db, cursorsOfPairs(pairs));
  }

  async pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): Promise<CursorsRead> {
    const [w, a, k] = pageStartIn(range, after);
    return readThrough(
      this.db,
      sql`
        SELECT * FROM cursors
        WHERE namespace = ${namespace} AND (watcher_key, target_agent_id, target_key) > (${w}, ${a}, ${k})
          AND watcher_key <= ${range.last} AND notified > acked
        ORDER BY watcher_key, target_agent_id, target_key LIMIT ${limit}`,
      true,
    );
  }

  ackNotices(acks: readonly AckInput[], nowMs: number): Promise<AckOutcome[]> {
    const hints: WriteHints = { targets: acks.map((ack) => ack.target) };
    return this.writes.enqueue(async (ctx) => {
      const pairs = new Map<string, CursorRecord>();
      const readUpFront = acks.every((ack) => ctx.cursorsOn(ack.target) !== undefined);
      if (readUpFront) {
        for (const ack of acks) {
          for (const cursor of ctx.cursorsOn(ack.target)!) pairs.set(pairKeyOf(cursor.watcherKey, cursor.target), cursor);
        }
      } else if (acks.length > 0) {
        for (const row of await ctx.tx.query<CursorRow>(cursorsOfPairs(acks))) {
          const cursor = cursorFromRow(row);
          pairs.set(pairKeyOf(cursor.watcherKey, cursor.target), cursor);
        }
      }
      const effects = applyAcks(acks, (watcherKey, target) => pairs.get(pairKeyOf(watcherKey, target)), nowMs);
      this.putCursors(ctx, effects.cursorWrites);
      return { value: effects.outcomes, changes: effects.pairChanges };
    }, hints);
  }

  adopt(input: AdoptInput): Promise<{ event: StoredEvent; link?: LinkRecord }> {
    return this.runWrite(async (ctx): Promise<WriteResult<{ event: StoredEvent; link?: LinkRecord }>> => {
      const appended = await this.appendIn(ctx, input.adoptedEvent);
      const adoption = planAdoption(appended.value, input.link === undefined ? undefined : await this.linkIn(ctx, input.link.session), input);
      const { link } = adoption;
      if (link === undefined) return { value: adoption, changes: appended.changes };
      // A local transcript is a file on this replica's host: only this node id scans it.
      const nodeId = isLocalTranscript(link) ? this.options.nodeId : null;
      ctx.send(sql`
        INSERT INTO upstream_links (namespace, agent_id, session_key, catalog_id, host_id, thread_id, source, marker, missed_checks,
          last_scanned_at_ms, updated_at_ms, node_id)
        VALUES (${link.session.namespace}, ${link.session.agentId}, ${link.session.key}, ${link.catalogId}, ${link.hostId},
          ${link.threadId}, ${link.source}, ${link.marker}, ${link.missedChecks}, ${link.lastScannedAtMs ?? null}, ${link.updatedAtMs}, ${nodeId})
        ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
        SET catalog_id = excluded.catalog_id, host_id = excluded.host_id, thread_id = excluded.thread_id,
            source = excluded.source, marker = excluded.marker, missed_checks = excluded.missed_checks,
            last_scanned_at_ms = excluded.last_scanned_at_ms, updated_at_ms = excluded.updated_at_ms, node_id = excluded.node_id`);
      return { value: adoption, changes: appended.changes };
    });
  }

  async getLink(session: SessionId): Promise<LinkRecord | undefined> {
    const [row] = await this.db.query<LinkRow>(sql`
      SELECT * FROM upstream_links WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
    return row === undefined ? undefined : linkFromRow(row);
  }

  async listLinks(filter: Parameters<Store["listLinks"]>[0]): Promise<LinkRecord[]> {
    const start = sessionPageStart(filter.agentId, filter.after);
    const rows =
      filter.agentId === undefined
        ? await this.db.query<LinkRow>(sql`
            SELECT * FROM upstream_links WHERE namespace = ${filter.namespace} AND (agent_id, session_key) > (${start.agentId}, ${start.key})
            ORDER BY agent_id, session_key LIMIT ${filter.limit}`)
        : await this.db.query<LinkRow>(sql`
            SELECT * FROM upstream_links WHERE namespace = ${filter.namespace} AND agent_id = ${filter.agentId} AND session_key > ${start.key}
            ORDER BY session_key LIMIT ${filter.limit}`);
    return rows.map(linkFromRow);
  }

  /**
   * Watched links that this replica may scan (paired-node links, and local transcripts adopted on this node
   * id), of `namespace` or of every namespace.
   */
  async watchedLinks(namespace?: string): Promise<LinkRecord[]> {
    const rows = await this.db.query<LinkRow>(sql`
      SELECT * FROM upstream_links AS l
      WHERE (l.node_id IS NULL OR l.node_id = ${this.options.nodeId})
        ${namespace === undefined ? sql`` : sql`AND l.namespace = ${namespace}`}
        AND EXISTS (SELECT 1 FROM cursors AS c
          WHERE c.namespace = l.namespace AND c.target_agent_id = l.agent_id AND c.target_key = l.session_key)
      ORDER BY namespace, agent_id, session_key`);
    return rows.map(linkFromRow);
  }

  commitScan(scanned: LinkRecord, commit: ScanCommit): Promise<{ committed: boolean; event?: StoredEvent }> {
    return this.runWrite(async (ctx): Promise<WriteResult<{ committed: boolean; event?: StoredEvent }>> => {
      const [runRow] = await ctx.tx.query<RunFlagRow>(sql`
        SELECT active, starts, refreshed_at_ms FROM run_flags
        WHERE namespace = ${scanned.session.namespace} AND agent_id = ${scanned.session.agentId} AND session_key = ${scanned.session.key}`);
      const runFlag = runRow === undefined ? undefined : runFlagFromRow(runRow);
      const plan = planScanCommit(await this.linkIn(ctx, scanned.session), scanned, commit, runFlag);
      if (plan.action === "discard") return { value: { committed: false }, changes: [] };
      const appended = plan.append === undefined ? undefined : await this.appendIn(ctx, plan.append);
      if (plan.link === "remove") await this.removeLink(ctx, scanned.session);
      else {
        ctx.send(sql`
          UPDATE upstream_links SET marker = ${plan.link.marker}, missed_checks = ${plan.link.missedChecks}, last_scanned_at_ms = ${plan.link.scannedAtMs}
          WHERE namespace = ${scanned.session.namespace} AND agent_id = ${scanned.session.agentId} AND session_key = ${scanned.session.key}`);
      }
      return { value: scanCommitOutcome(appended?.value), changes: appended?.changes ?? [] };
    });
  }

  setRunActive(session: SessionId, active: boolean, nowMs: number): Promise<void> {
    return this.runWrite(async (ctx) => {
      const [row] = await ctx.tx.query<RunFlagRow>(sql`
        SELECT active, starts, refreshed_at_ms FROM run_flags WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
      const flag = runFlagAfter(row === undefined ? undefined : runFlagFromRow(row), active, nowMs);
      ctx.send(sql`
        INSERT INTO run_flags (namespace, agent_id, session_key, active, starts, refreshed_at_ms)
        VALUES (${session.namespace}, ${session.agentId}, ${session.key}, ${flag.active}, ${flag.starts}, ${flag.refreshedAtMs})
        ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
        SET active = excluded.active, starts = excluded.starts, refreshed_at_ms = excluded.refreshed_at_ms`);
      return { value: undefined, changes: [] };
    });
  }

  async runFlag(session: SessionId): Promise<RunFlag | undefined> {
    const [row] = await this.db.query<RunFlagRow>(sql`
      SELECT active, starts, refreshed_at_ms FROM run_flags WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`);
    return row === undefined ? undefined : runFlagFromRow(row);
  }

  recordOwnText(session: SessionId, digest: string, keep: number): Promise<void> {
    return this.runWrite(async (ctx) => {
      const [{ newest }] = (await ctx.tx.query<{ newest: number }>(sql`
        SELECT coalesce(max(position), 0) AS newest FROM own_texts
        WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key}`)) as unknown as [{ newest: number }];
      const { position, trimThrough } = planOwnText(newest, keep);
      ctx.send(sql`
        INSERT INTO own_texts (namespace, agent_id, session_key, position, digest)
        VALUES (${session.namespace}, ${session.agentId}, ${session.key}, ${position}, ${digest})`);
      ctx.send(sql`
        DELETE FROM own_texts WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key} AND position <= ${trimThrough}`);
      return { value: undefined, changes: [] };
    });
  }

  async ownTextDigests(session: SessionId): Promise<string[]> {
    const rows = await this.db.query<{ digest: string }>(sql`
      SELECT digest FROM own_texts WHERE namespace = ${session.namespace} AND agent_id = ${session.agentId} AND session_key = ${session.key} ORDER BY position`);
    return rows.map((row) => row.digest);
  }

  async countPendingNotices(): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(sql`SELECT coalesce(sum(pending_notices), 0)::int8 AS n FROM namespaces`);
    return row!.n;
  }

  /**
   * One bounded retention step under the clock lock, so it is ordered with every other write: events
   * older than the cutoff, then each namespace's oldest beyond `maxEvents` (each session's watermark raised to what it
   * loses, in the same statement), untouched cursors, and feed rows no replica needs any more.
   */
  pruneStep(policy: RetentionPolicy): Promise<PruneStep> {
    return this.runWrite(async (ctx) => {
      ctx.forgetPrefetched();
      const { tx } = ctx;
      // Each statement of the step walks an index in its order and stops at its LIMIT, so a step costs the
      // rows it removes. The planner could prefer to scan a whole table (with statistics that lag a bulk
      // load, or a LIMIT it expects to fill early: at 100,000 events, 10 ms a statement): for this step's
      // statements, it may not.
      ctx.send(sql`SET LOCAL enable_seqscan = off`);
      ctx.send(sql`SET LOCAL enable_bitmapscan = off`);
      const removeEvents = async (chosen: SqlQuery): Promise<number> => {
        const [row] = await tx.query<{ n: number }>(sql`
          WITH gone AS (DELETE FROM events WHERE sequence IN (${chosen}) RETURNING sequence, session_id),
          marks AS (SELECT session_id, max(sequence) AS through FROM gone GROUP BY session_id),
          raised AS (
            UPDATE heads SET pruned_through = greatest(heads.pruned_through, marks.through)
            FROM marks WHERE heads.session_id = marks.session_id RETURNING 1
          )
          SELECT count(*)::int8 AS n FROM gone`);
        return row!.n;
      };
      let eventsRemoved = await removeEvents(
        pruneChoices.olderThan(policy.cutoffMs, policy.maxRowsPerStep),
      );
      const counts = pruneNeedsCounts(policy, eventsRemoved)
        ? await tx.query<NamespaceCount>(sql`SELECT namespace, events AS n FROM namespaces WHERE events > ${policy.maxEvents} ORDER BY namespace`)
        : [];
      for (const { namespace, count } of planNamespaceTrim(counts, policy, eventsRemoved)) {
        eventsRemoved += await removeEvents(pruneChoices.oldestOf(namespace, count));
      }
      const removed = (
        await tx.query<CursorRow>(sql`
          DELETE FROM cursors WHERE (namespace, watcher_key, target_agent_id, target_key) IN (
            ${pruneChoices.untouchedCursors(policy.cutoffMs, pruneCursorBudget(policy, eventsRemoved))}
          ) RETURNING *`)
      ).map(cursorFromRow);
      // The feed's oldest rows, as many as the step may remove, by the change number's index: never a scan.
      ctx.send(sql`DELETE FROM pair_changes WHERE change_seq IN (${pruneChoices.oldFeedRows(this.options.nowMs() - pairChangesKeptMs, policy.maxRowsPerStep)})`);
      ctx.send(sql`SET LOCAL enable_seqscan TO DEFAULT`);
      ctx.send(sql`SET LOCAL enable_bitmapscan TO DEFAULT`);
      // Which sessions lost events or had their watermark raised is not read back: every answer may have changed.
      if (eventsRemoved > 0) ctx.everySessionChanged();
      return { value: pruneStepOutcome(policy, eventsRemoved, removed.length), changes: pairChangesOfRemoved(removed) };
    });
  }

  /**
   * Takes or renews the lease of `job` for `holder` until `ttlMs` from the database's now; true while
   * `holder` holds it. A lease whose holder stopped renewing it passes to the next replica that asks.
   */
  async tryLease(job: string, holder: string, ttlMs: number): Promise<boolean> {
    const rows = await this.db.query(sql`
      INSERT INTO leases (job, holder, epoch, expires_at) VALUES (${job}, ${holder}, 1, now() + ${ttlMs} * interval '1 millisecond')
      ON CONFLICT (job) DO UPDATE
      SET holder = excluded.holder, expires_at = excluded.expires_at,
          epoch = leases.epoch + CASE WHEN leases.holder = excluded.holder THEN 0 ELSE 1 END
      WHERE leases.holder = excluded.holder OR leases.expires_at < now()
      RETURNING epoch`);
    return rows.length > 0;
  }

  /** The size of the schema's tables and indexes, as `db`. */
  async databaseBytes(): Promise<[string, number][]> {
    const [row] = await this.db.query<{ bytes: number }>(sql`
      SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 AS bytes
      FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
      WHERE n.nspname = ${this.options.schema} AND c.relkind = 'r'`);
    return [["db", row!.bytes]];
  }

  /** Gives up every lease `holder` holds, so another replica may take its jobs at once (graceful stop). */
  async releaseLeases(holder: string): Promise<void> {
    await this.db.query(sql`DELETE FROM leases WHERE holder = ${holder}`);
  }

  /**
   * Closes the store within about `timeoutMs` whatever the database does: writes in flight settle (each
   * has the round-trip deadline, and none waits while the database is away), the feed stops, and every
   * connection is ended, or destroyed if it does not end in time.
   */
  async close(timeoutMs = 2500): Promise<void> {
    const stopByMs = performance.now() + timeoutMs;
    const remainingMs = (): number => Math.max(0, stopByMs - performance.now());
    // A database that does not answer gets no goodbye: its connections are destroyed at once, which fails
    // whatever still waits on them. One that answers lets the writes in flight settle first.
    const reachable = this.db.isReachable;
    const closing = reachable ? undefined : this.db.close(0);
    const feedStopped = this.feed?.stop();
    await settleWithin(remainingMs(), Promise.all([this.writes.idle(), reachable ? feedStopped : undefined]));
    this.listeners.clear();
    this.gapListeners.clear();
    await (closing ?? this.db.close(remainingMs()));
  }
}
