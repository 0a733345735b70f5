/**
 * Pictures where one would rather look than read: a session's events on a time axis, and a namespace's
 * appends and notices per minute. Plain SVG; every mark has a <title> (a tooltip, read by screen readers)
 * and each chart an accessible name that says what it shows in words.
 */
import type { MinuteActivity } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { ActorType, type StateEvent } from "../../gen/sessionstate/v1/types_pb.js";
import { s } from "./dom.js";
import { actorName, count, formatMs, kindName, msOf, plural } from "./format.js";

const width = 860;

/** Tick times for an axis from `from` to `to`: about five, at round steps. */
function ticks(from: number, to: number): number[] {
  const span = Math.max(to - from, 1);
  const minute = 60_000;
  const hour = 60 * minute;
  const day = 24 * hour;
  const steps = [1_000, 2_000, 5_000, 10_000, 15_000, 30_000, minute, 2 * minute, 5 * minute, 10 * minute, 15 * minute, 30 * minute];
  steps.push(hour, 2 * hour, 3 * hour, 6 * hour, 12 * hour, day, 2 * day, 7 * day);
  const step = steps.find((candidate) => span / candidate <= 6) ?? 30 * 86_400_000;
  const first = Math.ceil(from / step) * step;
  const out: number[] = [];
  for (let t = first; t <= to; t += step) out.push(t);
  return out;
}

/** `14:05:09` or `12-06 14:05` when the span covers days. */
function tickLabel(ms: number, spanMs: number): string {
  const iso = formatMs(ms);
  return spanMs > 86_400_000 ? iso.slice(5, 16) : iso.slice(11, 19);
}

/** The closest two marks on one level of the time axis may be, centre to centre (a mark is 10 wide). */
const markSpacing = 12;
/** Levels above the axis for marks that would overlap; past the last, a mark takes the level free longest. */
const levels = 6;

/**
 * The level of each mark (0 on the lowest stem) for marks at `xs`: taken from left to right, a mark stands
 * on the lowest level whose last mark is at least `markSpacing` to its left, so marks apart in time stand at
 * one height and only marks that would cover each other are raised. A height says nothing else.
 */
export function markLevels(xs: readonly number[]): number[] {
  const lastX = new Array<number>(levels).fill(-Infinity);
  const level = new Array<number>(xs.length).fill(0);
  const leftToRight = xs.map((_, i) => i).sort((a, b) => xs[a]! - xs[b]! || a - b);
  for (const i of leftToRight) {
    const x = xs[i]!;
    let free = lastX.findIndex((last) => x - last >= markSpacing);
    if (free === -1) free = lastX.indexOf(Math.min(...lastX));
    lastX[free] = x;
    level[i] = free;
  }
  return level;
}

/** A session's events as marks on a time axis, coloured by who acted; marks that would overlap stand one above another. */
export function eventTimeline(events: readonly StateEvent[]): SVGSVGElement {
  const left = 16;
  const right = width - 16;
  const times = events.map((event) => msOf(event.occurredAt));
  let from = Math.min(...times);
  let to = Math.max(...times);
  if (to - from < 60_000) {
    from -= 30_000;
    to += 30_000;
  }
  const x = (ms: number): number => left + ((ms - from) / (to - from)) * (right - left);
  const xs = times.map(x);
  const level = markLevels(xs);
  // As tall as its highest level needs: 12 above the top mark, the labels below the axis.
  const axisY = 31 + Math.max(...level) * 14;
  const height = axisY + 28;
  const label = `${plural(events.length, "event")} from ${formatMs(Math.min(...times))} to ${formatMs(Math.max(...times))}`;
  return s(
    "svg",
    { class: "chart timeline", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `Time axis: ${label}` },
    s("title", {}, `Time axis: ${label}`),
    s("line", { class: "axis", x1: left, x2: right, y1: axisY, y2: axisY }),
    ticks(from, to).map((t) => [
      s("line", { class: "tick", x1: x(t), x2: x(t), y1: axisY, y2: axisY + 5 }),
      s("text", { class: "tick-label", x: x(t), y: axisY + 18, "text-anchor": "middle" }, tickLabel(t, to - from)),
    ]),
    events.map((event, i) => {
      const cx = xs[i]!;
      const cy = axisY - 14 - level[i]! * 14;
      const actor = actorName(event.actorType);
      return s(
        "g",
        { class: `mark actor-${event.actorType === ActorType.HUMAN ? "human" : event.actorType === ActorType.SYSTEM ? "system" : "agent"}` },
        s("title", {}, `#${event.sequence} ${kindName(event.kind)} by ${actor}${event.actorId === "" ? "" : ` ${event.actorId}`} at ${formatMs(times[i]!)}`),
        s("line", { class: "stem", x1: cx, x2: cx, y1: axisY, y2: cy }),
        s("circle", { cx, cy, r: 5 }),
      );
    }),
  );
}

/** Appends per minute as bars, notices opened and acknowledged as lines, over the last hour. */
export function minuteChart(minutes: readonly MinuteActivity[]): SVGSVGElement {
  const height = 170;
  const left = 44;
  const right = width - 12;
  const top = 12;
  const bottom = height - 30;
  const appends = minutes.map((m) => Number(m.appends));
  const opened = minutes.map((m) => Number(m.noticesOpened));
  const acked = minutes.map((m) => Number(m.noticesAcknowledged));
  const most = Math.max(1, ...appends, ...opened, ...acked);
  const slot = (right - left) / Math.max(minutes.length, 1);
  const y = (n: number): number => bottom - (n / most) * (bottom - top);
  const line = (values: number[]): string => values.map((v, i) => `${i === 0 ? "M" : "L"}${(left + slot * (i + 0.5)).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const total = (values: number[]): number => values.reduce((a, b) => a + b, 0);
  const activity = (appended: number, openedHere: number, ackedHere: number): string =>
    `${plural(appended, "append")}, ${plural(openedHere, "notice")} opened, ${count(ackedHere)} acknowledged`;
  const label = `Last hour: ${activity(total(appends), total(opened), total(acked))}; at most ${count(most)} in a minute`;
  const first = minutes[0] === undefined ? 0 : msOf(minutes[0].minute);
  return s(
    "svg",
    { class: "chart minutes", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label },
    s("title", {}, label),
    s("line", { class: "axis", x1: left, x2: right, y1: bottom, y2: bottom }),
    s("line", { class: "axis", x1: left, x2: left, y1: top, y2: bottom }),
    s("text", { class: "tick-label", x: left - 6, y: top + 4, "text-anchor": "end" }, String(most)),
    s("text", { class: "tick-label", x: left - 6, y: bottom, "text-anchor": "end" }, "0"),
    [0, 15, 30, 45, 59].map((i) =>
      s("text", { class: "tick-label", x: left + slot * (i + 0.5), y: bottom + 18, "text-anchor": "middle" }, i === 59 ? "now" : formatMs(first + i * 60_000).slice(11, 16)),
    ),
    minutes.map((m, i) =>
      s(
        "rect",
        { class: "bar", x: left + slot * i + 1, y: y(appends[i]!), width: Math.max(slot - 2, 1), height: bottom - y(appends[i]!) },
        s("title", {}, `${formatMs(msOf(m.minute)).slice(11, 16)}: ${activity(appends[i]!, opened[i]!, acked[i]!)}`),
      ),
    ),
    s("path", { class: "line opened", d: line(opened) }),
    s("path", { class: "line acked", d: line(acked) }),
  );
}
