import { performance } from "node:perf_hooks";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { CursorRecord, PairChange } from "../domain/records.js";
import { pairKeyOf } from "../domain/write-rules.js";
import { isPending } from "../domain/cursor-machine.js";
import { noticeFromCursor, type Notice } from "../domain/notice.js";

/** Which watchers a subscriber serves: in one namespace, exact keys and key prefixes, all normalised. */
export interface NoticeFilter {
  namespace: string;
  watcherKeys: readonly string[];
  prefixes: readonly string[];
}

/** What a subscription sends: notices, and once the `synced` marker. */
export type NoticeStreamItem = { notice: Notice } | { synced: { pendingDelivered: number } };

/**
 * What the hub needs from durable state: the pending cursors of a filter, the cursors of some pairs, and the feed
 * of pairs whose pending notice opened, changed or closed (delivered after the change is durable). Every
 * store provides it.
 */
export interface NoticeSource {
  pendingCursors(namespace: string, watcherKeys: readonly string[], prefixes: readonly string[]): Promise<CursorRecord[]>;
  getCursors(pairs: readonly PairChange[]): Promise<CursorRecord[]>;
  onPairChanges(listener: (changes: readonly PairChange[]) => void): () => void;
  /** Gaps in that feed, where every pending pair must be read again (see Store). */
  onFeedGap?(listener: () => void): () => void;
}

/** Pairs read from the store in one round trip by a subscription at most. */
const maxPairsPerRead = 256;

/** A watcher's identity across namespaces: a watcher and its targets share one namespace. */
function watcherIn(namespace: string, watcherKey: string): string {
  return `${namespace}\u0000${watcherKey}`;
}

/**
 * What a sent notice said that a new one must differ in to be sent again: its version, and its provenance
 * (an ambient pair made explicit wakes from then on, so its pending notice goes out again, waking).
 */
function sentStateOf(cursor: CursorRecord): string {
  return `${cursor.notified} ${cursor.provenance}`;
}

function pairKey(change: PairChange): string {
  return pairKeyOf(change.watcherKey, change.target);
}

/**
 * One subscriber. Its memory is bounded by the pairs it serves: `dirty` holds at most one entry per
 * pair (newest state wins, since the notice is read from the store when it is sent) and `sent`
 * remembers the notified version (and provenance) last sent per pair, so a pending notice is never sent twice.
 */
class Subscription {
  readonly dirty = new Map<string, PairChange>();
  /** When each dirty pair was first marked since it was last checked (performance.now()): for the metrics. */
  readonly markedAt = new Map<string, number>();
  readonly sent = new Map<string, string>();
  /** The feed missed changes: every pending pair of the filter is to be read again. */
  rereadAll = false;
  private wake: (() => void) | undefined;

  constructor(readonly filter: NoticeFilter) {}

  matchesPrefix(change: PairChange): boolean {
    return change.target.namespace === this.filter.namespace && this.filter.prefixes.some((prefix) => change.watcherKey.startsWith(prefix));
  }

