import { performance } from "node:perf_hooks";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { StatusError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { CursorsRead, PairChange } from "../domain/records.js";
import { pairKey } from "../domain/cursor-rules.js";
import { hasLiveNotice } from "../domain/cursor-rules.js";
import { noticeFromCursor, type Notice } from "../domain/notice.js";
import { comparePairTo, positionFromPair, findRangeIndex, watcherRangesFromFilter, type PairPosition, type WatcherRange } from "../domain/pair-order.js";
import type { CursorRecord } from "../domain/records.js";
import { ClaimRegistry } from "./claim-registry.js";
import type { ClaimReading, GroupMember, HeldClaim, NoticeClaims } from "./notice-claims.js";

/** Which watchers a subscriber serves: in one namespace, exact keys and key prefixes, all normalised. */
export interface NoticeFilter {
  namespace: string;
  watcherKeys: readonly string[];
  prefixes: readonly string[];
}

/** What a subscription sends: notices (a group member's with its claim), and once the `synced` marker. */
export type NoticeStreamItem = { notice: Notice; claim?: HeldClaim } | { synced: { pendingDelivered: number } };

/** A subscription's consumer group (SPEC §6.1): its name, its bound and the subscriber's address. */
export interface GroupMembership {
  group: string;
  maxInFlight: number;
  peer: string;
}

/**
 * What the hub needs from durable state: pages of a filter's pending cursors, the cursors of some pairs, and
 * the feed of pairs whose pending notice opened, changed or closed (delivered after the change is durable,
 * each batch with its change number, in number order but for this process's own commits, which come first).
 * Every store provides it.
 */
export interface NoticeSource {
  /**
   * Up to `limit` pending cursors of `namespace` whose watcher key is in `range`, strictly after `after` in
   * pair order (domain/pair-order), in pair order.
   */
  pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): Promise<CursorsRead>;
  /** The cursors of the pairs that have one, in no particular order. */
  getCursors(pairs: readonly PairChange[]): Promise<CursorsRead>;
  onPairChanges(listener: (changes: readonly PairChange[], changeNumber: number) => void): () => void;
  /** The change number up to which every pair change has been handed to the listeners: none numbered lower is still to come. */
  changesHeardThrough(): number;
  /** Gaps in that feed, where changes were missed for good (see Store). */
  onFeedGap?(listener: () => void): () => void;
}

/** Waiting notices a group member reads again beyond its free slots when one frees (see offerWaiting). */
const extraOffersPerSlotFreed = 8;

/** How often a subscription that remembers reads ahead of the feed checks whether the feed has passed them. */
const forgetAgainMs = 50;

/** Pending notices read from the store in one page, and dirty pairs in one round trip, at most. */
export const noticePageSize = 256;

/** A watcher's identity across namespaces: a watcher and its targets share one namespace. */
function watcherIn(namespace: string, watcherKey: string): string {
  return `${namespace}\u0000${watcherKey}`;
}

function changeKey(change: PairChange): string {
  return pairKey(change.watcherKey, change.target);
}

/**
 * A point of the backlog scan, which reads the ranges of a filter in order and each in pair order: `range`
 * is the range it is in, and `last` the last pair of it read, or "all" once the range is read to its end.
 */
interface ScanPoint {
  range: number;
  last: PairPosition | "all";
}

/** A page of the backlog that was read ahead of the feed: a change numbered up to `through` for a pair up to `end` is in it. */
interface PageMark {
  end: ScanPoint;
  through: number;
}

/**
 * One subscriber. What it holds is bounded by a page and by the pairs that change while it is open, never by
 * the pending notices it has to deliver: the backlog is read a page at a time, in pair order, as the
 * consumer asks for more, and a notice sent is remembered only while the feed has not yet passed the read
 * it came from (how a change heard later is told from one already sent).
 */
