import type { PairChange } from "../../domain/records.js";
import type { ClaimRow, ClaimTake } from "../store.js";
import type { PostgresDatabase } from "./connection.js";
import { sql, type Queryable, type SqlQuery } from "./pg-sql.js";

/** Pairs as four arrays for `unnest`: namespace, watcher key, target agent, target key. */
function pairColumns(pairs: readonly PairChange[]): SqlQuery {
  return sql`${pairs.map((p) => p.target.namespace)}::text[], ${pairs.map((p) => p.watcherKey)}::text[],
             ${pairs.map((p) => p.target.agentId)}::text[], ${pairs.map((p) => p.target.key)}::text[]`;
}

/** An incarnation that holds claims now: its row has not expired. */
function isAlive(incarnation: SqlQuery | string): SqlQuery {
  return sql`EXISTS (SELECT 1 FROM claim_holders AS h WHERE h.incarnation = ${incarnation} AND h.expires_at > now())`;
}

interface ClaimRowRead {
  namespace: string;
  group_name: string;
  watcher_key: string;
  target_agent_id: string;
  target_key: string;
  notified: number;
  delivery_count: number;
  generation: number;
  holder: string | null;
  peer: string | null;
  live: boolean;
}

function claimFromRow(row: ClaimRowRead): ClaimRow {
  const pair = { watcherKey: row.watcher_key, target: { namespace: row.namespace, agentId: row.target_agent_id, key: row.target_key } };
  return {
    group: row.group_name,
    pair,
    notified: row.notified,
    deliveryCount: row.delivery_count,
    generation: row.generation,
    ...(row.live && row.holder !== null ? { holder: row.holder, peer: row.peer ?? "" } : {}),
  };
}

/** The pairs of freed claims, as the feed tells them to their group's members. */
interface FreedRow {
  namespace: string;
  group_name: string;
  watcher_key: string;
  target_agent_id: string;
  target_key: string;
}

function freedPair(row: FreedRow): PairChange {
  return { watcherKey: row.watcher_key, target: { namespace: row.namespace, agentId: row.target_agent_id, key: row.target_key }, group: row.group_name };
}

const freedColumns = sql`namespace, group_name, watcher_key, target_agent_id, target_key`;
const cleared = sql`claim_id = NULL, holder = NULL, incarnation = NULL, peer = NULL, generation = notice_claims.generation + 1`;

/**
 * Statements over `claim_holders` and `notice_claims` (SPEC §6.1 across replicas): the incarnations that may
 * hold claims, and per group and pair the claim on its pending notice. A take is a compare-and-set on the
 * row's generation by a live incarnation, so two members never both win one notice; the rule a take
 * follows is the domain's (domain/consumer-group), applied to the row as read.
 */
export class ClaimTables {
  constructor(private readonly db: PostgresDatabase) {}

  /** Starts an incarnation, alive for `ttlMs` from the database's now. */
  async startHolder(incarnation: string, ttlMs: number): Promise<void> {
    await this.db.query(sql`INSERT INTO claim_holders (incarnation, expires_at) VALUES (${incarnation}, now() + ${ttlMs} * interval '1 millisecond')`);
  }

  /** Extends a live incarnation by `ttlMs` from now; false when it had expired (it stays dead). */
  async renewHolder(incarnation: string, ttlMs: number): Promise<boolean> {
    const rows = await this.db.query(sql`
      UPDATE claim_holders SET expires_at = now() + ${ttlMs} * interval '1 millisecond'
      WHERE incarnation = ${incarnation} AND expires_at > now() RETURNING 1`);
    return rows.length > 0;
  }

  /**
   * Ends an incarnation now (a graceful stop): its row goes when it holds nothing; else it expires, and what
   * it still holds is freed by the next sweep.
   */
  async endHolder(incarnation: string): Promise<void> {
    await this.db.query(sql`
      DELETE FROM claim_holders WHERE incarnation = ${incarnation} AND NOT EXISTS (SELECT 1 FROM notice_claims WHERE incarnation = ${incarnation})`);
    await this.db.query(sql`UPDATE claim_holders SET expires_at = now() - interval '1 millisecond' WHERE incarnation = ${incarnation}`);
  }

  /** The claim rows of some pairs in a group (a holder only when its incarnation is alive). */
  async read(namespace: string, group: string, pairs: readonly PairChange[]): Promise<ClaimRow[]> {
    if (pairs.length === 0) return [];
    const rows = await this.db.query<ClaimRowRead>(sql`
      SELECT c.namespace, c.group_name, c.watcher_key, c.target_agent_id, c.target_key, c.notified, c.delivery_count, c.generation,
             c.holder, c.peer, c.incarnation IS NOT NULL AND ${isAlive(sql`c.incarnation`)} AS live
      FROM notice_claims AS c
      JOIN unnest(${pairColumns(pairs)}) AS t (n, w, a, k)
        ON c.namespace = t.n AND c.watcher_key = t.w AND c.target_agent_id = t.a AND c.target_key = t.k
      WHERE c.namespace = ${namespace} AND c.group_name = ${group}`);
    return rows.map(claimFromRow);
  }

  /** The held claims of some pairs, in every group of their namespaces. */
  async heldOf(pairs: readonly PairChange[]): Promise<ClaimRow[]> {
    if (pairs.length === 0) return [];
    const rows = await this.db.query<ClaimRowRead>(sql`
      SELECT c.namespace, c.group_name, c.watcher_key, c.target_agent_id, c.target_key, c.notified, c.delivery_count, c.generation,
             c.holder, c.peer, true AS live
      FROM notice_claims AS c
      JOIN unnest(${pairColumns(pairs)}) AS t (n, w, a, k)
        ON c.namespace = t.n AND c.watcher_key = t.w AND c.target_agent_id = t.a AND c.target_key = t.k
      WHERE c.claim_id IS NOT NULL AND ${isAlive(sql`c.incarnation`)}`);
    return rows.map(claimFromRow);
  }

