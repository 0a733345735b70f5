import { readFileSync } from "node:fs";

/** Resident memory of a process, in MB, from /proc. */
export function rssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match === null ? Number.NaN : Number(match[1]) / 1024;
}

/** The p-th percentile of `values` (sorted ascending as a side effect). */
export function percentile(values: number[], p: number): number {
  values.sort((a, b) => a - b);
  if (values.length === 0) return Number.NaN;
  return values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;
}

/** A duration from the environment (for shorter local runs), else the default. */
export function durationMs(name: string, fallback: number): number {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}
