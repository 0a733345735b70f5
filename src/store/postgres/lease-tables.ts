import type { PostgresDatabase } from "./connection.js";
import { sql } from "./pg-sql.js";

/** Statements over `leases`: jobs that run on one replica at a time (retention; the monitor of a node id). */
export class LeaseTables {
  constructor(private readonly db: PostgresDatabase) {}

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

  /** Gives up every lease `holder` holds, so another replica may take its jobs at once. */
  async releaseAll(holder: string): Promise<void> {
    await this.db.query(sql`DELETE FROM leases WHERE holder = ${holder}`);
  }
}
