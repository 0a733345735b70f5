/**
 * A load generator of its own process for the hooks scenario: POSTs `rate` hook calls a second for
 * `seconds` to `/hooks/claude` on HOST:PORT, each naming a session nobody adopted, over kept-alive
 * connections; prints the number of calls and of 204 answers. Its own process, so that its work never
 * delays the measuring process's calls. Usage: node --import tsx bench/hook-flood.ts HOST:PORT RATE SECONDS
 */
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";

const [address, rateText, secondsText] = process.argv.slice(2);
const at = address!.lastIndexOf(":");
const rate = Number(rateText);
const total = Math.floor(rate * Number(secondsText));
const agent = new Agent({ keepAlive: true, maxSockets: 16 });
let answered = 0;
const post = (n: number): Promise<void> =>
  new Promise((resolve) => {
    const req = request(
      { host: address!.slice(0, at), port: Number(address!.slice(at + 1)), method: "POST", path: "/hooks/claude", agent, headers: { "content-type": "application/json" } },
      (res) => {
        if (res.statusCode === 204) answered++;
        res.resume();
        res.on("end", resolve);
      },
    );
    req.on("error", () => resolve());
    req.end(JSON.stringify({ session_id: `nobody-${n}`, transcript_path: `/nowhere/${n}.jsonl`, prompt_id: `x-${n}`, hook_event_name: "UserPromptSubmit", prompt: "…" }));
  });
const started = performance.now();
const sent: Promise<void>[] = [];
for (let n = 0; n < total; n++) {
  const wait = started + (n * 1000) / rate - performance.now();
  if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
  sent.push(post(n));
}
await Promise.all(sent);
agent.destroy();
process.stdout.write(`${total} ${answered}\n`);
