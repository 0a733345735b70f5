import { performance } from "node:perf_hooks";
import pg from "pg";
import type { Durability } from "../store.js";
import { rawSql, type SqlQuery } from "./pg-sql.js";
import type { PostgresTarget } from "./postgres-url.js";
import { destroyClient, isQueryable } from "./driver-internals.js";

/**
 * How long a replica waits for PostgreSQL (SPEC §11, "Faults between a replica and its database"): a
 * round trip that takes longer counts as the database being unreachable, so a call is answered within
 * 2 s whatever the network does. Server-side limits sit beside them so that a replica cut off inside a
 * transaction never holds the clock row for longer than the others wait for it.
 */
export interface PgDeadlines {
  /** A statement, or a whole write transaction, from the client's side. */
  roundTripMs: number;
  /** Opening a connection (libpq's `connect_timeout` in the URL sets it). */
  connectMs: number;
  /** `idle_in_transaction_session_timeout`: PostgreSQL ends a transaction whose client went silent. */
  idleInTransactionMs: number;
  /** `lock_timeout`: how long a statement waits for a lock; longer than a silent client can hold one. */
  lockWaitMs: number;
  /** While reachable: how often the listening connection is checked (it also tells an idle replica). */
  pingIntervalMs: number;
  /** How long that check may take: a trivial query, so shorter than a transaction's deadline. */
  pingDeadlineMs: number;
  /** While unreachable: how often a round trip is tried. */
  probeIntervalMs: number;
}

/**
 * A silent client's lock is freed (800 ms) before anyone waiting for it gives up (1,200 ms), and a lock
 * wait ends with PostgreSQL's answer (busy) before the client-side deadline (1,500 ms) would take it for
 * an unreachable database. A whole call then stays within SPEC §11's 2 s.
 */
export const defaultPgDeadlines: PgDeadlines = {
  roundTripMs: 1500,
  connectMs: 1500,
  idleInTransactionMs: 800,
  lockWaitMs: 1200,
  pingIntervalMs: 250,
  pingDeadlineMs: 1000,
  probeIntervalMs: 150,
};

/** What every fault that means "the database did not answer" is thrown as; the edge answers UNAVAILABLE. */
export class DatabaseUnreachableError extends Error {
  readonly code = "DATABASE_UNREACHABLE";

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DatabaseUnreachableError";
  }
}

/** Thrown when a transaction's COMMIT was sent and no answer came: it may or may not have been stored. */
export class CommitOutcomeUnknownError extends DatabaseUnreachableError {
  constructor(options?: { cause?: unknown }) {
    super("the connection was lost after COMMIT was sent: the outcome is unknown", options);
    this.name = "CommitOutcomeUnknownError";
  }
}

const beginQuery = rawSql("BEGIN");
const commitQuery = rawSql("COMMIT");
const probeQuery = rawSql("SELECT 1");

/** pg-pool's own message when no connection of a full pool came free in time: the pool is busy, not the database away. */
const poolWaitTimeoutMessage = "timeout exceeded when trying to connect";

/** int8 as a JavaScript number (node-postgres gives strings): sequences and times stay far below 2^53. */
const typeParsers = {
  getTypeParser: (oid: number, format?: string): ((value: string) => unknown) =>
    oid === 20 ? Number : (pg.types.getTypeParser as (oid: number, format?: string) => (value: string) => unknown)(oid, format),
};

/** SQLSTATEs that mean the server is ending or refusing the connection (class 08, 57P0x). */
function isConnectionSqlState(code: string | undefined): boolean {
  return code !== undefined && (code.startsWith("08") || code.startsWith("57P"));
}

/**
 * One pooled connection lent to one user, with a deadline: when it passes, the socket is destroyed, so
 * every statement waiting on it fails at once and the database rolls back what was open.
 */
class Lease {
  timedOut = false;
  broken = false;
  private readonly timer: NodeJS.Timeout;
  private readonly onError = (): void => {
    this.broken = true;
  };

