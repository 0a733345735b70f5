/**
 * The claims of consumer groups (SPEC §6.1) in one process: which member holds each pending notice of a
 * group, and how often each was handed out. On SQLite one process owns the database and every stream, so
 * claims live here, in memory: a claim's holder is a stream of this process, and when the process ends
 * every claim ends with its streams, as SPEC §6.1 asks of a holder that goes away. (Replicas keep claims
 * every replica sees: notices/shared-claims.)
 */
import { randomUUID } from "node:crypto";
import type { CursorRecord, PairChange } from "../domain/records.js";
import { pairKey, hasLiveNotice } from "../domain/cursor-rules.js";
import { decideClaim, type ClaimState } from "../domain/consumer-group.js";
import type { ClaimRefusal, GroupMember, HeldClaim, NoticeClaims } from "./notice-claims.js";

interface ClaimRecord extends ClaimState<GroupMember> {
  id: string | undefined;
  change: PairChange;
}

/** A group's identity: a group name is per namespace. */
function groupKey(namespace: string, group: string): string {
  return `${namespace}\u0000${group}`;
}

/**
 * Claims in memory. `handOn` is told of a notice whose claim ended while it is still pending (given back,
 * or its holder's stream ended): the hub offers it to the group's other members at once.
 */
export class ClaimRegistry implements NoticeClaims {
  /** Per group, per pair: the last claim's state (kept while the notice is pending, for the delivery count). */
  private readonly groups = new Map<string, Map<string, ClaimRecord>>();
  private readonly byId = new Map<string, { record: ClaimRecord; group: string }>();
  private readonly members = new Map<string, Set<GroupMember>>();

  constructor(private readonly handOn: (members: ReadonlySet<GroupMember>, change: PairChange, except: GroupMember | undefined) => void) {}

  join(member: GroupMember): void {
    const key = groupKey(member.namespace, member.group);
    let members = this.members.get(key);
    if (members === undefined) this.members.set(key, (members = new Set()));
    members.add(member);
  }

  /** A member's stream ended: each claim it held goes to the group's other members at once. */
  leave(member: GroupMember): void {
    const key = groupKey(member.namespace, member.group);
    const members = this.members.get(key);
    members?.delete(member);
    for (const id of [...member.held]) {
      const entry = this.byId.get(id);
      if (entry === undefined) continue;
      this.end(entry.record);
      if (members !== undefined && members.size > 0) this.handOn(members, entry.record.change, undefined);
    }
    if (members?.size === 0) {
      this.members.delete(key);
      this.groups.delete(key);
    }
  }

  /**
   * What `member` may do with the pending notice of `cursor`: take it (a claim, now held), or not (held by
   * another member, already its own, given back by it, or it is at its max_in_flight).
   */
  take(member: GroupMember, cursors: readonly CursorRecord[]): Promise<(HeldClaim | ClaimRefusal)[]> {
    return Promise.resolve(cursors.map((cursor) => this.takeNow(member, cursor)));
  }

  /** Claims are in memory: nothing to read ahead. */
  prepare(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  private takeNow(member: GroupMember, cursor: CursorRecord): HeldClaim | ClaimRefusal {
    const key = groupKey(member.namespace, member.group);
    let group = this.groups.get(key);
    if (group === undefined) this.groups.set(key, (group = new Map()));
    const pair = pairKey(cursor.watcherKey, cursor.target);
    const state = group.get(pair);
    const decision = decideClaim(state, cursor.notified, { self: member, held: member.held.size, maxInFlight: member.maxInFlight, declined: member.declined.get(pair) });
    if (!decision.take) return decision.why;
    if (decision.endsStaleClaim) this.end(state!);
    const id = randomUUID();
    const record: ClaimRecord = { id, holder: member, notified: cursor.notified, deliveryCount: decision.deliveryCount, change: { watcherKey: cursor.watcherKey, target: cursor.target } };
    group.set(pair, record);
    this.byId.set(id, { record, group: key });
    member.held.add(id);
    return { claimId: id, deliveryCount: decision.deliveryCount };
  }

  /**
   * A pair read as it is now (its cursor, or none: unwatched): a claim on a notice that is no longer
   * pending as claimed (acknowledged, reopened as a new notice, or gone) ends, and its holder's slot frees.
   * Nothing is handed on: every member hears the pair's change itself.
   */
  settle(_member: GroupMember, change: PairChange, cursor: CursorRecord | undefined): void {
    const pair = pairKey(change.watcherKey, change.target);
    for (const [key, group] of this.groups) {
      if (!key.startsWith(`${change.target.namespace}\u0000`)) continue;
      const record = group.get(pair);
      if (record === undefined) continue;
      const stillPending = cursor !== undefined && hasLiveNotice(cursor) && cursor.notified === record.notified;
      if (stillPending) continue;
      this.end(record);
      group.delete(pair);
    }
  }

  /**
   * Gives claims back (ReleaseNotices): each held one of `namespace`, held over the connection `peer`, whose
   * watcher `mayRelease` allows is handed to the group's other members at once; the rest answer false,
   * whatever they were.
   */
  release(claimIds: readonly string[], namespace: string, peer: string, mayRelease: (watcherKey: string) => boolean): Promise<boolean[]> {
    return Promise.resolve(
      claimIds.map((id) => {
        const entry = this.byId.get(id);
        const holder = entry?.record.holder;
        if (entry === undefined || holder === undefined || holder.peer !== peer) return false;
        if (entry.record.change.target.namespace !== namespace || !mayRelease(entry.record.change.watcherKey)) return false;
        holder.declined.set(pairKey(entry.record.change.watcherKey, entry.record.change.target), entry.record.notified);
        this.end(entry.record);
        const members = this.members.get(entry.group);
        if (members !== undefined) this.handOn(members, entry.record.change, holder);
        return true;
      }),
    );
  }

  /** Who holds the pending notices of some cursors (N = `notified`), per group: `<group> <peer>` lines; empty when none does. */
  holders(): Promise<(cursor: CursorRecord) => string> {
    return Promise.resolve((cursor) => this.claimedBy(cursor));
  }

  private claimedBy(cursor: CursorRecord): string {
    if (!hasLiveNotice(cursor)) return "";
    const pair = pairKey(cursor.watcherKey, cursor.target);
    const holders: string[] = [];
    for (const group of this.groups.values()) {
      const record = group.get(pair);
      if (record?.holder !== undefined && record.notified === cursor.notified && record.change.target.namespace === cursor.target.namespace) {
        holders.push(`${record.holder.group} ${record.holder.peer}`);
      }
    }
    return holders.sort().join("\n");
  }

  /** Nothing outlives the process: its members' streams end with it. */
  async stop(): Promise<void> {}

  /** Claims held now, in every group. */
  get heldCount(): number {
    return this.byId.size;
  }

  /** Ends a record's claim: its id is forgotten, its holder's slot frees; its state stays for the delivery count. */
  private end(record: ClaimRecord): void {
    const holder = record.holder;
    if (record.id !== undefined) this.byId.delete(record.id);
    if (holder !== undefined && record.id !== undefined) {
      holder.held.delete(record.id);
      holder.slotFreed();
    }
    record.holder = undefined;
    record.id = undefined;
  }
}