  /**
   * Takes claims, each if its row is still as it was read (`expectedGeneration`, or undefined: there was
   * none), its notice is still pending as read, and the taker's incarnation is alive at this moment; in one
   * statement. The ids of the claims taken.
   */
  async take(takes: readonly ClaimTake[]): Promise<Set<string>> {
    if (takes.length === 0) return new Set();
    const column = <T>(pick: (take: ClaimTake) => T): T[] => takes.map(pick);
    const rows = await this.db.query<{ claim_id: string }>(sql`
      WITH t AS (
        SELECT * FROM unnest(
          ${column((x) => x.pair.target.namespace)}::text[], ${column((x) => x.group)}::text[], ${column((x) => x.pair.watcherKey)}::text[],
          ${column((x) => x.pair.target.agentId)}::text[], ${column((x) => x.pair.target.key)}::text[], ${column((x) => x.notified)}::int8[],
          ${column((x) => x.deliveryCount)}::int4[], ${column((x) => x.expectedGeneration ?? null)}::int8[], ${column((x) => x.claimId)}::text[],
          ${column((x) => x.holder)}::text[], ${column((x) => x.incarnation)}::text[], ${column((x) => x.peer)}::text[]
        ) AS t (n, g, w, a, k, notified, delivery_count, generation, claim_id, holder, incarnation, peer)
        WHERE ${isAlive(sql`t.incarnation`)}
          AND EXISTS (SELECT 1 FROM cursors AS u WHERE u.namespace = t.n AND u.watcher_key = t.w AND u.target_agent_id = t.a
                        AND u.target_key = t.k AND u.notified = t.notified AND u.notified > u.acked)
      ), updated AS (
        UPDATE notice_claims AS c
        SET notified = t.notified, delivery_count = t.delivery_count, generation = c.generation + 1,
            claim_id = t.claim_id, holder = t.holder, incarnation = t.incarnation, peer = t.peer
        FROM t
        WHERE t.generation IS NOT NULL AND c.namespace = t.n AND c.group_name = t.g AND c.watcher_key = t.w
          AND c.target_agent_id = t.a AND c.target_key = t.k AND c.generation = t.generation
        RETURNING c.claim_id
      ), inserted AS (
        INSERT INTO notice_claims (namespace, group_name, watcher_key, target_agent_id, target_key, notified, delivery_count, generation, claim_id, holder, incarnation, peer)
        SELECT n, g, w, a, k, notified, delivery_count, 1, claim_id, holder, incarnation, peer FROM t WHERE t.generation IS NULL
        ON CONFLICT DO NOTHING
        RETURNING claim_id
      )
      SELECT claim_id FROM updated UNION ALL SELECT claim_id FROM inserted`);
    return new Set(rows.map((row) => row.claim_id));
  }

  /** Frees held claims by id (inside a write: the pairs it returns are told to their groups). */
  async free(q: Queryable, claimIds: readonly string[]): Promise<PairChange[]> {
    if (claimIds.length === 0) return [];
    const rows = await q.query<FreedRow>(sql`UPDATE notice_claims SET ${cleared} WHERE claim_id = ANY(${claimIds}::text[]) RETURNING ${freedColumns}`);
    return rows.map(freedPair);
  }

  /** Forgets a claim whose notice is no longer pending as claimed (nobody needs to be told). */
  async forget(claimId: string): Promise<void> {
    await this.db.query(sql`DELETE FROM notice_claims WHERE claim_id = ${claimId}`);
  }

  /** Up to `limit` incarnations that have expired. */
  async expiredHolders(limit: number): Promise<string[]> {
    const rows = await this.db.query<{ incarnation: string }>(sql`SELECT incarnation FROM claim_holders WHERE expires_at <= now() LIMIT ${limit}`);
    return rows.map((row) => row.incarnation);
  }

  /**
   * Frees every claim of some expired incarnations and forgets them (inside a write: the pairs it returns
   * are told to their groups). An incarnation that is alive again cannot be among them: none is ever renewed
   * once expired.
   */
  async freeExpired(q: Queryable, incarnations: readonly string[]): Promise<PairChange[]> {
    const rows = await q.query<FreedRow>(sql`
      UPDATE notice_claims SET ${cleared}
      WHERE incarnation = ANY(${incarnations}::text[]) RETURNING ${freedColumns}`);
    await q.query(sql`DELETE FROM claim_holders WHERE incarnation = ANY(${incarnations}::text[]) AND expires_at <= now()`);
    return rows.map(freedPair);
  }

  /** Removes up to `limit` free claim rows whose notice is no longer pending as claimed (acknowledged while nobody held it). */
  async removeSettled(limit: number): Promise<number> {
    const rows = await this.db.query(sql`
      DELETE FROM notice_claims WHERE ctid IN (
        SELECT c.ctid FROM notice_claims AS c
        WHERE c.claim_id IS NULL AND NOT EXISTS (
          SELECT 1 FROM cursors AS u
          WHERE u.namespace = c.namespace AND u.watcher_key = c.watcher_key AND u.target_agent_id = c.target_agent_id
            AND u.target_key = c.target_key AND u.notified = c.notified AND u.notified > u.acked)
        LIMIT ${limit})
      RETURNING 1`);
    return rows.length;
  }
}
