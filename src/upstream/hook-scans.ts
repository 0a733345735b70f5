/**
 * The CLIs' hooks as one more way to ask the monitor for a scan (SPEC §8.2): a hook call names links, and
 * each is checked now through the monitor's own check (UpstreamMonitor.checkNow: self-echo, runs active,
 * the marker, the dedupe key, one transaction). The CLI writes the prompt's row a little after calling its
 * hook, so the link is looked at again, briefly, until the row the call waits for has been read or the
 * bound passes; the rest is the next tick's. While a run is active on the session the scan waits for the
 * run's end. A hook's text is never read here: the transcript decides.
 */
import { performance } from "node:perf_hooks";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { LinkRecord } from "../domain/records.js";
import type { SessionId } from "../domain/session-key.js";
import { isLocalTranscript } from "../domain/upstream-link.js";
import type { Store } from "../store/store.js";
import type { SessionActivity } from "./session-activity.js";
import { outcomeKey, type UpstreamMonitor } from "./upstream-monitor.js";
import { setNewest } from "../newest-first-map.js";

/** What one hook call waits for on a link. */
export interface HookWait {
  /** The prompt's id the CLI named (Claude Code's `prompt_id`): its row ends the wait. Absent: any prompt row does. */
  promptId?: string | undefined;
  /** When the call came (performance.now()), for the call-to-event metric. */
  calledAt: number;
}

/** Timings: how long a hook's scan looks again for its row, and how often. */
export interface HookScanTimings {
  /** How long after a call (or after the run it waited for ended) its link is looked at again. */
  lookAgainMs: number;
  /** The pause between two looks. */
  pollMs: number;
  /** How often the run flags of sessions waiting for a run's end are read (a run may end through another replica). */
  deferredPollMs: number;
}

export const defaultHookScanTimings: HookScanTimings = { lookAgainMs: 2000, pollMs: 25, deferredPollMs: 1000 };

/** Most sessions whose scan waits for the end of a run; past it, the oldest is left to the next tick. */
const maxDeferred = 10_000;
/** Links whose recently read prompt ids are remembered, and how many ids each. */
const maxRememberedLinks = 10_000;
const promptIdsRemembered = 32;

interface Waiting {
  session: SessionId;
  /** Each call's wait, with its bound and the prompts read before it joined (a call without a prompt id waits for a later one). */
  waits: Array<HookWait & { untilMs: number; promptsBefore: number }>;
  /** What the loop's passes have read so far: a call that joins later may wait for a row already read. */
  seen: { prompts: number; promptIds: Set<string> };
  /** Set by a new call while the loop sleeps: look again now. */
  wake: (() => void) | undefined;
}

/** True when the passes so far read the row a wait is for. */
function isSeen(wait: Waiting["waits"][number], seen: Waiting["seen"]): boolean {
  return wait.promptId === undefined ? seen.prompts > wait.promptsBefore : seen.promptIds.has(wait.promptId);
}

/**
 * Runs the scans hook calls ask for: one loop per link, however many calls name it; a session with a run
 * active waits for the run's end (`runEnded`, or its flag read again every second).
 */
export class HookScans {
  private readonly looping = new Map<string, Waiting>();
  private readonly loops = new Set<Promise<void>>();
  private readonly deferred = new Map<string, { session: SessionId; waits: HookWait[] }>();
  private deferredTimer: NodeJS.Timeout | undefined;
  /** Prompt ids these scans read lately, by link: a call for a prompt already read needs no scan. */
  private readonly readPromptIds = new Map<string, string[]>();
  private stopped = false;
  private polling = false;

  constructor(
    private readonly store: Pick<Store, "getLink">,
    private readonly monitor: Pick<UpstreamMonitor, "checkNow">,
    private readonly activity: Pick<SessionActivity, "runState">,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    private readonly timings: HookScanTimings = defaultHookScanTimings,
  ) {}

  /** Scans each link now and looks again until `wait`'s row is read or the bound passes. */
  scan(links: readonly LinkRecord[], wait: HookWait): void {
    for (const link of links) {
      if (!isLocalTranscript(link)) continue;
      if (wait.promptId !== undefined && this.readPromptIds.get(outcomeKey(link))?.includes(wait.promptId)) continue;
      this.scanSession(link.session, [wait]);
    }
  }

  /** A run ended on `session`: a scan that waited for it runs now. */
  runEnded(session: SessionId): void {
    const key = outcomeKey({ session });
    const deferred = this.deferred.get(key);
    if (deferred === undefined) return;
    this.deferred.delete(key);
    this.scanSession(deferred.session, deferred.waits);
  }

  /** Sessions whose scan waits for the end of a run. */
  get deferredCount(): number {
    return this.deferred.size;
  }

