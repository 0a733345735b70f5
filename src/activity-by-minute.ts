import type { Clock } from "./clock.js";

/** What is counted: events recorded, stale notices opened, notices acknowledged. */
export type ActivityKind = "appends" | "noticesOpened" | "noticesAcknowledged";

/** One minute of one namespace's activity. */
export interface MinuteCounts {
  /** The start of the minute, in ms since the epoch. */
  minuteMs: number;
  appends: number;
  noticesOpened: number;
  noticesAcknowledged: number;
}

const minuteMs = 60_000;

/** A minute with nothing counted yet. */
function quietMinute(minute: number): MinuteCounts {
  return { minuteMs: minute, appends: 0, noticesOpened: 0, noticesAcknowledged: 0 };
}
/** Minutes kept: the last hour. */
export const minutesKept = 60;

/**
 * A namespace's activity on this server, minute by minute for the last hour (GetServerInfo, the console's
 * chart), in memory: a ring of 60 minutes per namespace, so counting is a few additions and memory is
 * bounded by the namespaces counted (at most `maxNamespaces`; the one counted longest ago goes first).
 */
export class ActivityByMinute {
  /** Rings by namespace, in the order they were last counted (a Map keeps insertion order). */
  private readonly rings = new Map<string, MinuteCounts[]>();

  constructor(
    private readonly clock: Clock,
    private readonly maxNamespaces = 10_000,
  ) {}

  count(namespace: string, kind: ActivityKind, n = 1): void {
    if (n <= 0) return;
    const minute = Math.floor(this.clock.nowMs() / minuteMs) * minuteMs;
    let ring = this.rings.get(namespace);
    if (ring === undefined) {
      ring = [];
      if (this.rings.size >= this.maxNamespaces) this.rings.delete(this.rings.keys().next().value!);
    } else {
      this.rings.delete(namespace);
    }
    this.rings.set(namespace, ring);
    const slot = (minute / minuteMs) % minutesKept;
    let counts = ring[slot];
    if (counts === undefined || counts.minuteMs !== minute) {
      counts = quietMinute(minute);
      ring[slot] = counts;
    }
    counts[kind] += n;
  }

  /** The last hour of `namespace`, oldest minute first, the current minute last; quiet minutes count zero. */
  lastHour(namespace: string): MinuteCounts[] {
    const now = Math.floor(this.clock.nowMs() / minuteMs) * minuteMs;
    const ring = this.rings.get(namespace) ?? [];
    const minutes: MinuteCounts[] = [];
    for (let i = minutesKept - 1; i >= 0; i--) {
      const minute = now - i * minuteMs;
      const counts = ring[(minute / minuteMs) % minutesKept];
      minutes.push(counts !== undefined && counts.minuteMs === minute ? { ...counts } : quietMinute(minute));
    }
    return minutes;
  }
}