class Subscription {
  readonly ranges: readonly WatcherRange[];
  /** How far the backlog scan has read (every pending pair up to it); undefined before its first page. */
  private scanned: ScanPoint | undefined;
  backlogDone = false;
  /** Pages of the backlog read ahead of the feed, in order; and the end of the newest one dropped. */
  private readonly pageMarks: PageMark[] = [];
  private droppedEnd: ScanPoint | undefined;
  /** Pairs sent from a read ahead of the feed, with the change number that read reflects. */
  private readonly ahead = new Map<string, number>();
  /** While a page of the backlog is being read: changes heard for pairs it has not covered (the newest number of each). */
  private heardDuringRead: Map<string, { change: PairChange; changeNumber: number }> | undefined;
  /** Pairs to read and send again, at most one entry each (newest state wins: the notice is read when sent). */
  readonly dirty = new Map<string, PairChange>();
  /** When each dirty pair was first marked since it was last checked (performance.now()): for the metrics. */
  readonly markedAt = new Map<string, number>();
  /**
   * Why this stream must end: the feed missed changes (it cannot know what it missed), or its group's claims
   * can no longer be held here. Its client subscribes again.
   */
  failure: StatusError | undefined;
  private wake: (() => void) | undefined;
  /** Its membership of a consumer group, if it named one. */
  member: Member | undefined;
  /** A group member's pending notices that came while it held all it may: offered again when a slot frees. */
  readonly waitingForSlot = new Map<string, PairChange>();

  constructor(readonly filter: NoticeFilter) {
    this.ranges = watcherRangesFromFilter(filter.watcherKeys, filter.prefixes);
    this.backlogDone = this.ranges.length === 0;
  }

  /** True while a group member holds as many claims as it may. */
  get full(): boolean {
    return this.member !== undefined && this.member.held.size >= this.member.maxInFlight;
  }

  /** Keeps a pending notice for when a slot frees (at most one entry a pair). */
  waitForSlot(change: PairChange): void {
    this.waitingForSlot.set(changeKey(change), change);
  }

  /** A slot freed: notices that waited for one are read again. */
  slotFreed(): void {
    this.offerWaiting();
    this.wakeUp();
  }

  /**
   * Reads again as many waiting notices as it has free slots, and a few more (some may be held by another
   * member by now: those drop out, as they come back to it when their claim ends); the rest wait on. Each
   * freed slot costs a few reads, however many notices wait.
   */
  offerWaiting(): void {
    const member = this.member;
    if (member === undefined || member.held.size >= member.maxInFlight) return;
    let offered = member.maxInFlight - member.held.size + extraOffersPerSlotFreed;
    for (const [key, change] of this.waitingForSlot) {
      if (offered-- <= 0) break;
      this.waitingForSlot.delete(key);
      this.markDirty(change);
    }
  }

  /** Marks a pair to be read again, as a claim on it ended elsewhere: as if its change were heard now. */
  offered(change: PairChange): void {
    this.heard(change, Number.MAX_SAFE_INTEGER);
  }

  matchesPrefix(change: PairChange): boolean {
    return change.target.namespace === this.filter.namespace && this.filter.prefixes.some((prefix) => change.watcherKey.startsWith(prefix));
  }

  /** True when the pair comes at or before `point` in the scan's order. */
  private isUpTo(change: PairChange, point: ScanPoint | undefined): boolean {
    if (point === undefined) return false;
    const range = findRangeIndex(this.ranges, change.watcherKey);
    // A key no range holds (a prefix followed by the highest code point and more) is never scanned: live only.
    if (range < 0 || range < point.range) return true;
    if (range > point.range) return false;
    return point.last === "all" || comparePairTo(change.watcherKey, change.target, point.last) <= 0;
  }

  /** True when the backlog scan has passed the pair: from now on, its changes are this stream's to send. */
  private covers(change: PairChange): boolean {
    return this.backlogDone || this.isUpTo(change, this.scanned);
  }

  /** The change number of the read that covered the pair, while that read is ahead of the feed. */
  private coveringRead(change: PairChange): number | undefined {
    const ahead = this.ahead.get(changeKey(change));
    if (ahead !== undefined) return ahead;
    if (this.isUpTo(change, this.droppedEnd)) return undefined;
    return this.pageMarks.find((mark) => this.isUpTo(change, mark.end))?.through;
  }

  /** A change heard from the feed: marks the pair dirty unless what this stream read already holds it. */
  heard(change: PairChange, changeNumber: number): void {
    if (!this.covers(change)) {
      // The scan has not reached the pair: its page, once read, holds this change, unless the read is
      // out now and may have been answered before it (settled in `pageRead`).
      if (this.heardDuringRead !== undefined) {
        const key = changeKey(change);
        const earlier = this.heardDuringRead.get(key);
        if (earlier === undefined || earlier.changeNumber < changeNumber) this.heardDuringRead.set(key, { change, changeNumber });
      }
      return;
    }
    const through = this.coveringRead(change);
    if (through !== undefined && changeNumber <= through) return;
    this.ahead.delete(changeKey(change));
    this.markDirty(change);
  }

