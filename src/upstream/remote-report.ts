/**
 * A paired node's report of its thread (SPEC §8): the gateway polls the remote node and hands over its newest
 * items; the ones newer than the link's marker that a person typed are human turns, recorded as a local
 * scan's are. The outcome is a value; the service turns the refusals into status codes.
 */
import type { Clock } from "../clock.js";
import type { StoredEvent } from "../domain/event.js";
import type { SessionId } from "../domain/session-key.js";
import { scanCommitFromFinding } from "../domain/upstream-link.js";
import type { Store } from "../store/store.js";
import type { SessionActivity } from "./session-activity.js";
import { isSyntheticText } from "./transcript-rows.js";

/** Most items one paired-node report may hold. */
export const maxRemoteItems = 50;

/** One item of a paired-node thread, newest first in a report. */
export interface RemoteItem {
  uuid: string;
  kind: "user_message" | "agent_message" | "tool" | "other" | "unspecified";
  text: string;
  occurredAtMs?: number;
}

/**
 * What a report came to: recorded (its human turns, and the event when there were any); the session has
 * no paired-node link; or the link changed while the report was being committed (retry).
 */
export type RemoteReportOutcome =
  | { outcome: "recorded"; humanTurns: number; event?: StoredEvent; noticesOpened?: number }
  | { outcome: "no-paired-node-link" }
  | { outcome: "link-changed" };

/**
 * Classifies a page of a paired-node thread (newest first): the items newer than the link's marker that
 * are user messages, not synthetic and not the gateway's own echo, are human turns. Records them like a
 * local scan and moves the marker to the newest item. A page whose newest item has no uuid, or a session
 * with an active run, changes nothing.
 */
export async function reportRemoteItems(
  deps: { store: Pick<Store, "getLink" | "commitScan">; activity: SessionActivity; clock: Clock; syntheticPrefixes: readonly string[] },
  session: SessionId,
  items: readonly RemoteItem[],
): Promise<RemoteReportOutcome> {
  const { store, activity, clock, syntheticPrefixes } = deps;
  const link = await store.getLink(session);
  if (link === undefined || link.source.kind !== "paired-node") return { outcome: "no-paired-node-link" };
  const newest = items[0];
  const run = await activity.runState(session);
  if (newest === undefined || newest.uuid === "" || run.active) return { outcome: "recorded", humanTurns: 0 };
  const isOwnEcho = await activity.ownEchoTest(session);
  const seen = items.findIndex((item) => item.uuid === link.marker);
  const fresh = seen === -1 ? items : items.slice(0, seen);
  const nowMs = clock.nowMs();
  const human = fresh.filter((item) => item.kind === "user_message" && !isSyntheticText(item.text, syntheticPrefixes) && !isOwnEcho(item.text));
  const newestHumanAtMs = Math.max(...human.map((item) => item.occurredAtMs ?? nowMs));
  const committed = await store.commitScan(link, {
    ...scanCommitFromFinding(link, { kind: "read", marker: newest.uuid, humanTurns: human.length, newestHumanAtMs }, nowMs),
    runStartsBefore: run.starts,
  });
  if (!committed.committed) return { outcome: "link-changed" };
  return committed.event === undefined
    ? { outcome: "recorded", humanTurns: human.length }
    : { outcome: "recorded", humanTurns: human.length, event: committed.event, noticesOpened: committed.noticesOpened ?? 0 };
}
