/** Who is calling, as established from a bearer token: an admin, or a list of agents it may touch. */
export interface Principal {
  /** The token's name from the tokens file (safe to log; the token itself never is). */
  readonly name: string;
  readonly admin: boolean;
  /** Agent ids (lower-case) this principal may act for; empty for admins (who may act for all). */
  readonly agents: ReadonlySet<string>;
  /** Namespaces this principal may use (SPEC §12.1): a set, or "all" (`"*"` in the tokens file; every admin). */
  readonly namespaces: ReadonlySet<string> | "all";
}

/** True when `principal` may make requests in `namespace`. */
export function mayUseNamespace(principal: Principal, namespace: string): boolean {
  return principal.admin || principal.namespaces === "all" || principal.namespaces.has(namespace);
}

/** The namespaces `principal` may see (ListNamespaces): `undefined` for every one (an admin, `"*"`, or no authentication). */
export function namespacesVisibleTo(principal: Principal | undefined): readonly string[] | undefined {
  if (principal === undefined || principal.admin || principal.namespaces === "all") return undefined;
  return [...principal.namespaces];
}