  private markDirty(change: PairChange): void {
    const key = changeKey(change);
    this.dirty.set(key, change);
    if (!this.markedAt.has(key)) this.markedAt.set(key, performance.now());
    this.wakeUp();
  }

  /** Takes up to `limit` dirty pairs out of the set, oldest first (their marking times stay until they are settled). */
  takeDirty(limit: number): PairChange[] {
    const taken: PairChange[] = [];
    for (const [key, change] of this.dirty) {
      if (taken.length === limit) break;
      taken.push(change);
      this.dirty.delete(key);
    }
    return taken;
  }

  /** What the subscription remembers of reads ahead of the feed: sent pairs and pages (none once the feed passes them). */
  get remembered(): number {
    return this.ahead.size + this.pageMarks.length;
  }

  /** Remembers that a notice was sent from a read reflecting `through`, while the feed has not passed it. */
  sentFrom(change: PairChange, through: number, heardThrough: number): void {
    if (through > heardThrough) this.ahead.set(changeKey(change), through);
  }

  /** Forgets what the feed has passed: no change numbered that low can be heard any more. */
  forgetHeard(heardThrough: number): void {
    while (this.pageMarks.length > 0 && this.pageMarks[0]!.through <= heardThrough) this.droppedEnd = this.pageMarks.shift()!.end;
    for (const [key, through] of this.ahead) if (through <= heardThrough) this.ahead.delete(key);
  }

  /** Where the next page of the backlog starts: its range, and the pair it comes after. */
  nextPage(): { range: WatcherRange; after: PairPosition | undefined } {
    this.heardDuringRead = new Map();
    const scanned = this.scanned;
    if (scanned === undefined) return { range: this.ranges[0]!, after: undefined };
    if (scanned.last === "all") return { range: this.ranges[scanned.range + 1]!, after: undefined };
    return { range: this.ranges[scanned.range]!, after: scanned.last };
  }

  /**
   * A page of the backlog was read: the scan covers it (to the end of its range when the page is short),
   * and a change heard while it was out that it does not hold is marked dirty.
   */
  pageRead(read: CursorsRead, limit: number, heardThrough: number): void {
    const scanned = this.scanned;
    const range = scanned === undefined ? 0 : scanned.last === "all" ? scanned.range + 1 : scanned.range;
    const last = read.cursors.at(-1);
    // A short page read its range to the end.
    const point: ScanPoint = read.cursors.length < limit || last === undefined ? { range, last: "all" } : { range, last: positionFromPair(last.watcherKey, last.target) };
    this.scanned = point;
    this.backlogDone = point.last === "all" && range === this.ranges.length - 1;
    // Reads come one after another, so their numbers never go down: a page the feed has passed is not
    // kept, nor is any before it.
    this.forgetHeard(heardThrough);
    if (read.through > heardThrough) this.pageMarks.push({ end: point, through: read.through });
    else this.droppedEnd = point;
    const heard = this.heardDuringRead!;
    this.heardDuringRead = undefined;
    for (const { change, changeNumber } of heard.values()) if (changeNumber > read.through) this.heard(change, changeNumber);
  }

  fail(error: StatusError): void {
    this.failure ??= error;
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Resolves when a pair becomes dirty, the feed has a gap, or `signal` aborts. */
  changed(signal: AbortSignal): Promise<void> {
    if (this.dirty.size > 0 || this.failure !== undefined || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const settle = (): void => {
        signal.removeEventListener("abort", settle);
        this.wake = undefined;
        resolve();
      };
      this.wake = settle;
      signal.addEventListener("abort", settle, { once: true });
    });
  }
}

/** Numbers this process's group members. */
let membersJoined = 0;

/** A subscription's membership of a group, as the claims see it. */
class Member implements GroupMember {
  readonly id = String(++membersJoined);
  readonly held = new Set<string>();
  readonly declined = new Map<string, number>();

  constructor(
    readonly namespace: string,
    readonly group: string,
    readonly peer: string,
    readonly maxInFlight: number,
    readonly subscription: Subscription,
  ) {}

  slotFreed(): void {
    this.subscription.slotFreed();
  }

  end(error: StatusError): void {
    this.subscription.fail(error);
  }
}

