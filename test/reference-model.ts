import { effectOfKind, type EventKind } from "../src/domain/event.js";

/**
 * The reference model of SPEC §5-6, written from the spec's sentences and independent of the rule
 * functions: per pair, L, N and the material events the watcher was told about.
 */
export class ReferenceModel {
  readonly pairs = new Map<string, { acked: number; notified: number; material: number[] }>();

  private top(pair: { acked: number; material: number[] }): number {
    return Math.max(pair.acked, ...pair.material);
  }

  event(kind: EventKind, sequence: number, actorId: string | undefined, named: readonly string[]): void {
    const effect = effectOfKind(kind);
    if (effect === "ledger") return;
    if (effect === "seed") {
      for (const watcher of named) this.pairs.set(watcher, { acked: sequence, notified: sequence, material: [sequence] });
      return;
    }
    const concerned = new Set([...this.pairs.keys(), ...named]);
    for (const watcher of concerned) {
      if (watcher === actorId) continue;
      const pair = this.pairs.get(watcher) ?? { acked: 0, notified: 0, material: [] };
      pair.material.push(sequence);
      if (pair.notified === pair.acked) pair.notified = sequence;
      this.pairs.set(watcher, pair);
    }
  }

  ack(watcher: string, notifiedVersion: number, reconciledThrough: number | undefined): void {
    const pair = this.pairs.get(watcher);
    if (pair === undefined || pair.notified === pair.acked || pair.notified !== notifiedVersion) return;
    const material = this.top(pair);
    pair.acked = reconciledThrough === undefined ? pair.notified : Math.max(pair.notified, Math.min(reconciledThrough, material));
    pair.notified = material > pair.acked ? material : pair.acked;
  }

  watch(watcher: string, version: number): void {
    if (!this.pairs.has(watcher)) this.pairs.set(watcher, { acked: version, notified: version, material: [version] });
  }

  remove(watcher: string): void {
    this.pairs.delete(watcher);
  }

  /** Pending notices: watcher -> [changes_since, notified_version]. */
  pending(): Map<string, [number, number]> {
    const out = new Map<string, [number, number]>();
    for (const [watcher, pair] of this.pairs) if (pair.notified > pair.acked) out.set(watcher, [pair.acked, pair.notified]);
    return out;
  }
}