  /** Ends the loops (their links are the next tick's) and waits for them. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.deferredTimer);
    this.deferred.clear();
    for (const waiting of this.looping.values()) waiting.wake?.();
    await Promise.all([...this.loops]);
  }

  private scanSession(session: SessionId, waits: readonly HookWait[]): void {
    if (this.stopped) return;
    const untilMs = performance.now() + this.timings.lookAgainMs;
    const key = outcomeKey({ session });
    const running = this.looping.get(key);
    if (running !== undefined) {
      running.waits.push(...waits.map((wait) => ({ ...wait, untilMs, promptsBefore: running.seen.prompts })));
      running.wake?.();
      return;
    }
    const waiting: Waiting = { session, waits: waits.map((wait) => ({ ...wait, untilMs, promptsBefore: 0 })), seen: { prompts: 0, promptIds: new Set() }, wake: undefined };
    this.looping.set(key, waiting);
    const loop = this.lookUntilSeen(key, waiting)
      .catch((err: unknown) => this.log.error({ err, agentId: session.agentId }, "hook scan failed"))
      .finally(() => {
        this.looping.delete(key);
        this.loops.delete(loop);
      });
    this.loops.add(loop);
  }

  private async lookUntilSeen(key: string, waiting: Waiting): Promise<void> {
    // A poll, not a watch of the file: with an inotify watch waking the loop, the notices came later in the
    // bench (p50 79 against 49 ms with the row written at once; a scan's own read changes the file's
    // access time, which the watch reports as a change, so scans woke scans).
    while (waiting.waits.length > 0 && !this.stopped) {
      const link = await this.store.getLink(waiting.session);
      if (link === undefined || link.source.kind !== "transcript") return;
      if (!(await this.lookOnce(key, waiting, link))) return;
    }
  }

  /** One look at a link for the calls waiting on it; false when the loop is over (deferred to a run's end). */
  private async lookOnce(key: string, waiting: Waiting, link: LinkRecord): Promise<boolean> {
    if ((await this.activity.runState(waiting.session)).active) {
      this.defer(key, waiting);
      return false;
    }
    const check = await this.monitor.checkNow(link);
    if (check.runActive) {
      this.defer(key, waiting);
      return false;
    }
    const now = performance.now();
    if (check.recorded) {
      const first = Math.min(...waiting.waits.map((wait) => wait.calledAt));
      this.metrics?.hookToEvent.observe((now - first) / 1000);
    }
    waiting.seen.prompts += check.prompts;
    for (const id of check.promptIds) waiting.seen.promptIds.add(id);
    if (check.promptIds.length > 0) this.rememberRead(key, check.promptIds);
    waiting.waits = waiting.waits.filter((wait) => !isSeen(wait, waiting.seen) && now < wait.untilMs);
    if (waiting.waits.length > 0) await this.pause(waiting);
    return true;
  }

  private rememberRead(key: string, promptIds: readonly string[]): void {
    const ids = [...(this.readPromptIds.get(key) ?? []), ...promptIds].slice(-promptIdsRemembered);
    setNewest(this.readPromptIds, key, ids, maxRememberedLinks);
  }

  /** Sleeps for the poll interval, or until a new call or a stop wakes the loop. */
  private pause(waiting: Waiting): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        waiting.wake = undefined;
        resolve();
      }, this.timings.pollMs);
      timer.unref();
      waiting.wake = () => {
        clearTimeout(timer);
        waiting.wake = undefined;
        resolve();
      };
    });
  }

  /** Keeps a link's waits until the run on its session ends. */
  private defer(key: string, waiting: Waiting): void {
    if (this.stopped) return;
    const waits = waiting.waits.map(({ promptId, calledAt }) => ({ promptId, calledAt }));
    setNewest(this.deferred, key, { session: waiting.session, waits: [...(this.deferred.get(key)?.waits ?? []), ...waits] }, maxDeferred);
    this.deferredTimer ??= setInterval(() => void this.pollDeferred(), this.timings.deferredPollMs).unref();
  }

  /** Reads the run flags of the sessions waiting for a run's end: one that ended through another replica scans now. */
  private async pollDeferred(): Promise<void> {
    if (this.deferred.size === 0) {
      clearInterval(this.deferredTimer);
      this.deferredTimer = undefined;
      return;
    }
    if (this.polling) return;
    this.polling = true;
    try {
      for (const entry of [...this.deferred.values()]) {
        if (this.stopped) return;
        if (!(await this.activity.runState(entry.session)).active) this.runEnded(entry.session);
      }
    } catch (err) {
      this.log.warn({ err }, "reading the run flags of deferred hook scans failed");
    } finally {
      this.polling = false;
    }
  }
}
