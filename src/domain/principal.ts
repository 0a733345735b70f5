/** Who is calling, as established from a bearer token: an admin, or a list of agents it may touch. */
export interface Principal {
  /** The token's name from the tokens file (safe to log; the token itself never is). */
  readonly name: string;
  readonly admin: boolean;
  /** Agent ids (lower-case) this principal may act for; empty for admins (who may act for all). */
  readonly agents: ReadonlySet<string>;
}
