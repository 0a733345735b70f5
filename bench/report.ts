/**
 * The report files of a full run: report.md and latency.svg.
 */
import { curves, rounds, roundMs, rows } from "./context.js";

/** Latency distributions as an SVG chart: cumulative share of notices (y) by latency (x, log scale). */
export function latencyChart(): string {
  const width = 720;
  const height = 360;
  const pad = 50;
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
  const x = (ms: number) => pad + ((Math.log10(Math.max(ms, 0.1)) + 1) / 4) * (width - 2 * pad); // 0.1 ms .. 1000 ms
  const y = (share: number) => height - pad - share * (height - 2 * pad);
  const lines = Object.entries(curves).map(([name, values], i) => {
    const step = Math.max(1, Math.floor(values.length / 300));
    const points: string[] = [];
    for (let j = 0; j < values.length; j += step) points.push(`${x(values[j]!).toFixed(1)},${y((j + 1) / values.length).toFixed(1)}`);
    return `<polyline fill="none" stroke="${colors[i % colors.length]}" stroke-width="2" points="${points.join(" ")}"/>` +
      `<text x="${pad + 10}" y="${pad + 16 * i}" fill="${colors[i % colors.length]}" font-size="12">${name} (n=${values.length})</text>`;
  });
  const ticks = [0.1, 1, 10, 100, 1000].map((ms) => `<line x1="${x(ms)}" y1="${y(0)}" x2="${x(ms)}" y2="${y(1)}" stroke="#ddd"/><text x="${x(ms) - 10}" y="${height - pad + 16}" font-size="11">${ms} ms</text>`);
  const shares = [0, 0.5, 0.99].map((s) => `<line x1="${pad}" y1="${y(s)}" x2="${width - pad}" y2="${y(s)}" stroke="#ddd"/><text x="8" y="${y(s) + 4}" font-size="11">${s * 100}%</text>`);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${ticks.join("")}${shares.join("")}${lines.join("")}<text x="${width / 2 - 120}" y="${height - 8}" font-size="12">latency (log scale); share of notices at or below</text></svg>\n`;
}

export function report(machine: string, date: string, runs: number, goalLines: readonly string[]): string {
  const table = ["| scenario | figure | value | goal |", "| --- | --- | --- | --- |", ...rows.map((r) => `| ${r.join(" | ")} |`)];
  return (
    `# sessionstate benchmark report\n\n${date}, ${machine}. Server and clients share the machine; every ratio is against a baseline measured in the same run (throughput: medians of ${rounds} rounds of ${roundMs} ms; latency: medians over ${rounds} rounds of 5 s after a warm-up run).\n\n` +
    `## Goals\n\nEach goal's median over ${runs} full run${runs === 1 ? "" : "s"} of every scenario, each run's value, and their spread.\n\n${goalLines.join("\n")}\n\n` +
    `## Every figure (the last run)\n\n${table.join("\n")}\n\n![latency distributions](latency.svg)\n`
  );
}
