import type { Sql } from "postgres";
import type { PairChange } from "../domain/records.js";

/** The safety net: the feed reads new changes this often even when no notification arrived. */
export const feedPollIntervalMs = 2000;
/** Rows read per catch-up query. */
const catchUpRows = 5000;

interface ChangeRow {
  change_seq: number;
  watcher_key: string;
  target_agent_id: string;
  target_key: string;
}

/**
 * The pairs other replicas changed (SPEC §11 "Notices everywhere"). Every write transaction that changes
 * pairs stores them in `pair_changes` under its change number and sends one `pg_notify` with it; since
 * the number comes from the locked clock row, commit order is number order. This feed LISTENs first and
 * then reads every row above the last number it read, in order: on each notification, after every
 * (re)LISTEN (notifications sent while disconnected are lost), and on a timer. Changes this replica
 * committed itself were announced at commit and are skipped here.
 */
export class PairChangeFeed {
  private lastSeq: number;
  private readonly own = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly channel: string,
    startAfterSeq: number,
    private readonly announce: (changes: readonly PairChange[]) => void,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    this.lastSeq = startAfterSeq;
  }

  /** Starts listening (resolves once the first LISTEN is in place) and the safety timer. */
  async start(): Promise<void> {
    const listening = await this.sql.listen(
      this.channel,
      () => this.catchUp(),
      () => this.catchUp(),
    );
    this.unlisten = listening.unlisten;
    this.timer = setInterval(() => this.catchUp(), feedPollIntervalMs);
    this.timer.unref();
  }

  /** A change number this replica committed and announced itself. */
  markOwn(changeSeq: number): void {
    if (changeSeq > this.lastSeq) this.own.add(changeSeq);
  }

  /** Reads what is new now (one read at a time; a request during a read runs once more after it). */
  catchUp(): void {
    if (this.stopped) return;
    if (this.reading !== undefined) {
      this.again = true;
      return;
    }
    this.reading = this.readNew()
      .catch((error: unknown) => this.onError(error))
      .finally(() => {
        this.reading = undefined;
        if (this.again) {
          this.again = false;
          this.catchUp();
        }
      });
  }

  /** Resolves when the read in progress (and any it asked for) is done. */
  async settled(): Promise<void> {
    while (this.reading !== undefined) await this.reading;
  }

  private async readNew(): Promise<void> {
    for (;;) {
      // Whole change numbers only: up to the number of the 5,000th new row, with every row it has.
      const rows = await this.sql<ChangeRow[]>`
        SELECT change_seq, watcher_key, target_agent_id, target_key FROM pair_changes
        WHERE change_seq > ${this.lastSeq} AND change_seq <= (
          SELECT max(change_seq) FROM (
            SELECT change_seq FROM pair_changes WHERE change_seq > ${this.lastSeq} ORDER BY change_seq LIMIT ${catchUpRows}
          ) AS next
        )
        ORDER BY change_seq`;
      if (rows.length === 0 || this.stopped) return;
      const changes: PairChange[] = [];
      for (const row of rows) {
        if (this.own.has(row.change_seq)) continue;
        changes.push({ watcherKey: row.watcher_key, target: { agentId: row.target_agent_id, key: row.target_key } });
      }
      this.lastSeq = rows.at(-1)!.change_seq;
      for (const seq of this.own) if (seq <= this.lastSeq) this.own.delete(seq);
      this.announce(changes);
      if (rows.length < catchUpRows) return;
    }
  }

  /** Stops listening and reading. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.settled();
    await this.unlisten?.().catch(() => undefined);
  }
}
