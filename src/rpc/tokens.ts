import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Principal } from "../domain/principal.js";
import { defaultNamespace, isValidNamespace, normalizeAgentId } from "../domain/session-key.js";

/** One entry of the tokens file: a name, the SHA-256 of the token, and its scope. */
interface TokenEntry {
  principal: Principal;
  digest: Buffer;
}

/** The hex SHA-256 of a token, as the tokens file stores it. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/**
 * Parses a tokens file (`{ "tokens": [{ "name", "sha256", "agents": [...] | "admin": true, "namespaces":
 * [...] }] }`; namespaces absent: `["default"]`, `["*"]`: every one). Throws an Error listing every
 * problem; never includes a hash in a message.
 */
export function parseTokensFile(text: string): TokenEntry[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new Error("the tokens file is not valid JSON");
  }
  const tokens = (document as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(tokens)) throw new Error('the tokens file must be an object with a "tokens" array');
  const problems: string[] = [];
  const names = new Set<string>();
  const entries: TokenEntry[] = [];
  tokens.forEach((raw: unknown, i) => {
    const where = `tokens[${i}]`;
    const token = raw as { name?: unknown; sha256?: unknown; agents?: unknown; admin?: unknown; namespaces?: unknown } | null;
    if (typeof token !== "object" || token === null) return void problems.push(`${where}: must be an object`);
    const name = typeof token.name === "string" ? token.name.trim() : "";
    if (name === "") problems.push(`${where}.name: is required`);
    else if (names.has(name)) problems.push(`${where}.name: "${name}" is used twice`);
    names.add(name);
    const sha = typeof token.sha256 === "string" ? token.sha256.toLowerCase() : "";
    if (!/^[0-9a-f]{64}$/.test(sha)) problems.push(`${where}.sha256: must be 64 hex digits (sessionstate token hash makes one)`);
    const admin = token.admin === true;
    const agents = new Set<string>();
    if (token.agents !== undefined) {
      if (!Array.isArray(token.agents)) problems.push(`${where}.agents: must be an array of agent ids`);
      else {
        for (const agent of token.agents as unknown[]) {
          try {
            agents.add(normalizeAgentId(`${where}.agents`, typeof agent === "string" ? agent : ""));
          } catch (err) {
            problems.push((err as Error).message);
          }
        }
      }
    }
    if (admin === (agents.size > 0)) problems.push(`${where}: give either "admin": true or a non-empty "agents" list`);
    let namespaces: Set<string> | "all" = new Set([defaultNamespace]);
    if (token.namespaces !== undefined) {
      const listed = token.namespaces;
      if (!Array.isArray(listed) || listed.length === 0) problems.push(`${where}.namespaces: must be a non-empty array of namespaces, or ["*"]`);
      else if (listed.includes("*")) {
        if (listed.length > 1) problems.push(`${where}.namespaces: "*" stands alone`);
        namespaces = "all";
      } else {
        namespaces = new Set();
        for (const namespace of listed as unknown[]) {
          if (typeof namespace === "string" && isValidNamespace(namespace)) namespaces.add(namespace);
          else problems.push(`${where}.namespaces: ${JSON.stringify(namespace)} is not a namespace ([a-z0-9][a-z0-9-]{0,62})`);
        }
      }
    }
    entries.push({
      principal: { name, admin, agents: admin ? new Set() : agents, namespaces: admin ? "all" : namespaces },
      digest: Buffer.from(sha, "hex"),
    });
  });
  if (problems.length > 0) throw new Error(`invalid tokens file:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  return entries;
}

/** The tokens the server accepts, reloadable from their file. */
export class TokenRegistry {
  private entries: TokenEntry[];

  /** Loads `path`; throws when it cannot be read or is invalid. */
  constructor(private readonly path: string) {
    this.entries = TokenRegistry.load(path);
  }

  private static load(path: string): TokenEntry[] {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      throw new Error(`cannot read the tokens file: ${(err as NodeJS.ErrnoException).code ?? "error"}`, { cause: err });
    }
    return parseTokensFile(text);
  }

  /** Re-reads the file; on error keeps the tokens it had and throws. Returns how many tokens are loaded. */
  reload(): number {
    this.entries = TokenRegistry.load(this.path);
    return this.entries.length;
  }

  /**
   * The principal of a bearer token, or `undefined` when it is unknown. Compares digests in constant time
   * and always against every entry, so timing says nothing about which tokens exist.
   */
  authenticate(token: string): Principal | undefined {
    const digest = createHash("sha256").update(token, "utf8").digest();
    let found: Principal | undefined;
    for (const entry of this.entries) {
      if (timingSafeEqual(entry.digest, digest) && found === undefined) found = entry.principal;
    }
    return found;
  }
}
