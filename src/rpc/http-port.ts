/**
 * The HTTP port (API.md §13): every RPC through the Connect protocol (JSON and binary) and gRPC-Web, from
 * the same handlers as the gRPC port (rpc/connect-calls); `GET /healthz` and `GET /readyz` for load
 * balancers; and the console at `/`. HTTP/1.1 meets abuse the gRPC port never sees, so it is bounded: a
 * client must send its headers within `headersTimeoutMs` and its request within `requestTimeoutMs`, idle
 * connections close, open connections are capped, headers are capped in size and count, and request bodies
 * past the limit are refused while they are read. Error pages never echo the request.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { ConnectRouter } from "@connectrpc/connect";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { peerKey } from "./connect-calls.js";
import { consoleSecurityHeaders, type ConsoleFile } from "./console-files.js";
import type { HostPolicy } from "./allowed-hosts.js";

/** The paths of the CLIs' hooks: `/hooks/claude`, `/hooks/codex`, `/hooks/gemini`. */
const hookPath = /^\/hooks\/([a-z]+)$/u;

/** The bounds of the HTTP port. */
export interface HttpLimits {
  /** Largest request message, as on the gRPC port. */
  maxRequestBytes: number;
  /** A client that has not sent its whole header block by then is dropped. */
  headersTimeoutMs: number;
  /** A client that has not sent its whole request by then is dropped (a stream's response may last). */
  requestTimeoutMs: number;
  /** An idle kept-alive connection closes after this. */
  keepAliveTimeoutMs: number;
  /** Most connections open at once; more are refused at accept. */
  maxConnections: number;
}

export const defaultHttpLimits: HttpLimits = {
  maxRequestBytes: 1024 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1024,
};

/** Largest header block, and most header fields, a request may have. */
const maxHeaderBytes = 16 * 1024;
const maxHeaderCount = 64;

export interface HttpPortOptions {
  host: string;
  port: number;
  tls: { certPem: Buffer; keyPem: Buffer; clientCaPem?: Buffer } | undefined;
  limits: HttpLimits;
  /** Registers the RPCs (RpcEdge.routes). */
  routes: (router: ConnectRouter) => void;
  /** Whether the server is SERVING (for `/readyz`). */
  serving: () => boolean;
  /** The console's files by path (rpc/console-files); empty when it was not built. */
  consoleFiles: ReadonlyMap<string, ConsoleFile>;
  /** The names the port answers to, once its port is known (rpc/allowed-hosts). */
  hostPolicy: (port: number) => HostPolicy;
  /** Serves `POST /hooks/<cli>` (upstream/hook-endpoint); absent: those paths are not found. */
  hooks?: (cli: string, req: IncomingMessage, res: ServerResponse) => void;
  /** Told of each request refused for its `Host` or `Origin`. */
  refused?: (reason: "host" | "origin") => void;
}

/** A bound HTTP port. */
export interface HttpPort {
  readonly port: number;
  /** Stops accepting, lets requests in flight finish for `graceMs`, then closes every connection. */
  close(graceMs: number): Promise<void>;
}

/** Answers a plain-text page with security headers; never echoes anything of the request. */
export function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
  });
  res.end(text);
}

/** Serves one of the console's files (GET or HEAD), revalidated by its ETag on every load. */
function serveConsoleFile(req: IncomingMessage, res: ServerResponse, file: ConsoleFile): void {
  const headers = { ...consoleSecurityHeaders, "content-type": file.contentType, "cache-control": "no-cache", etag: file.etag };
  if (req.headers["if-none-match"] === file.etag) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  res.writeHead(200, { ...headers, "content-length": String(file.body.length) });
  if (req.method === "HEAD") res.end();
  else res.end(file.body);
}

/** The content types of Connect unary calls (JSON or binary), whose errors are JSON bodies. */
const connectUnaryType = /^application\/(?:json|proto)\s*(?:;|$)/iu;

