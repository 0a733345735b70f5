/**
 * A TCP proxy for fault tests: it listens on 127.0.0.1 and forwards each connection to a target (a
 * unix socket, as the throwaway PostgreSQL cluster listens on, or a TCP port). Faults are set while it
 * runs and act on every connection, open or new:
 * - `blackhole()`: nothing is forwarded either way and sockets stay open, as in a network partition;
 *   what was sent waits and flows on `heal()`, as TCP retransmission would deliver it.
 * - `delay(ms)`: every chunk is held `ms` before it is forwarded, in each direction, order kept.
 * - `resetAll()`: every open connection is reset (RST) on both sides; new ones are forwarded as usual.
 * - `refuse(true)`: new connections are reset at once (a host that answers but has no server).
 */
import { performance } from "node:perf_hooks";
import { createConnection, createServer, type Server, type Socket } from "node:net";

/** Where the proxy forwards to. */
export type ProxyTarget = { path: string } | { host: string; port: number };

interface Link {
  client: Socket;
  upstream: Socket;
}

export class FaultProxy {
  private readonly links = new Set<Link>();
  private held = false;
  private latencyMs = 0;
  private refusing = false;
  private readonly waiting = new Set<() => void>();

  private constructor(
    private readonly server: Server,
    /** The port the proxy listens on, on 127.0.0.1. */
    readonly port: number,
  ) {}

  /** Starts a proxy to `target` on a free port of 127.0.0.1. Close it. */
  static async start(target: ProxyTarget): Promise<FaultProxy> {
    let proxy: FaultProxy | undefined;
    const server = createServer((client) => proxy!.accept(client, target));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    proxy = new FaultProxy(server, (server.address() as { port: number }).port);
    return proxy;
  }

  /** Connections open now. */
  get openLinks(): number {
    return this.links.size;
  }

  /** Stops forwarding both ways; sockets stay open. */
  blackhole(): void {
    this.held = true;
  }

  /** Holds every chunk `ms` before forwarding it (0: no delay). */
  delay(ms: number): void {
    this.latencyMs = ms;
  }

  /** Resets new connections at once while on. */
  refuse(on: boolean): void {
    this.refusing = on;
  }

  /** Ends every fault: forwarding resumes (what waited flows on), no delay, connections accepted. */
  heal(): void {
    this.held = false;
    this.latencyMs = 0;
    this.refusing = false;
    for (const resume of [...this.waiting]) resume();
    this.waiting.clear();
  }

  /** Resets every open connection, both sides. */
  resetAll(): void {
    for (const link of [...this.links]) this.drop(link);
  }

  async close(): Promise<void> {
    this.heal();
    this.resetAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: ProxyTarget): void {
    if (this.refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = "path" in target ? createConnection(target.path) : createConnection(target.port, target.host);
    const link: Link = { client, upstream };
    this.links.add(link);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      // An error is followed by 'close', which each direction's pipe forwards like data.
      socket.on("error", () => undefined);
    }
    this.pipe(link, client, upstream);
    this.pipe(link, upstream, client);
  }

  /**
   * Forwards `from` to `to` in order: each chunk leaves `latencyMs` after it arrived (the delay in force
   * then), and none leaves while the proxy is blackholed; nor does the end of `from` (its FIN, or its
   * close, which resets the link), so a peer that gives up during a partition is heard of only after it.
   */
  private pipe(link: Link, from: Socket, to: Socket): void {
    const queue: { chunk: Buffer | "end" | "close"; dueMs: number }[] = [];
    let pumping = false;
    const pump = async (): Promise<void> => {
      pumping = true;
      while (queue.length > 0 && this.links.has(link)) {
        if (this.held) {
          await new Promise<void>((resolve) => this.waiting.add(resolve));
          continue;
        }
        const waitMs = queue[0]!.dueMs - performance.now();
        if (waitMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, waitMs));
          continue;
        }
        const { chunk } = queue.shift()!;
        if (chunk === "close") {
          this.drop(link);
          break;
        }
        if (to.destroyed) break;
        if (chunk === "end") to.end();
        else to.write(chunk);
      }
      pumping = false;
    };
    const enqueue = (chunk: Buffer | "end" | "close"): void => {
      queue.push({ chunk, dueMs: performance.now() + this.latencyMs });
      if (!pumping) void pump();
    };
    from.on("data", (chunk: Buffer) => enqueue(chunk));
    from.on("end", () => enqueue("end"));
    from.on("close", () => enqueue("close"));
  }

  private drop(link: Link): void {
    if (!this.links.delete(link)) return;
    for (const socket of [link.client, link.upstream]) {
      if (socket.destroyed) continue;
      // A socket still connecting cannot be reset, nor can a unix socket (PostgreSQL's side): there,
      // closing is what the peer sees of a reset.
      if (socket.connecting || socket.readyState !== "open" || socket.remoteAddress === undefined) socket.destroy();
      else socket.resetAndDestroy();
    }
  }
}
