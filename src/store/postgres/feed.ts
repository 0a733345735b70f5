import type pg from "pg";
import type { PairChange } from "../../domain/records.js";
import type { ClockTables, StatusChanges } from "./clock-tables.js";
import { DatabaseUnreachableError, type PostgresDatabase } from "./connection.js";
import { destroyClient } from "./driver-internals.js";

/** The safety net: the feed reads new changes this often even when no notification arrived. */
export const feedPollIntervalMs = 2000;
/** Rows read per catch-up query. */
const catchUpRows = 5000;
/** Reconnecting the listening connection: first after this, doubling up to the most, with jitter. */
const reconnectFirstMs = 50;
const reconnectMostMs = 1000;

/** The pairs one commit changed, under its change number. */
export interface NumberedChanges {
  changeNumber: number;
  pairs: PairChange[];
}

/** What the feed tells the store. */
export interface FeedListener {
  /** Pairs (by commit, in commit order) and sessions other replicas (or this one, unannounced) changed. */
  changes(changes: readonly NumberedChanges[], status: StatusChanges): void;
  /** Changes were missed for good (pruned before they were read): every pending pair must be read again. */
  gap(): void;
  /** A read failed; it is tried again on the next wake-up or tick. */
  error(error: unknown): void;
}

/**
 * The pairs other replicas changed (SPEC §11 "Notices everywhere"). Every write transaction that changes
 * pairs stores them in `pair_changes` under its change number and sends one `pg_notify` with it; since
 * the number comes from the locked clock row, commit order is number order and every number has rows.
 * This feed LISTENs on a connection of its own and reads every row above the last number it read, in
 * order: on each notification, after every (re)LISTEN (notifications sent while disconnected are lost),
 * and on a timer. A number missing below the clock's means its rows were pruned before this replica read
 * them: it reports a gap. Changes this replica committed and announced itself are skipped; a number it
 * reserved and never announced (a failed commit, or one whose outcome it never learned) is read like any
 * other. The listening connection is pinged every `pingIntervalMs`; one that does not answer within
 * `pingDeadlineMs` is replaced, and the database marked unreachable.
 */