/**
 * Delivers stale notices to subscribers. It learns from the store's feed which pairs changed and reads
 * each notice from the store when it sends it, so delivery is driven by durable cursor state: a
 * reconnecting or new subscriber gets every pending notice again, a page at a time as it reads them, and a
 * stalled one costs at most a page and one entry per pair that changed meanwhile.
 */
export class NoticeHub {
  /** Subscriptions by the watchers they name, keyed by `watcherIn` (namespace and watcher key). */
  private readonly byWatcher = new Map<string, Set<Subscription>>();
  private readonly byPrefix = new Set<Subscription>();
  private unsubscribe: (() => void) | undefined;
  private unsubscribeGaps: (() => void) | undefined;
  /** A pass that forgets what the feed has passed is due after this turn, or later. */
  private forgetSoon = false;
  private forgetTimer: NodeJS.Timeout | undefined;
  /** Subscriptions that remember reads ahead of the feed. */
  private readonly remembering = new Set<Subscription>();
  /**
   * The consumer groups' claims (SPEC §6.1): in this process (a notice whose claim ended while pending is
   * offered to the other members at once), or shared by replicas (it reaches them through the feed).
   */
  readonly claims: NoticeClaims;

  constructor(
    private readonly store: NoticeSource,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    claims?: NoticeClaims,
  ) {
    this.claims =
      claims ??
      new ClaimRegistry((members, change, except) => {
        for (const member of members) if (member !== except) (member as Member).subscription.offered(change);
      });
  }

  /** Starts listening to the store's feed. */
  start(): void {
    this.unsubscribe ??= this.store.onPairChanges((changes, changeNumber) => this.dispatch(changes, changeNumber));
    this.unsubscribeGaps ??= this.store.onFeedGap?.(() => {
      this.log.warn("the feed of changes has a gap: every subscription ends, and its client subscribes again");
      const gap = new StatusError("UNAVAILABLE", "this server may have missed changes of pending notices; subscribe again");
      for (const sub of this.allSubscriptions()) sub.fail(gap);
    });
  }

  /** Stops listening. Open subscriptions end when their signals abort. */
  stop(): void {
    clearTimeout(this.forgetTimer);
    this.forgetTimer = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.unsubscribeGaps?.();
    this.unsubscribeGaps = undefined;
  }

  /** Number of open subscriptions. */
  get subscriptions(): number {
    return this.allSubscriptions().size;
  }

  /** Pairs waiting to be (re)checked across all subscriptions: at most one per pair per subscription. */
  get queuedPairs(): number {
    let queued = 0;
    for (const sub of this.allSubscriptions()) queued += sub.dirty.size;
    return queued;
  }

  /**
   * Sent notices and backlog pages the subscriptions remember because they were read ahead of the feed:
   * forgotten as the feed passes them, so it stays small whatever is pending.
   */
  get rememberedReads(): number {
    let remembered = 0;
    for (const sub of this.allSubscriptions()) remembered += sub.remembered;
    return remembered;
  }

  private allSubscriptions(): Set<Subscription> {
    const all = new Set(this.byPrefix);
    for (const subs of this.byWatcher.values()) for (const sub of subs) all.add(sub);
    return all;
  }

