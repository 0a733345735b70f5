/**
 * The claims of consumer groups across replicas (SPEC §6.1, §11), kept in the ledger every replica shares
 * (store/postgres/claim-tables), with this replica's part of them in memory: which of its members holds
 * which claim, and what each gave back.
 *
 * Fencing. A claim is held by a member stream of an **incarnation** of this replica. An incarnation is alive
 * while its ledger row has not expired: this replica renews it every `renewEveryMs` for `ttlMs` from the
 * database's now, and a renewal never revives a row that has expired, so an incarnation that expired is
 * dead for good (this replica goes on under a new one). A take succeeds only while the taker's incarnation
 * is alive and the claim's row is as it was read (its generation), so two members never win the same
 * notice. A replica that has not had a renewal answered for `ttlMs − marginMs`, measured from when it sent
 * the renewal, ends every member stream it serves: by then no other replica can yet see its claims as free,
 * since the row runs `ttlMs` from a moment after that send. Then the claims of the dead incarnation are freed
 * by whichever replica sweeps first, and their notices go to members elsewhere through the feed.
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { StatusError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { CursorRecord, PairChange } from "../domain/records.js";
import { hasLiveNotice, pairKey } from "../domain/cursor-rules.js";
import { decideClaim } from "../domain/consumer-group.js";
import type { ClaimLedger, ClaimRow, ClaimTake } from "../store/store.js";
import type { ClaimReading, ClaimRefusal, GroupMember, HeldClaim, NoticeClaims } from "./notice-claims.js";

/** How the ledger's liveness is timed; tests may shorten it. */
export interface ClaimTimings {
  /** How long an incarnation lives after each renewal (the database's clock). */
  ttlMs: number;
  renewEveryMs: number;
  /** How long before its row can expire a replica gives up its claims when its renewals go unanswered. */
  marginMs: number;
  /** How often the claims of expired incarnations are looked for and freed. */
  sweepEveryMs: number;
  /** How often rows of notices acknowledged while nobody held them are removed. */
  tidyEveryMs: number;
}

/** SPEC §11's bounds: a replica cut off gives up its claims within 1.5 s; another frees them 2-2.5 s after its last renewal. */
export const defaultClaimTimings: ClaimTimings = { ttlMs: 2000, renewEveryMs: 500, marginMs: 500, sweepEveryMs: 500, tidyEveryMs: 30_000 };

/** Rows of acknowledged free claims removed per tidy pass. */
const tidyRows = 500;

/** A claim this replica's member holds. */
interface LocalClaim {
  id: string;
  member: GroupMember;
  change: PairChange;
  notified: number;
}

/** A group's claim rows by pair. */
type ClaimRows = Map<string, ClaimRow>;

function claimRowsByPair(rows: readonly ClaimRow[]): ClaimRows {
  return new Map(rows.map((row) => [pairKey(row.pair.watcherKey, row.pair.target), row]));
}

function memberPair(member: GroupMember, change: PairChange): string {
  return `${member.id}\u0000${pairKey(change.watcherKey, change.target)}`;
}

export class SharedClaims implements NoticeClaims {
  /** The incarnation this replica holds claims under, while it believes it alive. */
  private incarnation: string | undefined;
  /** Until when (performance.now()) that belief holds without another renewal answered. */
  private validUntil = 0;
  private readonly members = new Set<GroupMember>();
  private readonly byId = new Map<string, LocalClaim>();
  private readonly byMemberPair = new Map<string, LocalClaim>();
  /** Claims of members that left which the ledger has not freed yet (it was away): freed on the next sweep. */
  private readonly toFree = new Set<string>();
  private renewTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private lossTimer: NodeJS.Timeout | undefined;
  private renewing = false;
  private sweeping = false;
  private lastTidyMs = 0;
  private stopped = false;

  constructor(
    private readonly ledger: ClaimLedger,
    private readonly log: Logger,
    /** The prefix of this replica's incarnations (its node id and process): who held a claim, in the ledger. */
    private readonly holderPrefix: string,
    /** True once the database has answered (the store has started). */
    private readonly ready: () => boolean,
    private readonly timings: ClaimTimings = defaultClaimTimings,
  ) {}

