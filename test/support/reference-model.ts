import { effectFromKind, type EventKind } from "../../src/domain/event.js";

type Provenance = "explicit" | "ambient";

interface Pair {
  acked: number;
  notified: number;
  material: number[];
  provenance: Provenance;
  extraKinds: Set<EventKind>;
}

/**
 * The reference model of SPEC §5-6 and §12.2-12.3, written from the spec's sentences and independent of
 * the rule functions: per pair, L, N, the material events the watcher was told about, its provenance and
 * the ledger kinds it asked to hear of too.
 */
export class ReferenceModel {
  readonly pairs = new Map<string, Pair>();

  private top(pair: { acked: number; material: number[] }): number {
    return Math.max(pair.acked, ...pair.material);
  }

  private material(watcher: string, sequence: number): void {
    const pair = this.pairs.get(watcher) ?? { acked: 0, notified: 0, material: [], provenance: "explicit", extraKinds: new Set() };
    pair.material.push(sequence);
    if (pair.notified === pair.acked) pair.notified = sequence;
    this.pairs.set(watcher, pair);
  }

  event(kind: EventKind, sequence: number, actorId: string | undefined, named: readonly string[]): void {
    const effect = effectFromKind(kind);
    if (effect === "ledger") {
      // "Watch (explicit only) may name extra material kinds for that watcher"; self-suppression holds.
      for (const [watcher, pair] of this.pairs) {
        if (pair.provenance === "explicit" && pair.extraKinds.has(kind) && watcher !== actorId) this.material(watcher, sequence);
      }
      return;
    }
    if (effect === "seed") {
      // "An explicit Watch or a spawn on an ambient pair upgrades it to explicit."
      for (const watcher of named) {
        const extraKinds = this.pairs.get(watcher)?.extraKinds ?? new Set<EventKind>();
        this.pairs.set(watcher, { acked: sequence, notified: sequence, material: [sequence], provenance: "explicit", extraKinds });
      }
      return;
    }
    const concerned = new Set([...this.pairs.keys(), ...named]);
    for (const watcher of concerned) if (watcher !== actorId) this.material(watcher, sequence);
  }

  ack(watcher: string, notifiedVersion: number, reconciledThrough: number | undefined): void {
    const pair = this.pairs.get(watcher);
    if (pair === undefined || pair.notified === pair.acked || pair.notified !== notifiedVersion) return;
    const material = this.top(pair);
    pair.acked = reconciledThrough === undefined ? pair.notified : Math.max(pair.notified, Math.min(reconciledThrough, material));
    pair.notified = material > pair.acked ? material : pair.acked;
  }

  /**
   * A watch: a new pair starts at `version`. "An explicit Watch ... on an ambient pair upgrades it to
   * explicit, keeping L, N and M"; "Watching again with another set replaces it"; "an ambient Watch never
   * downgrades an explicit pair and changes nothing on it"; ambient on ambient "writes nothing".
   */
  watch(watcher: string, version: number, provenance: Provenance = "explicit", extraKinds: readonly EventKind[] = []): void {
    const pair = this.pairs.get(watcher);
    if (pair === undefined) {
      this.pairs.set(watcher, { acked: version, notified: version, material: [version], provenance, extraKinds: new Set(extraKinds) });
      return;
    }
    if (provenance === "ambient") return;
    pair.provenance = "explicit";
    pair.extraKinds = new Set(extraKinds);
  }

  remove(watcher: string): void {
    this.pairs.delete(watcher);
  }

  /** Pending notices: watcher -> [changes_since, notified_version, provenance]. */
  pending(): Map<string, [number, number, Provenance]> {
    const out = new Map<string, [number, number, Provenance]>();
    for (const [watcher, pair] of this.pairs) if (pair.notified > pair.acked) out.set(watcher, [pair.acked, pair.notified, pair.provenance]);
    return out;
  }
}
