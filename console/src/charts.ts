/**
 * Pictures where one would rather look than read: a session's events on a time axis, and a namespace's
 * appends and notices per minute. Plain SVG; every mark has a <title> (a tooltip, read by screen readers)
 * and each chart an accessible name that says what it shows in words.
 */
import type { MinuteActivity } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { ActorType, type StateEvent } from "../../gen/sessionstate/v1/types_pb.js";
import { s } from "./dom.js";
import { actorName, formatMs, kindName, msOf } from "./format.js";

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

/** A session's events as marks on a time axis, coloured by who acted; stems are taller for later sequences. */
export function eventTimeline(events: readonly StateEvent[]): SVGSVGElement {
  const height = 150;
  const left = 16;
  const right = width - 16;
  const axisY = height - 28;
  const times = events.map((event) => msOf(event.occurredAt));
  let from = Math.min(...times);
  let to = Math.max(...times);
  if (to - from < 60_000) {
    from -= 30_000;
    to += 30_000;
  }
  const x = (ms: number): number => left + ((ms - from) / (to - from)) * (right - left);
  const label = `${events.length} events from ${formatMs(Math.min(...times))} to ${formatMs(Math.max(...times))}`;
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
      const cx = x(times[i]!);
      const cy = axisY - 14 - (i % 6) * 14;
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
  const label = `Last hour: ${total(appends)} appends, ${total(opened)} notices opened, ${total(acked)} acknowledged; at most ${most} in a minute`;
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
        s("title", {}, `${formatMs(msOf(m.minute)).slice(11, 16)}: ${appends[i]} appends, ${opened[i]} notices opened, ${acked[i]} acknowledged`),
      ),
    ),
    s("path", { class: "line opened", d: line(opened) }),
    s("path", { class: "line acked", d: line(acked) }),
  );
}
