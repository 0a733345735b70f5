/**
 * Whether the addresses `serve` will listen on are free, asked before anything is opened or created, so
 * that a port already taken is one clear line and nothing else (no database file, no half-started server).
 */
import { createServer } from "node:net";
import { formatHostPort } from "./config.js";

/** An address another process listens on already. */
export class AddressInUseError extends Error {
  constructor(
    /** The setting that named it: `--listen`, `--metrics-listen`. */
    readonly flag: string,
    readonly address: string,
    options?: { cause?: unknown },
  ) {
    super(`${flag} ${address}: the address is already in use (by another sessionstate server, or another program)`, options);
    this.name = "AddressInUseError";
  }
}

/**
 * Resolves when `host:port` can be listened on now; rejects with AddressInUseError when it is taken, and
 * with the system's error when it cannot be listened on at all (an address this machine does not have).
 * Port 0 (a free port, chosen at bind time) is always free.
 */
export async function ensureAddressFree(flag: string, host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject);
      probe.listen({ host, port, exclusive: true }, () => resolve());
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") throw new AddressInUseError(flag, formatHostPort(host, port), { cause: err });
    throw err;
  } finally {
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  }
}
