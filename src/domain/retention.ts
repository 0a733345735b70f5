/**
 * Retention's decisions (SPEC §4, §12.1): how a step divides its rows between the age stage, each
 * namespace's cap and untouched cursors, when it is done, and the watermarks to raise before rows go. Pure.
 */
import type { PruneStep, RetentionPolicy } from "./records.js";

/** A namespace's retained event count. */
export interface NamespaceCount {
  namespace: string;
  n: number;
}

/**
 * The second stage of a prune step (SPEC §10, §12.1): after `removedSoFar` events older than the cutoff,
 * how many of each namespace's oldest events go so that no namespace keeps more than `maxEvents`, within
 * what is left of the step's rows. Namespaces are taken in the order given; none is taken once the step
 * is full. Each namespace's log is bounded on its own, so one busy gateway never prunes another's.
 */
export function planNamespaceTrim(counts: readonly NamespaceCount[], policy: RetentionPolicy, removedSoFar: number): { namespace: string; count: number }[] {
  const plan: { namespace: string; count: number }[] = [];
  let budget = policy.maxRowsPerStep - removedSoFar;
  for (const { namespace, n } of counts) {
    const count = Math.min(n - policy.maxEvents, budget);
    if (count <= 0) continue;
    plan.push({ namespace, count });
    budget -= count;
  }
  return plan;
}

/** True when a prune step must read the namespaces' counts: the age stage left room in the step. */
export function pruneNeedsCounts(policy: RetentionPolicy, eventsRemoved: number): boolean {
  return eventsRemoved < policy.maxRowsPerStep;
}

/** How many untouched cursors the step may remove after its events (the third stage). */
export function pruneCursorBudget(policy: RetentionPolicy, eventsRemoved: number): number {
  return Math.max(0, policy.maxRowsPerStep - eventsRemoved);
}

/** What a prune step answers: it is done when it removed fewer rows than it could. */
export function pruneStepOutcome(policy: RetentionPolicy, eventsRemoved: number, cursorsRemoved: number): PruneStep {
  return { eventsRemoved, cursorsRemoved, done: eventsRemoved + cursorsRemoved < policy.maxRowsPerStep };
}

/**
 * The prune watermarks to raise before events go (SPEC §10: `history_gap` is exact): for each session that
 * loses events, the highest sequence it loses.
 */
export function pruneWatermarks<S>(removed: readonly { sessionId: S; sequence: number }[]): Map<S, number> {
  const marks = new Map<S, number>();
  for (const row of removed) marks.set(row.sessionId, Math.max(marks.get(row.sessionId) ?? 0, row.sequence));
  return marks;
}
