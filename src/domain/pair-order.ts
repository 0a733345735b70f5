/**
 * The order of watcher/target pairs in which a subscription's pending notices are paged (SPEC §6): by
 * watcher key, then target agent id, then target key, each compared as the databases compare them, by
 * bytes of UTF-8 (SQLite's BINARY collation, PostgreSQL's `COLLATE "C"`), which is the order of Unicode
 * code points. JavaScript's `<` compares UTF-16 units instead, which differs above U+FFFF: every comparison
 * of keys goes through `compareKeys`. Pure.
 */
import type { SessionId } from "./session-key.js";

/** A place in pair order: after every pair up to and including (watcher key, target agent id, target key). */
export type PairPosition = readonly [watcherKey: string, targetAgentId: string, targetKey: string];

/**
 * A range of watcher keys in byte order, both ends included: one watcher's key (`from` and `last` are the
 * key), or every key with a prefix (`last` is the prefix followed by the highest code point).
 */
export interface WatcherRange {
  from: string;
  last: string;
}

/** The highest code point: a prefix followed by it bounds every key with that prefix. */
export const topCharacter = "\u{10FFFF}";

/** Negative, zero or positive as `a` sorts before, with or after `b` in UTF-8 byte order. */
export function compareKeys(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Below the surrogates and above them UTF-16 units order as code points; a surrogate (a code point
    // above U+FFFF) sorts after every unit of the BMP.
    const isSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdfff;
    if (isSurrogate(x) !== isSurrogate(y)) return isSurrogate(x) ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** Compares a pair with a position in pair order. */
export function comparePairTo(watcherKey: string, target: SessionId, position: PairPosition): number {
  return compareKeys(watcherKey, position[0]) || compareKeys(target.agentId, position[1]) || compareKeys(target.key, position[2]);
}

/** The position of a pair. */
export function positionFromPair(watcherKey: string, target: SessionId): PairPosition {
  return [watcherKey, target.agentId, target.key];
}

/**
 * The watcher keys a subscription serves (exact keys and prefixes) as ranges in byte order, sorted and
 * merged, so that paging through them in turn visits every pair once, in pair order.
 */
export function watcherRangesFromFilter(watcherKeys: readonly string[], prefixes: readonly string[]): WatcherRange[] {
  const ranges = [
    ...watcherKeys.map((key) => ({ from: key, last: key })),
    ...prefixes.map((prefix) => ({ from: prefix, last: `${prefix}${topCharacter}` })),
  ].sort((a, b) => compareKeys(a.from, b.from));
  const merged: WatcherRange[] = [];
  for (const range of ranges) {
    const previous = merged.at(-1);
    if (previous !== undefined && compareKeys(range.from, previous.last) <= 0) {
      if (compareKeys(range.last, previous.last) > 0) previous.last = range.last;
    } else {
      merged.push({ ...range });
    }
  }
  return merged;
}

/** The index of the range (of `watcherRangesFromFilter`) that holds `watcherKey`, or -1. */
export function findRangeIndex(ranges: readonly WatcherRange[], watcherKey: string): number {
  return ranges.findIndex((range) => compareKeys(range.from, watcherKey) <= 0 && compareKeys(watcherKey, range.last) <= 0);
}

/**
 * Where a page of `range` starts, strictly after: `after`, or before the range's first key when `after`
 * comes before it. A store seeks to this position, so a page never reads the pairs between ranges.
 */
export function pageStartIn(range: WatcherRange, after: PairPosition | undefined): PairPosition {
  const rangeStart: PairPosition = [range.from, "", ""];
  if (after === undefined) return rangeStart;
  return compareKeys(after[0], range.from) < 0 ? rangeStart : after;
}