  constructor(
    readonly client: pg.PoolClient,
    readonly deadlineMs: number,
  ) {
    // A checked-out client has no error listener of the pool's: without one, a socket error would be
    // thrown at the process.
    client.on("error", this.onError);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      destroyClient(client);
    }, deadlineMs);
  }

  /** Gives the connection back, or drops it when it failed, timed out or may hold an open transaction. */
  release(drop: boolean): void {
    clearTimeout(this.timer);
    const broken = drop || this.broken || this.timedOut || !isQueryable(this.client);
    if (broken) destroyClient(this.client);
    // The pool's own listener is back on the client once released; ours can go.
    this.client.release(broken ? new Error("connection dropped") : undefined);
    this.client.off("error", this.onError);
  }
}

/** The most statement texts kept prepared; past it, new texts run unnamed (parsed each time). */
const maxPreparedTexts = 500;
const preparedNames = new Map<string, string>();

/**
 * A statement as node-postgres takes it, named after its text, so that each connection parses and plans
 * each statement once and then only binds and executes it (the statements' texts are the program's own:
 * a few dozen, whatever the values).
 */
function queryConfig(query: SqlQuery): pg.QueryConfig {
  const { text, values } = query.compile();
  let name = preparedNames.get(text);
  if (name === undefined && preparedNames.size < maxPreparedTexts) {
    name = `s${preparedNames.size}`;
    preparedNames.set(text, name);
  }
  return name === undefined ? { text, values } : { name, text, values };
}

/** Statements of one transaction: each sent at once (pipelined), awaited only by whoever needs its rows. */
export class PgTransaction {
  private readonly sent: Promise<unknown>[] = [];

  constructor(private readonly client: pg.PoolClient) {}

  /** Sends a statement now; the result is awaited (and any failure seen) by `settle` at the latest. */
  send<T extends object = Record<string, unknown>>(query: SqlQuery): Promise<pg.QueryResult<T>> {
    const running = this.client.query<T>(queryConfig(query));
    running.catch(() => undefined);
    this.sent.push(running);
    return running;
  }

  /** Sends a statement and resolves with its rows. */
  async query<T extends object = Record<string, unknown>>(query: SqlQuery): Promise<T[]> {
    return (await this.send<T>(query)).rows;
  }

  /** Waits for every statement sent so far; throws the first failure. */
  async settle(): Promise<void> {
    const outcomes = await Promise.allSettled(this.sent.splice(0));
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }
}

/** node-postgres settings shared by the pool and single connections. */
function clientConfig(target: PostgresTarget, schema: string, durability: Durability, deadlines: PgDeadlines): pg.ClientConfig {
  const config: pg.ClientConfig = {
    port: target.port,
    database: target.database,
    user: target.username,
    application_name: target.applicationName ?? "sessionstate",
    connectionTimeoutMillis: target.connectTimeoutMs ?? deadlines.connectMs,
    // Backstops for what a client-side deadline cannot end: PostgreSQL's own work, and a transaction
    // whose client went silent while holding a lock (the clock row), so it never stalls other replicas.
    statement_timeout: deadlines.roundTripMs,
    lock_timeout: deadlines.lockWaitMs,
    idle_in_transaction_session_timeout: deadlines.idleInTransactionMs,
    // `--durability normal`: a sessionstate crash loses nothing; a PostgreSQL crash may lose the last few
    // hundred milliseconds. `full`: every COMMIT waits for the WAL flush.
    // Statements are prepared once per connection (see queryConfig) but planned for their values each
    // time: a generic plan of the batch statements (arrays unnested, `= ANY`) made group commit four times
    // slower after a few thousand appends.
    options: `-c search_path=${schema} -c synchronous_commit=${durability === "full" ? "on" : "off"} -c plan_cache_mode=force_custom_plan`,
    keepAlive: true,
    keepAliveInitialDelayMillis: 1000,
    types: typeParsers,
  };
  if (target.socketPath !== undefined) config.host = target.socketPath.replace(/\/\.s\.PGSQL\.\d+$/u, "");
  if (target.host !== undefined) config.host = target.host;
  if (target.password !== undefined) config.password = target.password;
  switch (target.ssl) {
    case "disable":
    case "prefer":
      break;
    case "require":
      config.ssl = { rejectUnauthorized: false };
      break;
    case "verify-ca":
      config.ssl = { rejectUnauthorized: true, checkServerIdentity: () => undefined };
      break;
    case "verify-full":
      config.ssl = { rejectUnauthorized: true };
      break;
    default: {
      const never: never = target.ssl;
      throw new Error(`unknown sslmode ${String(never)}`);
    }
  }
  return config;
}