  markDirty(change: PairChange): void {
    const key = pairKey(change);
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

  markAllDirty(): void {
    this.rereadAll = true;
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Resolves when a pair becomes dirty or `signal` aborts. */
  changed(signal: AbortSignal): Promise<void> {
    if (this.dirty.size > 0 || this.rereadAll || signal.aborted) return Promise.resolve();
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

/**
 * Delivers stale notices to subscribers. It learns from the store's feed which pairs changed and reads
 * each notice from the store when it sends it, so delivery is driven by durable cursor state: a
 * reconnecting or new subscriber gets every pending notice again, and a stalled one costs at most one
 * entry per pair.
 */
export class NoticeHub {
  /** Subscriptions by the watchers they name, keyed by `watcherIn` (namespace and watcher key). */
  private readonly byWatcher = new Map<string, Set<Subscription>>();
  private readonly byPrefix = new Set<Subscription>();
  private unsubscribe: (() => void) | undefined;
  private unsubscribeGaps: (() => void) | undefined;

  constructor(
    private readonly store: NoticeSource,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /** Starts listening to the store's feed. */
  start(): void {
    this.unsubscribe ??= this.store.onPairChanges((changes) => this.dispatch(changes));
    this.unsubscribeGaps ??= this.store.onFeedGap?.(() => {
      this.log.warn("the feed of changes has a gap: every subscription reads its pending notices again");
      for (const sub of this.allSubscriptions()) sub.markAllDirty();
    });
  }

  /** Stops listening. Open subscriptions end when their signals abort. */
  stop(): void {
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

  /** Pairs whose sent notice the subscriptions remember: released when the notice closes. */
  get rememberedPairs(): number {
    let remembered = 0;
    for (const sub of this.allSubscriptions()) remembered += sub.sent.size;
    return remembered;
  }

  private allSubscriptions(): Set<Subscription> {
    const all = new Set(this.byPrefix);
    for (const subs of this.byWatcher.values()) for (const sub of subs) all.add(sub);
    return all;
  }

  /**
   * Serves one subscriber until `signal` aborts (or the consumer stops asking): every notice pending for
   * the filter, then the synced marker, then each notice as it opens or reopens. The consumer's pace is the
   * flow control: while it does not ask for the next item, changes only mark their pair, at most one entry
   * per pair, and the notice sent when it asks again is read then, so it is the newest.
   */
  async *serve(filter: NoticeFilter, signal: AbortSignal): AsyncGenerator<NoticeStreamItem, void, undefined> {
    const sub = new Subscription(filter);
    this.register(sub);
    try {
      let pendingDelivered = 0;
      for (const cursor of await this.store.pendingCursors(filter.namespace, filter.watcherKeys, filter.prefixes)) {
        if (signal.aborted) return;
        sub.sent.set(pairKey(cursor), sentStateOf(cursor));
        this.metrics?.noticesDelivered.inc();
        yield { notice: noticeFromCursor(cursor) };
        pendingDelivered++;
      }
      if (signal.aborted) return;
      yield { synced: { pendingDelivered } };
      while (!signal.aborted) {
        if (sub.rereadAll) {
          sub.rereadAll = false;
          // Every pair pending now is checked again; a pair sent before and pending no more is forgotten.
          const pending = new Set<string>();
          for (const cursor of await this.store.pendingCursors(filter.namespace, filter.watcherKeys, filter.prefixes)) {
            pending.add(pairKey(cursor));
            sub.dirty.set(pairKey(cursor), cursor);
          }
          for (const key of sub.sent.keys()) if (!pending.has(key)) sub.sent.delete(key);
          continue;
        }
        if (sub.dirty.size === 0) {
          await sub.changed(signal);
          continue;
        }
        // The dirty pairs, up to a batch, are read in one round trip; a pair marked again while its batch
        // is out is left for the next batch, so what is sent is never older than the newest change heard.
        const batch = sub.takeDirty(maxPairsPerRead);
        const cursors = new Map((await this.store.getCursors(batch)).map((cursor) => [pairKey(cursor), cursor]));
        for (const change of batch) {
          if (signal.aborted) return;
          const key = pairKey(change);
          if (sub.dirty.has(key)) continue;
          const markedAt = sub.markedAt.get(key);
          sub.markedAt.delete(key);
          const cursor = cursors.get(key);
          if (cursor === undefined || !isPending(cursor)) {
            sub.sent.delete(key);
            continue;
          }
          if (sub.sent.get(key) === sentStateOf(cursor)) continue;
          sub.sent.set(key, sentStateOf(cursor));
          this.metrics?.noticesDelivered.inc();
          if (markedAt !== undefined) this.metrics?.noticeDelivery.observe((performance.now() - markedAt) / 1000);
          yield { notice: noticeFromCursor(cursor) };
        }
      }
    } finally {
      this.unregister(sub);
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
  }

  private dispatch(changes: readonly PairChange[]): void {
    try {
      for (const change of changes) {
        for (const sub of this.byWatcher.get(watcherIn(change.target.namespace, change.watcherKey)) ?? []) sub.markDirty(change);
        for (const sub of this.byPrefix) if (sub.matchesPrefix(change)) sub.markDirty(change);
      }
    } catch (err) {
      // The feed runs inside the writer's call: a delivery fault must never fail the write.
      this.log.error({ err }, "notice dispatch failed");
    }
  }
}