export class PairChangeFeed {
  private lastSeq: number;
  /** Change numbers of this replica's commits in flight or announced: true once announced by it. */
  private readonly own = new Map<number, Promise<boolean>>();
  private client: pg.Client | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectAttempts = 0;
  private reading: Promise<void> | undefined;
  /** Reads begun so far; a waiter of `heardAll` is settled by the first read numbered above its `after`. */
  private readsStarted = 0;
  private waiters: { after: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private again = false;
  private stopped = false;

  constructor(
    private readonly db: PostgresDatabase,
    private readonly clock: ClockTables,
    startAfterSeq: number,
    private readonly listener: FeedListener,
  ) {
    this.lastSeq = startAfterSeq;
  }

  /** Connects and LISTENs (throws when the database cannot be reached), then keeps the connection alive. */
  async start(): Promise<void> {
    await this.connect();
    this.pollTimer = setInterval(() => this.catchUp(), feedPollIntervalMs);
    this.pollTimer.unref();
  }

  /**
   * A change number this replica is committing (its transaction holds the clock lock): the feed skips it
   * if `announced` resolves true, and reads it like any other otherwise.
   */
  reserveOwn(changeSeq: number): (announced: boolean) => void {
    let settle!: (announced: boolean) => void;
    this.own.set(changeSeq, new Promise((resolve) => (settle = resolve)));
    return (announced) => {
      settle(announced);
      if (!announced) this.own.delete(changeSeq);
    };
  }

  private async connect(): Promise<void> {
    const client = await this.db.connectClient("listener");
    const drop = (): void => this.drop(client, false);
    client.on("error", drop);
    client.on("end", drop);
    client.on("notification", (message) => {
      if (message.channel !== this.clock.channel) return;
      // This replica's own commit (the payload is its change number): its changes reached the listener at
      // once, so there is nothing to read unless it could not announce them. The next read passes it.
      const own = this.own.get(Number(message.payload));
      if (own === undefined) this.catchUp();
      else void own.then((announced) => !announced && this.catchUp());
    });
    try {
      await this.withDeadline(client, client.query(`LISTEN "${this.clock.channel}"`));
    } catch (error) {
      destroyClient(client);
      throw error;
    }
    if (this.stopped) {
      destroyClient(client);
      return;
    }
    this.client = client;
    this.reconnectAttempts = 0;
    this.schedulePing();
    // Whatever was committed while nobody listened.
    this.catchUp();
  }

  /** `work` on the listening connection within `deadlineMs`; past it the connection is dropped. */
  private async withDeadline<T>(client: pg.Client, work: Promise<T>, deadlineMs = this.db.deadlines.roundTripMs): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.drop(client, true);
        reject(new Error("the listening connection did not answer in time"));
      }, deadlineMs);
    });
    try {
      return await Promise.race([work, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  private schedulePing(): void {
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => {
      const client = this.client;
      if (client === undefined || this.stopped) return;
      this.withDeadline(client, client.query("SELECT 1"), this.db.deadlines.pingDeadlineMs).then(
        () => this.schedulePing(),
        () => undefined, // dropped: reconnecting
      );
    }, this.db.deadlines.pingIntervalMs);
    this.pingTimer.unref();
  }

  /** Forgets a failed listening connection and connects again; a silent one means the database is away. */
  private drop(client: pg.Client, timedOut: boolean): void {
    destroyClient(client);
    if (this.client !== client) return;
    this.client = undefined;
    clearTimeout(this.pingTimer);
    if (timedOut) this.db.markUnreachable();
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    clearTimeout(this.reconnectTimer);
    const delayMs = Math.min(reconnectMostMs, reconnectFirstMs * 2 ** this.reconnectAttempts++) * (0.5 + Math.random() / 2);
    this.reconnectTimer = setTimeout(() => {
      this.connect().catch((error: unknown) => {
        this.db.markUnreachable();
        this.listener.error(error);
        this.scheduleReconnect();
      });
    }, delayMs);
    this.reconnectTimer.unref();
  }

  /** Reads what is new now (one read at a time; a request during a read runs once more after it). */
  catchUp(): void {
    if (this.stopped) return;
    if (this.reading !== undefined) {
      this.again = true;
      return;
    }
    const index = ++this.readsStarted;
    this.reading = this.readNew()
      .then(
        () => this.settleWaiters(index, undefined),
        (error: unknown) => {
          this.settleWaiters(index, error);
          this.listener.error(error);
        },
      )
      .finally(() => {
        this.reading = undefined;
        if (this.again) {
          this.again = false;
          this.catchUp();
        }
      });
  }

  /**
   * Resolves once this feed has told its listener of every change committed before the call: when a read
   * that began after it has read to the end. Calls at the same time share that read. Rejects with the
   * read's error when it fails, or when the feed stops.
   */
  heardAll(): Promise<void> {
    if (this.stopped) return Promise.reject(new DatabaseUnreachableError("the feed of changes is stopped"));
    return new Promise((resolve, reject) => {
      this.waiters.push({ after: this.readsStarted, resolve, reject });
      this.catchUp();
    });
  }

  /** Settles the waiters that read `index` began after: it read to the end, or failed with `error`. */
  private settleWaiters(index: number, error: unknown): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const waiter of waiting) {
      if (waiter.after >= index) this.waiters.push(waiter);
      else if (error === undefined && !this.stopped) waiter.resolve();
      else waiter.reject(error ?? new DatabaseUnreachableError("the feed of changes is stopped"));
    }
  }

  /**
   * The change number up to which every commit has been told to the listener (or was this replica's own,
   * announced before its reservation settled): no change numbered this low or lower is still to come.
   */
  get heardThrough(): number {
    return this.lastSeq;
  }

  /** Resolves when the read in progress (and any it asked for) is done. */
  async settled(): Promise<void> {
    while (this.reading !== undefined) await this.reading;
  }

  private async readNew(): Promise<void> {
    for (;;) {
      const rows = await this.clock.readAfter(this.db, this.lastSeq, catchUpRows);
      if (this.stopped || rows.length === 0) return;
      const head = rows[0]!.head;
      const first = rows[0]!.change_seq;
      const gap = (first === null && head > this.lastSeq) || (first !== null && first > this.lastSeq + 1);
      const changes: NumberedChanges[] = [];
      const status: StatusChanges = { sessions: [], all: false };
      let skipping: number | undefined;
      let read = this.lastSeq;
      for (const row of rows) {
        if (row.change_seq === null) continue;
        if (row.change_seq !== read) {
          read = row.change_seq;
          // A commit of this replica's that it announced itself (before settling its reservation) is skipped.
          const own = this.own.get(read);
          skipping = own !== undefined && (await own) ? read : undefined;
        }
        if (skipping === read) continue;
        const target = { namespace: row.namespace, agentId: row.target_agent_id, key: row.target_key };
        if (row.watcher_key !== "") {
          if (changes.at(-1)?.changeNumber !== read) changes.push({ changeNumber: read, pairs: [] });
          changes.at(-1)!.pairs.push(row.group_name === "" ? { watcherKey: row.watcher_key, target } : { watcherKey: row.watcher_key, target, group: row.group_name });
        } else if (row.namespace === "") status.all = true;
        else status.sessions.push(target);
      }
      if (gap) this.listener.gap();
      if (changes.length > 0 || status.all || status.sessions.length > 0) this.listener.changes(changes, status);
      // Passed only once told: whoever reads `heardThrough` may rely on every change up to it being heard.
      this.lastSeq = gap && first === null ? head : read;
      for (const seq of this.own.keys()) if (seq <= this.lastSeq) this.own.delete(seq);
      if (rows.length < catchUpRows) return;
    }
  }

  /**
   * Stops listening and reading at once and closes the listening connection; resolves when a read in
   * progress is over (its result is dropped).
   */
  stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.pingTimer);
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) destroyClient(client);
    this.settleWaiters(Number.POSITIVE_INFINITY, new DatabaseUnreachableError("the feed of changes is stopped"));
    return this.settled();
  }
}
