/**
 * The claims of consumer groups (SPEC §6.1) as the notice hub uses them, whoever keeps them: one process
 * (SQLite: notices/claim-registry) or the ledger every replica shares (PostgreSQL: notices/shared-claims).
 */
import type { StatusError } from "../errors.js";
import type { CursorRecord, PairChange } from "../domain/records.js";

/** One member of a group: a subscription that named it. */
export interface GroupMember {
  /** Unique among this process's members. */
  readonly id: string;
  readonly namespace: string;
  readonly group: string;
  /** The holder's connection as the console and `sessionstate watches` show it; a release must come over it. */
  readonly peer: string;
  readonly maxInFlight: number;
  /** Claim ids it holds now. */
  readonly held: Set<string>;
  /** Notices it gave back, by pair: not handed to it again while their N is the same. */
  readonly declined: Map<string, number>;
  /** Told when one of its claims ended: a slot is free. */
  slotFreed(): void;
  /** Ends the member's stream with `error` (its claims could no longer be held). */
  end(error: StatusError): void;
}

/** A claim as the member's notice carries it. */
export interface HeldClaim {
  claimId: string;
  deliveryCount: number;
}

/** What `prepare` read, for `take`: opaque to the hub. */
export type ClaimReading = unknown;

/** Why a member does not take a pending notice: its own already, another's, given back by it, or it holds all it may. */
export type ClaimRefusal = "mine" | "held" | "declined" | "full";

/** What the notice hub asks of the claims. */
export interface NoticeClaims {
  /** A subscription joins its group; throws (UNAVAILABLE) when claims cannot be held here now. */
  join(member: GroupMember): void;
  /** A member's stream ended: each claim it held goes to the group's other members at once. */
  leave(member: GroupMember): void;
  /**
   * What `member` may do with the pending notices of some cursors, in their order: take each (the claim is
   * then its), or not. Past its `max_in_flight` the rest are "full".
   */
  take(member: GroupMember, cursors: readonly CursorRecord[], reading?: ClaimReading): Promise<(HeldClaim | ClaimRefusal)[]>;
  /** Reads the group's claims on some pairs ahead of `take`, beside another read (undefined: nothing to read ahead). */
  prepare(member: GroupMember, pairs: readonly PairChange[]): Promise<ClaimReading>;
  /**
   * A pair as `member` read it now (its cursor, or none): a claim on a notice that is no longer pending as
   * claimed (acknowledged, reopened as a new notice, or gone) ends, and its holder's slot frees.
   */
  settle(member: GroupMember, change: PairChange, cursor: CursorRecord | undefined): void;
  /**
   * Gives claims back (ReleaseNotices), over the connection `peer` that holds them: each one of `namespace`
   * whose watcher `mayRelease` allows goes to the group's other members at once; the rest answer false,
   * whatever they were.
   */
  release(claimIds: readonly string[], namespace: string, peer: string, mayRelease: (watcherKey: string) => boolean): Promise<boolean[]>;
  /** Who holds the pending notices of some cursors: per cursor, `<group> <peer>` lines, empty when none. */
  holders(cursors: readonly CursorRecord[]): Promise<(cursor: CursorRecord) => string>;
  /** Claims held now by this process's members. */
  readonly heldCount: number;
  /** Stops holding claims (a graceful stop): what is still held is handed on. */
  stop(): Promise<void>;
}
