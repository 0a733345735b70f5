/**
 * What the server itself saw during a measured window, from its own metrics: the event loop's delay (its
 * p99 and max over the window: the lag gauges cover the time since the previous scrape), the collector's
 * pauses, the store's commits and retention steps. Scrape once to open a window, once more to close it: the difference is
 * the window's. This is how the bench attributes the notice tail (issue 25).
 */
import { scrapeMetrics } from "../test/support/helpers.js";

/** Counters of one scrape, and the event-loop delay since the previous one. */
export interface ServerScrape {
  loopP99Ms: number;
  loopMaxMs: number;
  gcCount: number;
  gcMajorCount: number;
  gcSeconds: number;
  commits: number;
  /** Commits that took more than 5 ms (a WAL checkpoint runs inside the commit that triggers it). */
  commitsOver5Ms: number;
  commitSeconds: number;
  /** The summed waits of each transaction's oldest write in the store's queue. */
  waitSeconds: number;
  /** Notices handed to streams after a change was heard, and the summed time from hearing to handing. */
  notices: number;
  noticeSeconds: number;
  /** Retention steps and their summed time. */
  pruneSteps: number;
  pruneSeconds: number;
}

/** What happened between two scrapes. */
export type ServerWindow = ServerScrape;

/** The sum of every sample of `name` whose labels contain `labels` (all samples when empty). */
function sumOf(text: string, name: string, labels = ""): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (!(rest.startsWith(" ") || rest.startsWith("{"))) continue;
    if (labels !== "" && !rest.includes(labels)) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

/** Scrapes the server's metrics at `port`. */
export async function scrapeServer(port: number): Promise<ServerScrape> {
  const text = await scrapeMetrics(port);
  const commits = sumOf(text, "sessionstate_store_commit_seconds_count");
  return {
    loopP99Ms: sumOf(text, "sessionstate_event_loop_delay_seconds", 'quantile="0.99"') * 1000,
    loopMaxMs: sumOf(text, "sessionstate_event_loop_delay_seconds", 'quantile="1"') * 1000,
    gcCount: sumOf(text, "sessionstate_nodejs_gc_duration_seconds_count"),
    gcMajorCount: sumOf(text, "sessionstate_nodejs_gc_duration_seconds_count", 'kind="major"'),
    gcSeconds: sumOf(text, "sessionstate_nodejs_gc_duration_seconds_sum"),
    commits,
    commitsOver5Ms: commits - sumOf(text, "sessionstate_store_commit_seconds_bucket", 'le="0.005"'),
    commitSeconds: sumOf(text, "sessionstate_store_commit_seconds_sum"),
    waitSeconds: sumOf(text, "sessionstate_store_write_wait_seconds_sum"),
    notices: sumOf(text, "sessionstate_notice_delivery_seconds_count"),
    noticeSeconds: sumOf(text, "sessionstate_notice_delivery_seconds_sum"),
    pruneSteps: sumOf(text, "sessionstate_prune_step_seconds_count"),
    pruneSeconds: sumOf(text, "sessionstate_prune_step_seconds_sum"),
  };
}

/** The window between two scrapes: counters subtracted; the loop's delay is the second scrape's own. */
export function windowBetween(opened: ServerScrape, closed: ServerScrape): ServerWindow {
  return {
    loopP99Ms: closed.loopP99Ms,
    loopMaxMs: closed.loopMaxMs,
    gcCount: closed.gcCount - opened.gcCount,
    gcMajorCount: closed.gcMajorCount - opened.gcMajorCount,
    gcSeconds: closed.gcSeconds - opened.gcSeconds,
    commits: closed.commits - opened.commits,
    commitsOver5Ms: closed.commitsOver5Ms - opened.commitsOver5Ms,
    commitSeconds: closed.commitSeconds - opened.commitSeconds,
    waitSeconds: closed.waitSeconds - opened.waitSeconds,
    notices: closed.notices - opened.notices,
    noticeSeconds: closed.noticeSeconds - opened.noticeSeconds,
    pruneSteps: closed.pruneSteps - opened.pruneSteps,
    pruneSeconds: closed.pruneSeconds - opened.pruneSeconds,
  };
}
