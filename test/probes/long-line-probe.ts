/**
 * Run by test/server/long-line.test.ts in a process of its own, so its peak memory is this scan's alone:
 * adopts an empty Claude Code transcript, appends one 100 MiB line (a prompt with a pasted image, in
 * base64, then the typed text), runs one scan, and prints what it found and the peak RSS before and
 * after the scan, as JSON on stdout.
 */
import { closeSync, openSync, realpathSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { startTestServer, tempDir } from "../support/helpers.js";

const lineBytes = Number(process.env.PROBE_LINE_MIB ?? 100) * 1024 * 1024;
const root = tempDir();
const dir = realpathSync(root.dir);
const path = join(dir, "session.jsonl");
writeFileSync(path, "");
const t = await startTestServer({ transcriptRoot: dir, monitorIntervalMs: 86_400_000 });
try {
  const key = "agent:main:adopted";
  await t.upstream.adopt({ session: { key }, catalogId: "claude", source: { case: "localTranscript", value: { path } } });
  await t.watch.watch({ watcherSessionKey: "agent:main:main", target: { key } });

  // Written in 1 MiB pieces from one buffer, so writing it costs no memory.
  const head = '{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"';
  const tail = `"}},{"type":"text","text":"what is on this screenshot?"}]},"timestamp":"${new Date(t.clock.nowMs()).toISOString()}"}\n`;
  const fd = openSync(path, "a");
  writeSync(fd, head);
  const piece = Buffer.alloc(1024 * 1024, "QUJD");
  let base64Bytes = lineBytes - head.length - tail.length;
  base64Bytes += (4 - (base64Bytes % 4)) % 4; // whole base64 quanta: the line is 100 MiB or up to 3 bytes more
  for (let left = base64Bytes; left > 0; left -= piece.length) writeSync(fd, piece, 0, Math.min(piece.length, left));
  writeSync(fd, tail);
  closeSync(fd);

  const peakBeforeKiB = process.resourceUsage().maxRSS;
  const scan = await t.upstream.scanNow({});
  const peakAfterKiB = process.resourceUsage().maxRSS;
  const link = (await t.upstream.listUpstreamLinks({})).links[0];
  const events = (await t.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events;
  process.stdout.write(
    `${JSON.stringify({
      lineBytes: statSync(path).size,
      eventsRecorded: scan.eventsRecorded,
      linksHeld: scan.linksHeld,
      marker: link?.marker,
      kinds: events.map((e) => e.kind),
      peakBeforeKiB,
      peakAfterKiB,
    })}\n`,
  );
} finally {
  await t.dispose();
  root.remove();
}
