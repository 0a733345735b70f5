/**
 * The one place that reads what node-postgres keeps private (pg 8.x): whether a client can still take
 * queries (pg-pool itself reads the same fields), and its socket, which a deadline destroys (PostgreSQL then
 * rolls back whatever was open on it). test/postgres/driver.test.ts checks these fields on a real client, so
 * a driver upgrade that moves them fails the tests instead of silently disabling the deadlines.
 */
import type pg from "pg";

/** The private fields read here, as node-postgres 8 has them. */
interface ClientInternals {
  _queryable?: boolean;
  _ending?: boolean;
  connection?: { stream?: { destroy(): void } };
}

/** True while a client can take queries: connected, not ending, not broken. */
export function isQueryable(client: pg.ClientBase): boolean {
  const internals = client as unknown as ClientInternals;
  return internals._queryable !== false && internals._ending !== true;
}

/** Destroys a client's socket at once (no goodbye: the peer may be unreachable). */
export function destroyClient(client: pg.ClientBase): void {
  (client as unknown as ClientInternals).connection?.stream?.destroy();
}

/** The names of the private fields, as found on `client` now: for the test that holds them to the driver. */
export function driverInternalsOf(client: pg.ClientBase): { queryable: unknown; ending: unknown; hasSocket: boolean } {
  const internals = client as unknown as ClientInternals;
  return { queryable: internals._queryable, ending: internals._ending, hasSocket: typeof internals.connection?.stream?.destroy === "function" };
}