/** Starts the HTTP port; rejects with the listen error (EADDRINUSE included). */
export async function startHttpPort(options: HttpPortOptions): Promise<HttpPort> {
  const { limits } = options;
  const handler = connectNodeAdapter({
    routes: options.routes,
    readMaxBytes: limits.maxRequestBytes,
    // The per-connection stream limit counts streams per peer, as on the gRPC port.
    contextValues: (req) => createContextValues().set(peerKey, `${req.socket.remoteAddress}:${req.socket.remotePort}`),
    // This port is HTTP/1.1 (node:http or node:https), so the adapter's requests are node:http's.
    fallback: (anyReq, anyRes) => {
      const req = anyReq as IncomingMessage;
      const res = anyRes as ServerResponse;
      const path = (req.url ?? "/").split("?")[0];
      if (req.method === "GET" && path === "/healthz") return plain(res, 200, "ok\n");
      if (req.method === "GET" && path === "/readyz") return options.serving() ? plain(res, 200, "serving\n") : plain(res, 503, "not serving\n");
      const hook = path === undefined ? null : hookPath.exec(path);
      if (hook !== null && options.hooks !== undefined) {
        if (req.method !== "POST") return plain(res, 405, "a hook is a POST\n");
        return options.hooks(hook[1]!, req, res);
      }
      const file = path === undefined ? undefined : options.consoleFiles.get(path);
      if ((req.method === "GET" || req.method === "HEAD") && file !== undefined) return serveConsoleFile(req, res, file);
      if (req.method === "GET" && path === "/") return plain(res, 404, "the console is not built: run npm run build\n");
      return plain(res, 404, "not found\n");
    },
  });
  let policy: HostPolicy | undefined;
  // A response written before its request was read whole (a body refused past the limit, or for its name)
  // closes the connection: the rest of the body is not read, so the connection cannot carry another
  // request, and a client must be told so rather than find it reset on its next call.
  // Before anything else, the request must be addressed to a name this port answers to (a page that rebound
  // its own name to this address sends that name as Host), and must not come from another origin's page.
  const closeIfUnread = (req: IncomingMessage, res: ServerResponse): void => {
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => typeof res;
    const hasBody = (req.headers["content-length"] ?? "0") !== "0" || req.headers["transfer-encoding"] !== undefined;
    res.writeHead = ((...args: unknown[]) => {
      if (hasBody && !req.complete) res.shouldKeepAlive = false;
      return writeHead(...args);
    }) as typeof res.writeHead;
    if (policy === undefined || !policy.allowsHost(req.headers.host)) {
      options.refused?.("host");
      return plain(res, 421, "misdirected request: this server does not answer to that name (see --http-allowed-hosts)\n");
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !policy.allowsOrigin(origin)) {
      options.refused?.("origin");
      return plain(res, 403, "forbidden: requests from pages of another origin are refused\n");
    }
    // A Connect call (a package.Service/Method path) that says it is over the limit is refused here, naming
    // the setting (connect-es would name its own readMaxBytes); one that does not say so is measured as it
    // is read, by connect-es. The hooks' own limit is theirs (rpc/hook-endpoint).
    const declared = Number(req.headers["content-length"] ?? "0");
    const rpcPath = /^\/\w+(?:\.\w+)+\/\w+$/u.test((req.url ?? "").split("?")[0]!);
    if (req.method === "POST" && rpcPath && declared > limits.maxRequestBytes && connectUnaryType.test(req.headers["content-type"] ?? "")) {
      const message = `the request is ${declared} bytes, more than this server takes (--max-request-bytes ${limits.maxRequestBytes})`;
      res.writeHead(429, { "content-type": "application/json" });
      res.end(JSON.stringify({ code: "resource_exhausted", message }));
      return;
    }
    handler(req, res);
  };
  const serverOptions = {
    maxHeaderSize: maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // How often Node checks the two timeouts above (its default, 30 s, would let a slow client linger).
    connectionsCheckingInterval: 500,
  };
  const server: HttpServer =
    options.tls === undefined
      ? createHttpServer(serverOptions, closeIfUnread)
      : createHttpsServer(
          {
            ...serverOptions,
            cert: options.tls.certPem,
            key: options.tls.keyPem,
            ...(options.tls.clientCaPem === undefined ? {} : { ca: options.tls.clientCaPem, requestCert: true, rejectUnauthorized: true }),
          },
          closeIfUnread,
        );
  server.maxHeadersCount = maxHeaderCount;
  server.maxConnections = limits.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: options.host, port: options.port, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;
  policy = options.hostPolicy(port);
  return {
    port,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
