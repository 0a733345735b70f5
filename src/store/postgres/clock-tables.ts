import type { PairChange } from "../../domain/records.js";
import type { SessionId } from "../../domain/session-key.js";
import type { PgTransaction } from "./connection.js";
import { sql, type Queryable, type SqlQuery } from "./pg-sql.js";

/** Sessions whose SessionStatus answer a commit may have changed: some, or every one (a prune step). */
export interface StatusChanges {
  sessions: SessionId[];
  all: boolean;
}

/** The clock row as a write transaction locks it: the last event sequence and change number handed out. */
export interface ClockRow {
  eventSeq: number;
  changeSeq: number;
}

/** A row of `pair_changes` as the feed reads it, with the clock's change number of the same snapshot. */
export interface FeedRow {
  /** The clock's change number when the rows were read. */
  head: number;
  change_seq: number | null;
  namespace: string;
  watcher_key: string;
  target_agent_id: string;
  target_key: string;
  group_name: string;
}

/**
 * The rows of `pair_changes` for one commit. A pair's row names its watcher; a row with an empty watcher
 * key (never a watcher's: keys are validated non-empty) says its session's SessionStatus answer changed,
 * and one whose every name is empty says every session's did.
 */
function feedRowsFromChanges(pairs: readonly PairChange[], status: StatusChanges): { n: string[]; w: string[]; a: string[]; k: string[]; g: string[] } {
  const rows = { n: [] as string[], w: [] as string[], a: [] as string[], k: [] as string[], g: [] as string[] };
  const push = (n: string, w: string, a: string, k: string, g = ""): void => {
    rows.n.push(n);
    rows.w.push(w);
    rows.a.push(a);
    rows.k.push(k);
    rows.g.push(g);
  };
  for (const pair of pairs) push(pair.target.namespace, pair.watcherKey, pair.target.agentId, pair.target.key, pair.group);
  if (status.all) push("", "", "", "");
  else for (const session of status.sessions) push(session.namespace, "", session.agentId, session.key);
  return rows;
}

/**
 * Statements over the `clock` row and the `pair_changes` feed (SPEC §11). Every write transaction locks the
 * clock first, takes its event sequences and its change number from it and updates it before COMMIT, so
 * commit order is sequence order; a transaction that changed pairs or sessions records them in
 * `pair_changes` under its change number and wakes every replica with one `pg_notify` of it.
 */
export class ClockTables {
  constructor(
    /** The channel every replica of the schema LISTENs on. */
    readonly channel: string,
  ) {}

  /** Locks the clock row for the rest of the transaction and reads it. */
  async lock(tx: PgTransaction): Promise<ClockRow> {
    const [row] = await tx.query<{ event_seq: number; change_seq: number }>(sql`SELECT event_seq, change_seq FROM clock WHERE id = 1 FOR UPDATE`);
    return { eventSeq: row!.event_seq, changeSeq: row!.change_seq };
  }

  /** The last change number handed out, as committed. */
  async changeNumber(q: Queryable): Promise<number> {
    const [row] = await q.query<{ change_seq: number }>(sql`SELECT change_seq FROM clock WHERE id = 1`);
    return row!.change_seq;
  }

  /** Moves the clock to what the transaction handed out. */
  update(clock: ClockRow): SqlQuery {
    return sql`UPDATE clock SET event_seq = ${clock.eventSeq}, change_seq = ${clock.changeSeq} WHERE id = 1`;
  }

  /** True when a commit with these changes records feed rows (and so takes a change number). */
  hasFeedRows(pairs: readonly PairChange[], status: StatusChanges): boolean {
    return pairs.length > 0 || status.all || status.sessions.length > 0;
  }

  /** Records a commit's changes under `changeSeq`, and the notification that wakes every replica. */
  recordChanges(changeSeq: number, pairs: readonly PairChange[], status: StatusChanges, atMs: number): SqlQuery[] {
    const rows = feedRowsFromChanges(pairs, status);
    return [
      sql`
        INSERT INTO pair_changes (change_seq, namespace, watcher_key, target_agent_id, target_key, group_name, at_ms)
        SELECT ${changeSeq}, n, w, a, k, g, ${atMs}
        FROM unnest(${rows.n}::text[], ${rows.w}::text[], ${rows.a}::text[], ${rows.k}::text[], ${rows.g}::text[]) AS t (n, w, a, k, g)`,
      sql`SELECT pg_notify(${this.channel}, ${String(changeSeq)})`,
    ];
  }

  /**
   * The feed's rows above `afterSeq`, whole change numbers only: up to the number of the `rows`-th new row,
   * with every row it has; and the clock's number in the same snapshot, which tells whether any number
   * below it is missing (pruned before this replica read it).
   */
  readAfter(q: Queryable, afterSeq: number, rows: number): Promise<FeedRow[]> {
    return q.query<FeedRow>(sql`
      SELECT c.change_seq AS head, p.change_seq, p.namespace, p.watcher_key, p.target_agent_id, p.target_key, p.group_name
      FROM clock AS c LEFT JOIN LATERAL (
        SELECT change_seq, namespace, watcher_key, target_agent_id, target_key, group_name FROM pair_changes
        WHERE change_seq > ${afterSeq} AND change_seq <= (
          SELECT max(change_seq) FROM (
            SELECT change_seq FROM pair_changes WHERE change_seq > ${afterSeq} ORDER BY change_seq LIMIT ${rows}
          ) AS next
        )
      ) AS p ON true
      WHERE c.id = 1
      ORDER BY p.change_seq`);
  }

  /**
   * Removes the feed's rows older than `beforeMs` among its `limit` oldest, by the change number's index (a
   * retention step: it costs the rows it removes).
   */
  removeOld(beforeMs: number, limit: number): SqlQuery {
    return sql`DELETE FROM pair_changes WHERE change_seq IN (${oldFeedRows(beforeMs, limit)})`;
  }
}

/** The change numbers of the feed's rows older than `beforeMs` among its `limit` oldest. */
export function oldFeedRows(beforeMs: number, limit: number): SqlQuery {
  return sql`SELECT change_seq FROM (SELECT change_seq, at_ms FROM pair_changes ORDER BY change_seq LIMIT ${limit}) AS oldest WHERE at_ms < ${beforeMs}`;
}