/** Where a PostgreSQL database is, and how to talk to it. */
export interface PostgresDatabaseOptions {
  target: PostgresTarget;
  /** The schema tables are looked up in (`search_path`). */
  schema: string;
  durability: Durability;
  /** Pooled connections at most. */
  maxConnections?: number;
  deadlines?: PgDeadlines;
}

/**
 * A replica's connections to PostgreSQL through node-postgres: a pool for statements and transactions,
 * each with a deadline, and the replica's view of whether the database answers (SPEC §11). Any round
 * trip that fails for want of the database marks it unreachable at once; from then on a probe tries a
 * round trip every `probeIntervalMs`, and the first that succeeds (a probe's or a call's) marks it
 * reachable again. No error of the driver reaches the process: every client has an error listener.
 */
export class PostgresDatabase {
  readonly deadlines: PgDeadlines;
  private readonly config: pg.ClientConfig;
  private readonly pool: pg.Pool;
  private readonly clients = new Set<pg.Client>();
  private reachable = true;
  /** When the database was last marked unreachable (performance.now()): earlier successes do not count. */
  private downSinceMs = Number.NEGATIVE_INFINITY;
  private readonly listeners = new Set<(reachable: boolean) => void>();
  private probe: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: PostgresDatabaseOptions) {
    this.deadlines = options.deadlines ?? defaultPgDeadlines;
    this.config = clientConfig(options.target, options.schema, options.durability, this.deadlines);
    this.pool = new pg.Pool({ ...this.config, max: options.maxConnections ?? 10, pipeline: true, idleTimeoutMillis: 30_000 });
    // An idle client's socket failed: the pool has dropped it already.
    this.pool.on("error", () => undefined);
    this.pool.on("connect", (client) => this.clients.add(client));
    this.pool.on("remove", (client) => this.clients.delete(client));
  }

  /** True while the database answers round trips. */
  get isReachable(): boolean {
    return this.reachable;
  }

  /** Calls `listener` whenever the database becomes unreachable (false) or reachable again (true). */
  onReachabilityChange(listener: (reachable: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Marks the database unreachable now (a round trip failed for want of it) and starts probing. */
  markUnreachable(): void {
    this.downSinceMs = performance.now();
    if (!this.reachable || this.closed) return;
    this.reachable = false;
    for (const listener of this.listeners) listener(false);
    this.scheduleProbe();
  }

  /** A round trip that started at `startedMs` succeeded: the database answers, unless it was marked away since. */
  markReachable(startedMs: number): void {
    if (this.reachable || this.closed || startedMs < this.downSinceMs) return;
    this.reachable = true;
    clearTimeout(this.probe);
    for (const listener of this.listeners) listener(true);
  }

  private scheduleProbe(): void {
    clearTimeout(this.probe);
    this.probe = setTimeout(() => {
      void this.query(probeQuery).then(
        () => undefined,
        () => undefined,
      ).finally(() => {
        if (!this.reachable && !this.closed) this.scheduleProbe();
      });
    }, this.deadlines.probeIntervalMs);
    this.probe.unref();
  }

  /** Turns an error of a round trip into what callers see, marking the database unreachable where it is. */
  private fault(error: unknown, lease: Lease | undefined): unknown {
    if (lease?.timedOut === true) {
      // Only a full round-trip deadline says the database is away; a shorter one was a call's own budget.
      if (lease.deadlineMs < this.deadlines.roundTripMs) {
        return Object.assign(new Error(`not done within the ${Math.round(lease.deadlineMs)} ms left to answer in`, { cause: error }), {
          code: "DATABASE_SLOW",
        });
      }
      this.markUnreachable();
      return new DatabaseUnreachableError(`no answer within ${this.deadlines.roundTripMs} ms`, { cause: error });
    }
    if (error instanceof pg.DatabaseError) {
      if (isConnectionSqlState(error.code)) this.markUnreachable();
      return error;
    }
    if (error instanceof Error && error.message === poolWaitTimeoutMessage) {
      return Object.assign(new Error("no pooled connection came free in time", { cause: error }), { code: "POOL_BUSY" });
    }
    if (lease === undefined || lease.broken || !isQueryable(lease.client)) {
      this.markUnreachable();
      return new DatabaseUnreachableError("the connection to the database failed", { cause: error });
    }
    return error;
  }

  private async checkout(deadlineMs: number): Promise<Lease> {
    if (this.closed) throw new DatabaseUnreachableError("the database connections are closed");
    try {
      return new Lease(await this.pool.connect(), deadlineMs);
    } catch (error) {
      throw this.fault(error, undefined);
    }
  }

  /** Runs one statement on a pooled connection within the round-trip deadline; resolves with its result. */
  async execute<T extends object = Record<string, unknown>>(query: SqlQuery): Promise<pg.QueryResult<T>> {
    const startedMs = performance.now();
    const lease = await this.checkout(this.deadlines.roundTripMs);
    try {
      const result = await lease.client.query<T>(queryConfig(query));
      lease.release(false);
      this.markReachable(startedMs);
      return result;
    } catch (error) {
      const fault = this.fault(error, lease);
      lease.release(true);
      throw fault;
    }
  }

  /** Runs one statement and resolves with its rows. */
  async query<T extends object = Record<string, unknown>>(query: SqlQuery): Promise<T[]> {
    return (await this.execute<T>(query)).rows;
  }

  /**
   * Runs `work` in one transaction on one pooled connection, pipelined: BEGIN goes out with the first
   * statements, and COMMIT right behind the last ones without waiting for them. The whole transaction has
   * the round-trip deadline, or `deadlineMs` when that is shorter (what is left of its callers' time to be
   * answered in: passing it is then a slow answer, not an unreachable database). Any failure rolls it back
   * (the connection is dropped, so PostgreSQL ends the transaction); a COMMIT sent but never answered
   * throws `CommitOutcomeUnknownError`.
   */
  async transaction<T>(work: (tx: PgTransaction) => Promise<T>, deadlineMs = this.deadlines.roundTripMs): Promise<T> {
    const startedMs = performance.now();
    const lease = await this.checkout(Math.min(deadlineMs, this.deadlines.roundTripMs));
    const tx = new PgTransaction(lease.client);
    let committing = false;
    try {
      void tx.send(beginQuery);
      const value = await work(tx);
      committing = true;
      const commit = tx.send(commitQuery);
      await tx.settle();
      // PostgreSQL answers COMMIT of a failed transaction with ROLLBACK; every failure is seen above first.
      if ((await commit).command !== "COMMIT") throw new Error("the transaction was rolled back");
      lease.release(false);
      this.markReachable(startedMs);
      return value;
    } catch (error) {
      // Judged before the connection is dropped: an error thrown by `work` itself says nothing of the database.
      const fault = this.fault(error, lease);
      lease.release(true);
      const connectionLost = fault instanceof DatabaseUnreachableError || (fault as { code?: unknown }).code === "DATABASE_SLOW";
      throw committing && connectionLost ? new CommitOutcomeUnknownError({ cause: error }) : fault;
    }
  }

  /**
   * A connection of its own, outside the pool (for LISTEN, and for schema migration), connected within the
   * connect deadline; its application name is the pool's followed by `purpose`. The caller owns it and must
   * handle its 'error' events and end it.
   */
  async connectClient(purpose: string): Promise<pg.Client> {
    // Named by purpose, so that an operator can tell the connections apart in pg_stat_activity.
    const client = new pg.Client({ ...this.config, application_name: `${this.config.application_name ?? "sessionstate"} ${purpose}` });
    const swallow = (): void => undefined;
    client.on("error", swallow);
    try {
      await client.connect();
    } catch (error) {
      destroyClient(client);
      throw this.fault(error, undefined);
    } finally {
      client.off("error", swallow);
    }
    return client;
  }

  /**
   * Closes every connection within `timeoutMs`: the pool is asked to end, and whatever has not ended by
   * then (a peer that does not answer) is destroyed.
   */
  async close(timeoutMs = 1000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.probe);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.pool.end().catch(() => undefined),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    for (const client of this.clients) destroyClient(client);
  }
}