  /**
   * Serves one subscriber until `signal` aborts (or the consumer stops asking): every notice pending for
   * the filter, a page at a time, then the synced marker, then each notice as it opens or reopens (a
   * change to a pair the backlog has passed is sent as it comes, before the marker too). The consumer's
   * pace is the flow control: while it does not ask for the next item, changes only mark their pair, and
   * the notice sent when it asks again is read then, so it is the newest. Throws UNAVAILABLE when the
   * store's feed missed changes: a new subscription reads every pending notice again.
   */
  async *serve(filter: NoticeFilter, signal: AbortSignal, membership?: GroupMembership): AsyncGenerator<NoticeStreamItem, void, undefined> {
    const sub = new Subscription(filter);
    if (membership !== undefined) {
      const member = new Member(filter.namespace, membership.group, membership.peer, membership.maxInFlight, sub);
      this.claims.join(member);
      sub.member = member;
    }
    this.register(sub);
    try {
      let pendingDelivered = 0;
      let synced = false;
      while (!signal.aborted) {
        if (sub.failure !== undefined) throw sub.failure;
        sub.forgetHeard(this.store.changesHeardThrough());
        if (sub.dirty.size > 0) {
          for await (const item of this.sendDirty(sub, signal)) {
            if (!synced) pendingDelivered++;
            yield item;
          }
        }
        // A group member that holds all it may reads no further: what it cannot take is left to the others.
        if (!sub.backlogDone && !sub.full) {
          const { range, after } = sub.nextPage();
          const read = await this.store.pendingPage(filter.namespace, range, after, noticePageSize);
          sub.pageRead(read, noticePageSize, this.store.changesHeardThrough());
          this.rememberIfAhead(sub);
          // A group's member claims what it reads, a page at once (one round trip on replicas). It skips a
          // pair that changed since the page was read (acknowledged by a member while this one yielded an
          // earlier page): that is read again from the dirty set.
          const pending = read.cursors.filter((cursor) => hasLiveNotice(cursor) && !(sub.member !== undefined && sub.dirty.has(changeKey(cursor))));
          const claims = await this.claimsFor(sub, pending);
          for (const [i, cursor] of pending.entries()) {
            if (signal.aborted) return;
            const claim = claims?.[i];
            if (claim === "full") {
              // The rest of the page waits for a slot (a page at most): offered again when one frees.
              for (const rest of pending.slice(i)) sub.waitForSlot(rest);
              break;
            }
            if (claim === "skip") continue;
            this.metrics?.noticesDelivered.inc();
            pendingDelivered++;
            yield claim === undefined ? { notice: noticeFromCursor(cursor) } : { notice: noticeFromCursor(cursor), claim };
          }
          // Other calls are served between pages, however fast the consumer reads.
          await yieldToEventLoop();
          continue;
        }
        if (sub.dirty.size > 0) continue;
        // A member with free slots reads the notices that waited for one (a few at a time).
        if (sub.member !== undefined && !sub.full && sub.waitingForSlot.size > 0) {
          sub.offerWaiting();
          continue;
        }
        if (!synced) {
          synced = true;
          yield { synced: { pendingDelivered } };
          continue;
        }
        await sub.changed(signal);
      }
    } finally {
      this.unregister(sub);
      if (sub.member !== undefined) this.claims.leave(sub.member);
    }
  }

  /**
   * For a group member, the claims on pending notices it may send, in their order (`skip`: another member
   * holds it, it is already this member's, or this member gave it back; `full`: it holds all it may);
   * undefined outside a group.
   */
  private async claimsFor(sub: Subscription, cursors: readonly CursorRecord[], reading?: ClaimReading): Promise<(HeldClaim | "skip" | "full")[] | undefined> {
    if (sub.member === undefined) return undefined;
    const taken = cursors.length === 0 ? [] : await this.claims.take(sub.member, cursors, reading);
    // A claim is sent only while it holds: a stream whose claims were given up meanwhile ends instead.
    if (sub.failure !== undefined) throw sub.failure;
    return taken.map((claim) => (claim === "full" ? "full" : typeof claim === "string" ? "skip" : claim));
  }

  /**
   * Reads the dirty pairs, up to a page, in one round trip and yields the notice of each that is pending. A
   * pair marked again while its read is out is left for the next read, so what is sent is never older than
   * the newest change heard.
   */
  private async *sendDirty(sub: Subscription, signal: AbortSignal): AsyncGenerator<{ notice: Notice; claim?: HeldClaim }, void, undefined> {
    const batch = sub.takeDirty(noticePageSize);
    // A member's claims are read beside the cursors (one round trip for both, on replicas).
    const [read, reading] = await Promise.all([this.store.getCursors(batch), sub.member === undefined ? undefined : this.claims.prepare(sub.member, batch)]);
    const heardThrough = this.store.changesHeardThrough();
    const cursors = new Map(read.cursors.map((cursor) => [changeKey(cursor), cursor]));
    const ready: { change: PairChange; cursor: CursorRecord; markedAt: number | undefined }[] = [];
    for (const change of batch) {
      const key = changeKey(change);
      if (sub.dirty.has(key)) continue;
      const markedAt = sub.markedAt.get(key);
      sub.markedAt.delete(key);
      const cursor = cursors.get(key);
      // A group's claim on a notice that is no longer pending as claimed ends (an ack, a reopen, an unwatch).
      if (sub.member !== undefined) {
        this.claims.settle(sub.member, change, cursor);
        // What it gave back is forgotten once that notice is no longer the pending one.
        const declined = sub.member.declined.get(key);
        if (declined !== undefined && (cursor === undefined || !hasLiveNotice(cursor) || cursor.notified !== declined)) sub.member.declined.delete(key);
      }
      if (cursor === undefined || !hasLiveNotice(cursor)) continue;
      ready.push({ change, cursor, markedAt });
    }
    const claims = await this.claimsFor(sub, ready.map(({ cursor }) => cursor), reading);
    for (const [i, { change, cursor, markedAt }] of ready.entries()) {
      if (signal.aborted) return;
      const claim = claims?.[i];
      if (claim === "full") {
        sub.waitForSlot(change);
        continue;
      }
      if (claim === "skip") continue;
      // A pair marked again while earlier notices were yielded is left for the next read, so what is sent
      // is never older than the newest change heard; a member sends what it claimed (the claim is on it).
      if (claim === undefined && sub.dirty.has(changeKey(change))) continue;
      sub.sentFrom(change, read.through, heardThrough);
      this.rememberIfAhead(sub);
      this.metrics?.noticesDelivered.inc();
      if (markedAt !== undefined) this.metrics?.noticeDelivery.observe((performance.now() - markedAt) / 1000);
      yield claim === undefined ? { notice: noticeFromCursor(cursor) } : { notice: noticeFromCursor(cursor), claim };
    }
  }

