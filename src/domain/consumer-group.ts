/**
 * Consumer groups (SPEC §6.1): a subscription that names a group is one member of it, and each pending
 * notice of the group's watchers is claimed by one member at a time. The names and bounds, and the rule
 * that decides what a member may do with a pending notice. Pure.
 */

/** A group's name: 1-128 characters of A-Z, a-z, 0-9, `.`, `_`, `:`, `-` (API.md). */
export const consumerGroupPattern = /^[A-Za-z0-9._:-]{1,128}$/u;

/** A member's claims at once when its subscription does not say (API.md: `max_in_flight` 0 is 16), and the most it may ask. */
export const defaultMaxInFlight = 16;
export const maxMaxInFlight = 1000;

/** The problem with a subscription's group and bound, or undefined; `maxInFlight` 0 means unset. */
export function consumerGroupProblem(group: string, maxInFlight: number): { field: string; problem: string } | undefined {
  if (group === "") return maxInFlight === 0 ? undefined : { field: "max_in_flight", problem: "is only for a consumer group (set consumer_group)" };
  if (!consumerGroupPattern.test(group)) return { field: "consumer_group", problem: "must be 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'" };
  if (maxInFlight < 0 || maxInFlight > maxMaxInFlight) return { field: "max_in_flight", problem: `must be 0 (${defaultMaxInFlight}) to ${maxMaxInFlight}` };
  return undefined;
}

/** A claim on a pair's pending notice as the group last left it: its notice (N), its holder if it is held, how often it was handed out. */
export interface ClaimState<Holder> {
  notified: number;
  holder: Holder | undefined;
  deliveryCount: number;
}

/** What a member may do with a pair's pending notice (N = `notified`). */
export type ClaimDecision =
  | { take: true; deliveryCount: number; endsStaleClaim: boolean }
  | { take: false; why: "mine" | "held" | "declined" | "full" };

/**
 * The rule of SPEC §6.1 for one member and one pending notice: a notice another live member holds is
 * not its; one it holds is already its (a stream never gets the same pending notice twice); one it gave
 * back is not handed to it again while it is the same notice; past its `max_in_flight` it takes nothing.
 * Otherwise it takes it: the first time (or a new N: a notice that reopened after an ack is a new one,
 * and any claim on the old one ends) with delivery count 1, else one more than the last.
 */
export function decideClaim<Holder>(
  state: ClaimState<Holder> | undefined,
  notified: number,
  member: { self: Holder; held: number; maxInFlight: number; declined: number | undefined },
): ClaimDecision {
  const sameNotice = state !== undefined && state.notified === notified;
  if (sameNotice && state.holder !== undefined) return { take: false, why: state.holder === member.self ? "mine" : "held" };
  if (member.declined === notified) return { take: false, why: "declined" };
  if (member.held >= member.maxInFlight) return { take: false, why: "full" };
  return { take: true, deliveryCount: sameNotice ? state.deliveryCount + 1 : 1, endsStaleClaim: !sameNotice && state?.holder !== undefined };
}
