/**
 * The names the HTTP port answers to (SPEC §13.1): its listen address, and on a loopback address
 * `localhost`, `127.0.0.1` and `[::1]`, each with its port; on a wildcard address also the machine's own IP
 * literals; and the names configured with `--http-allowed-hosts`. A request addressed to any other name
 * (a `Host` header a rebinding page's browser sends) is refused before anything is read, and so is a
 * request a browser sends from a page of another origin. Pure but for the interface list it is given.
 */
import { isIP } from "node:net";

/** What the HTTP port checks before anything else. */
export interface HostPolicy {
  /** True when a request with this `Host` header is addressed to this port. */
  allowsHost(host: string | undefined): boolean;
  /** True when a request may come from a page of this origin (a browser's `Origin` header). */
  allowsOrigin(origin: string): boolean;
  /** The names answered to, as `Host` shows them (for the start-up line and docs). */
  readonly names: readonly string[];
}

/** `host` as a `Host` header writes it: IPv6 literals in brackets, lower case. */
function hostLiteral(host: string): string {
  const lower = host.toLowerCase();
  return isIP(lower) === 6 ? `[${lower}]` : lower;
}

/** True for the addresses that listen on every interface. */
export function isWildcardHost(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "[::]";
}

/**
 * A configured name: a host name, an IPv4 literal or a bracketed IPv6 literal, optionally with `:PORT`.
 * Returns the problem with it, or undefined.
 */
export function allowedHostProblem(name: string): string | undefined {
  const match = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/iu.exec(name);
  if (match === null) return `${JSON.stringify(name)} is not a host name, an IP address or [IPv6], with an optional :PORT`;
  const host = match[1]!;
  if (host.startsWith("[") && isIP(host.slice(1, -1)) !== 6) return `${JSON.stringify(name)}: ${host} is not an IPv6 address`;
  if (!host.startsWith("[") && (host.startsWith(".") || host.endsWith(".") || host.includes(".."))) return `${JSON.stringify(name)} is not a host name`;
  if (match[2] !== undefined && (Number(match[2]) < 1 || Number(match[2]) > 65_535)) return `${JSON.stringify(name)}: the port must be 1-65535`;
  return undefined;
}

/** Splits `host[:port]` as a `Host` header or an origin's host carries it. */
function splitHost(text: string): { host: string; port: string | undefined } | undefined {
  const match = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d*))?$/u.exec(text.trim().toLowerCase());
  if (match === null || match[1] === "") return undefined;
  return { host: match[1]!, port: match[2] === "" ? undefined : match[2] };
}

/**
 * The policy of an HTTP port listening on `listenHost:port` (the bound port), with `configured` names
 * added; `interfaceAddresses` are the machine's own addresses (a wildcard address answers to each).
 * A configured name without a port is answered on any port (a proxy in front may use its own); every
 * other name only with this port, or bare when the port is the scheme's default.
 */
export function hostPolicyFor(options: {
  listenHost: string;
  port: number;
  tls: boolean;
  configured: readonly string[];
  interfaceAddresses: readonly string[];
}): HostPolicy {
  const { listenHost, port, tls, configured } = options;
  const ownHosts = new Set<string>();
  const lower = listenHost.toLowerCase().replace(/^\[(.*)\]$/u, "$1");
  if (isWildcardHost(lower)) {
    // Its listen address as written (what `serve` prints), and every address of this machine.
    ownHosts.add(hostLiteral(lower));
    for (const address of options.interfaceAddresses) ownHosts.add(hostLiteral(address.replace(/%.*$/u, "")));
  } else {
    ownHosts.add(hostLiteral(lower));
    const loopback = lower === "localhost" || lower === "::1" || (isIP(lower) === 4 && lower.startsWith("127."));
    if (loopback) for (const name of ["localhost", "127.0.0.1", "[::1]"]) ownHosts.add(name);
  }
  const anyPort = new Set<string>();
  const exact = new Set<string>();
  for (const name of configured) {
    const split = splitHost(name);
    if (split === undefined) continue;
    if (split.port === undefined) anyPort.add(split.host);
    else exact.add(`${split.host}:${Number(split.port)}`);
  }
  const defaultPort = tls ? 443 : 80;
  const allowsHost = (header: string | undefined): boolean => {
    if (header === undefined) return false;
    const split = splitHost(header);
    if (split === undefined) return false;
    const givenPort = split.port === undefined ? defaultPort : Number(split.port);
    if (anyPort.has(split.host)) return true;
    if (exact.has(`${split.host}:${givenPort}`)) return true;
    return ownHosts.has(split.host) && givenPort === port;
  };
  const allowsOrigin = (origin: string): boolean => {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false; // "null" (a sandboxed page, a file) and anything else unreadable
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    if (`${url.protocol}//${url.host}` !== origin.toLowerCase().replace(/\/$/u, "")) return false;
    return allowsHost(url.port === "" ? `${url.hostname}:${url.protocol === "https:" ? 443 : 80}` : url.host);
  };
  const names = [...[...ownHosts].map((host) => `${host}:${port}`), ...anyPort, ...exact];
  return { allowsHost, allowsOrigin, names };
}