  private register(sub: Subscription): void {
    for (const watcherKey of sub.filter.watcherKeys) {
      const key = watcherIn(sub.filter.namespace, watcherKey);
      let subs = this.byWatcher.get(key);
      if (subs === undefined) this.byWatcher.set(key, (subs = new Set()));
      subs.add(sub);
    }
    if (sub.filter.prefixes.length > 0) this.byPrefix.add(sub);
  }

  private unregister(sub: Subscription): void {
    for (const watcherKey of sub.filter.watcherKeys) {
      const key = watcherIn(sub.filter.namespace, watcherKey);
      const subs = this.byWatcher.get(key);
      subs?.delete(sub);
      if (subs?.size === 0) this.byWatcher.delete(key);
    }
    this.byPrefix.delete(sub);
    this.remembering.delete(sub);
  }

  private dispatch(changes: readonly PairChange[], changeNumber: number): void {
    try {
      for (const change of changes) {
        // A subscription that names the watcher and matches a prefix too hears the change once. A claim that
        // ended is only its group's members' to hear.
        const hears = (sub: Subscription): boolean => change.group === undefined || sub.member?.group === change.group;
        const named = this.byWatcher.get(watcherIn(change.target.namespace, change.watcherKey));
        for (const sub of named ?? []) if (hears(sub)) sub.heard(change, changeNumber);
        for (const sub of this.byPrefix) if (named?.has(sub) !== true && sub.matchesPrefix(change) && hears(sub)) sub.heard(change, changeNumber);
      }
    } catch (err) {
      // The feed runs inside the writer's call: a delivery fault must never fail the write.
      this.log.error({ err }, "notice dispatch failed");
    }
    this.scheduleForgetting();
  }

  /**
   * Once the feed has moved on (after this turn: it counts a change as heard once its listeners have it),
   * the subscriptions forget the reads the feed has passed, idle ones included.
   */
  private scheduleForgetting(): void {
    if (this.forgetSoon || this.remembering.size === 0) return;
    this.forgetSoon = true;
    setImmediate(() => {
      this.forgetSoon = false;
      this.forgetHeard();
    });
  }

  /**
   * Forgets what the feed has passed; while something remains, checks again a little later (the feed also
   * passes changes it has nothing to tell of: this process's own, announced before it read them).
   */
  private forgetHeard(): void {
    const heardThrough = this.store.changesHeardThrough();
    for (const sub of this.remembering) {
      sub.forgetHeard(heardThrough);
      if (sub.remembered === 0) this.remembering.delete(sub);
    }
    if (this.remembering.size > 0 && this.forgetTimer === undefined) {
      this.forgetTimer = setTimeout(() => {
        this.forgetTimer = undefined;
        this.forgetHeard();
      }, forgetAgainMs);
      this.forgetTimer.unref();
    }
  }

  /** Keeps a subscription that remembers reads ahead of the feed in the forgetting passes. */
  private rememberIfAhead(sub: Subscription): void {
    if (sub.remembered === 0 || this.remembering.has(sub)) return;
    this.remembering.add(sub);
    this.forgetHeard();
  }
}