  /** Starts renewing and sweeping. */
  start(): void {
    this.renewTimer = setInterval(() => void this.renew(), this.timings.renewEveryMs);
    this.renewTimer.unref();
    this.sweepTimer = setInterval(() => void this.sweep(), this.timings.sweepEveryMs);
    this.sweepTimer.unref();
    void this.renew();
  }

  /** The incarnation claims are taken under now, if it is alive as far as this replica can tell. */
  private liveIncarnation(): string | undefined {
    if (this.incarnation !== undefined && performance.now() >= this.validUntil) this.lose("its renewals went unanswered");
    return this.incarnation;
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.stopped || !this.ready()) return;
    this.renewing = true;
    const sentAt = performance.now();
    try {
      const current = this.incarnation;
      if (current === undefined) {
        const next = `${this.holderPrefix}/${randomUUID()}`;
        await this.ledger.startHolder(next, this.timings.ttlMs);
        if (this.stopped) return void (await this.ledger.endHolder(next));
        this.incarnation = next;
        this.renewed(sentAt);
        this.log.debug({ incarnation: next }, "holding consumer groups' claims");
      } else if (await this.ledger.renewHolder(current, this.timings.ttlMs)) {
        if (this.incarnation === current) this.renewed(sentAt);
      } else if (this.incarnation === current) {
        this.lose("its hold had expired before a renewal reached the database");
      }
    } catch (err) {
      this.log.debug({ err }, "renewing the hold on consumer groups' claims failed; retrying");
    } finally {
      this.renewing = false;
    }
  }

  /** A renewal sent at `sentAt` was answered: claims may be held until `ttlMs − marginMs` after it. */
  private renewed(sentAt: number): void {
    this.validUntil = sentAt + this.timings.ttlMs - this.timings.marginMs;
    clearTimeout(this.lossTimer);
    this.lossTimer = setTimeout(() => this.liveIncarnation(), Math.max(0, this.validUntil - performance.now()) + 1);
    this.lossTimer.unref();
  }

  /** This replica can no longer hold claims: its members' streams end, and what they held is freed by a sweep. */
  private lose(why: string): void {
    if (this.incarnation === undefined) return;
    this.log.warn(
      { members: this.members.size, claims: this.byId.size },
      `consumer groups' claims given up (${why}): their members' streams end, and the claims go to members that subscribe again`,
    );
    this.incarnation = undefined;
    clearTimeout(this.lossTimer);
    const error = new StatusError("UNAVAILABLE", "this server lost its hold on the database and can no longer hold claims; subscribe again");
    for (const claim of this.byId.values()) claim.member.held.delete(claim.id);
    this.byId.clear();
    this.byMemberPair.clear();
    this.toFree.clear();
    const members = [...this.members];
    this.members.clear();
    for (const member of members) member.end(error);
  }

  private async sweep(): Promise<void> {
    if (this.sweeping || this.stopped || !this.ready() || this.incarnation === undefined) return;
    this.sweeping = true;
    try {
      if (this.toFree.size > 0) {
        const ids = [...this.toFree];
        await this.ledger.free(ids);
        for (const id of ids) this.toFree.delete(id);
      }
      await this.ledger.freeExpired();
      if (performance.now() - this.lastTidyMs >= this.timings.tidyEveryMs) {
        this.lastTidyMs = performance.now();
        await this.ledger.removeSettled(tidyRows);
      }
    } catch (err) {
      this.log.debug({ err }, "freeing the claims of replicas that went away failed; retrying");
    } finally {
      this.sweeping = false;
    }
  }

  join(member: GroupMember): void {
    if (this.stopped || this.liveIncarnation() === undefined) {
      throw new StatusError("UNAVAILABLE", "consumer_group: this server cannot hold claims until it reaches its database; subscribe again");
    }
    this.members.add(member);
  }

  leave(member: GroupMember): void {
    if (!this.members.delete(member)) return;
    const ids = [...member.held];
    for (const id of ids) {
      const claim = this.byId.get(id);
      if (claim !== undefined) this.end(claim);
    }
    if (ids.length === 0) return;
    this.ledger.free(ids).catch((err: unknown) => {
      for (const id of ids) this.toFree.add(id);
      this.log.debug({ err }, "freeing a departed member's claims failed; retrying");
    });
  }

  /** The claim rows of some pairs of the member's group, read beside the cursors: `take`'s first round uses them. */
  async prepare(member: GroupMember, pairs: readonly PairChange[]): Promise<ClaimRows> {
    return claimRowsByPair(await this.ledger.read(member.namespace, member.group, pairs));
  }

  async take(member: GroupMember, cursors: readonly CursorRecord[], reading?: ClaimReading): Promise<(HeldClaim | ClaimRefusal)[]> {
    const answers: (HeldClaim | ClaimRefusal)[] = cursors.map(() => "held");
    // What this replica knows alone: its member's own claims, and what it gave back.
    const candidates: number[] = [];
    cursors.forEach((cursor, i) => {
      this.settle(member, cursor, cursor);
      if (this.byMemberPair.has(memberPair(member, cursor))) answers[i] = "mine";
      else if (member.declined.get(pairKey(cursor.watcherKey, cursor.target)) === cursor.notified) answers[i] = "declined";
      else candidates.push(i);
    });
    if (member.held.size >= member.maxInFlight) return answers.map((answer) => (answer === "held" ? "full" : answer));
    const incarnation = this.liveIncarnation();
    if (candidates.length === 0 || incarnation === undefined || !this.members.has(member)) return answers;
    const holder = `${incarnation}/${member.id}`;
    // Rounds: a take lost to another member's frees the slot it was counted against, so notices answered
    // "full" in a round that lost some are tried again (a few rounds at most: each one loses only to takes
    // that won).
    let remaining = candidates;
    for (let round = 0; round < 4 && remaining.length > 0; round++) {
      const changes = remaining.map((i): PairChange => ({ watcherKey: cursors[i]!.watcherKey, target: cursors[i]!.target }));
      const rows = round === 0 && reading instanceof Map ? (reading as ClaimRows) : claimRowsByPair(await this.ledger.read(member.namespace, member.group, changes));
      // The rule of SPEC §6.1 on each row as read; the ledger takes what it allows if nothing changed since.
      const takes: { i: number; take: ClaimTake }[] = [];
      const full: number[] = [];
      let held = member.held.size;
      remaining.forEach((i, j) => {
        const cursor = cursors[i]!;
        const row = rows.get(pairKey(cursor.watcherKey, cursor.target));
        const state = row === undefined ? undefined : { notified: row.notified, holder: row.holder, deliveryCount: row.deliveryCount };
        const decision = decideClaim(state, cursor.notified, { self: holder, held, maxInFlight: member.maxInFlight, declined: undefined });
        if (!decision.take) {
          answers[i] = decision.why;
          if (decision.why === "full") full.push(i);
          return;
        }
        held++;
        const take: ClaimTake = {
          group: member.group,
          pair: changes[j]!,
          expectedGeneration: row?.generation,
          notified: cursor.notified,
          deliveryCount: decision.deliveryCount,
          claimId: randomUUID(),
          holder,
          incarnation,
          peer: member.peer,
        };
        takes.push({ i, take });
      });
      if (takes.length === 0) break;
      const won = await this.ledger.take(takes.map(({ take }) => take));
      if (this.incarnation !== incarnation || !this.members.has(member)) {
        // Its stream ended, or this replica gave its claims up, while the take was out: nobody holds them here.
        if (this.incarnation === incarnation) for (const id of won) this.leaveLater(id);
        return cursors.map(() => "held");
      }
      for (const { i, take } of takes) {
        // One lost to another member's take in between (or whose notice closed): if it is handed on, its group hears.
        if (!won.has(take.claimId)) {
          answers[i] = "held";
          continue;
        }
        const claim: LocalClaim = { id: take.claimId, member, change: take.pair, notified: take.notified };
        this.byId.set(claim.id, claim);
        this.byMemberPair.set(memberPair(member, take.pair), claim);
        member.held.add(claim.id);
        answers[i] = { claimId: claim.id, deliveryCount: take.deliveryCount };
      }
      if (won.size === takes.length) break;
      remaining = full;
    }
    return answers;
  }

  /** A claim taken for a member that has gone: freed now, or by the next sweep. */
  private leaveLater(claimId: string): void {
    this.ledger.free([claimId]).catch(() => this.toFree.add(claimId));
  }

  settle(member: GroupMember, change: PairChange, cursor: CursorRecord | undefined): void {
    const claim = this.byMemberPair.get(memberPair(member, change));
    if (claim === undefined) return;
    if (cursor !== undefined && hasLiveNotice(cursor) && cursor.notified === claim.notified) return;
    this.end(claim);
    // Nobody needs to hear of it: every member reads the pair's change itself. A row left behind is tidied.
    this.ledger.forget(claim.id).catch((err: unknown) => this.log.debug({ err }, "forgetting a settled claim failed"));
  }

  async release(claimIds: readonly string[], namespace: string, peer: string, mayRelease: (watcherKey: string) => boolean): Promise<boolean[]> {
    const asked = new Set<string>();
    const releasable = claimIds.map((id) => {
      // The same id twice in one call is given back once: the second answers false, as after a release.
      if (asked.has(id)) return undefined;
      asked.add(id);
      const claim = this.byId.get(id);
      if (claim === undefined || claim.member.peer !== peer) return undefined;
      if (claim.change.target.namespace !== namespace || !mayRelease(claim.change.watcherKey)) return undefined;
      return claim;
    });
    const claims = [...new Set(releasable.filter((claim) => claim !== undefined))];
    if (claims.length === 0) return claimIds.map(() => false);
    // Given back before the other members hear of it, so that its holder is not handed it again.
    const declinedBefore = claims.map((claim) => {
      const pair = pairKey(claim.change.watcherKey, claim.change.target);
      const before = claim.member.declined.get(pair);
      claim.member.declined.set(pair, claim.notified);
      return { claim, pair, before };
    });
    try {
      await this.ledger.free(claims.map((claim) => claim.id));
    } catch (err) {
      for (const { claim, pair, before } of declinedBefore) {
        if (before === undefined) claim.member.declined.delete(pair);
        else claim.member.declined.set(pair, before);
      }
      throw err;
    }
    for (const claim of claims) this.end(claim);
    return releasable.map((claim) => claim !== undefined);
  }

  async holders(cursors: readonly CursorRecord[]): Promise<(cursor: CursorRecord) => string> {
    const pending = cursors.filter(hasLiveNotice);
    const rows = await this.ledger.heldOf(pending.map((cursor) => ({ watcherKey: cursor.watcherKey, target: cursor.target })));
    const lines = new Map<string, string[]>();
    for (const row of rows) {
      const key = `${row.pair.target.namespace}\u0000${pairKey(row.pair.watcherKey, row.pair.target)}\u0000${row.notified}`;
      let found = lines.get(key);
      if (found === undefined) lines.set(key, (found = []));
      found.push(`${row.group} ${row.peer ?? ""}`);
    }
    return (cursor) =>
      hasLiveNotice(cursor) ? (lines.get(`${cursor.target.namespace}\u0000${pairKey(cursor.watcherKey, cursor.target)}\u0000${cursor.notified}`) ?? []).sort().join("\n") : "";
  }

  get heldCount(): number {
    return this.byId.size;
  }

  /** Ends a claim here: its member's slot frees. */
  private end(claim: LocalClaim): void {
    this.byId.delete(claim.id);
    this.byMemberPair.delete(memberPair(claim.member, claim.change));
    claim.member.held.delete(claim.id);
    claim.member.slotFreed();
  }

  /**
   * Stops holding claims (a graceful stop, after the streams ended): what is still held is freed, and the
   * incarnation ends, so that another replica frees whatever could not be at once.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.renewTimer);
    clearInterval(this.sweepTimer);
    clearTimeout(this.lossTimer);
    const incarnation = this.incarnation;
    this.incarnation = undefined;
    const ids = [...this.byId.keys(), ...this.toFree];
    try {
      if (ids.length > 0) await this.ledger.free(ids);
    } finally {
      if (incarnation !== undefined) await this.ledger.endHolder(incarnation);
    }
  }
}
