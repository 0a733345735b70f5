/**
 * The Upstream service from the command line (issue 40): `adopt` a CLI's transcript for a session, list
 * the adopted `links` with their markers and last scan outcome, and `scan` them now (one monitor tick).
 */
import { isAbsolute, resolve } from "node:path";
import { AdoptResponseSchema, ListUpstreamLinksResponseSchema, ScanNowResponseSchema } from "../../gen/sessionstate/v1/upstream_pb.js";
import { connectionUsage, parseCommandArgs, UsageError, withClient } from "./connection.js";
import { jsonLine, table, timeText } from "./output.js";

/** The largest page ListUpstreamLinks serves. */
const pageSize = 1000;

export const adoptUsage = `usage: sessionstate adopt <key> --catalog claude|codex|pi --transcript PATH [--thread ID] [--host ID] [--json]

Adopts a session's upstream: the server links the transcript (a file under its --transcript-root) from
its current end, and from then on records a person's turns in it as human_direct_message. --thread is
the CLI's own session id (a hook that names no transcript finds the link by it); a relative PATH is
taken from the current folder.

${connectionUsage}
`;

/** `sessionstate adopt <key>`: Adopt with a local transcript. */
export async function adoptCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream, cwd = process.cwd()): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { catalog: { type: "string" }, transcript: { type: "string" }, thread: { type: "string" }, host: { type: "string" }, json: { type: "boolean" } },
    ["<key>"],
  );
  if (values.catalog === undefined) throw new UsageError("--catalog: give the CLI that writes the transcript (claude, codex or pi)");
  if (values.transcript === undefined) throw new UsageError("--transcript: give the transcript file's path");
  const path = isAbsolute(values.transcript) ? values.transcript : resolve(cwd, values.transcript);
  return withClient(values, env, async (client) => {
    const adopted = await client.upstream.adopt({
      session: { key: positionals[0]! },
      catalogId: values.catalog!,
      hostId: values.host ?? "",
      threadId: values.thread ?? "",
      source: { case: "localTranscript", value: { path } },
    });
    if (values.json === true) {
      out.write(jsonLine(AdoptResponseSchema, adopted));
      return 0;
    }
    const key = adopted.event?.session?.key ?? positionals[0]!;
    out.write(
      adopted.linked
        ? `adopted ${key} from ${values.catalog}: ${adopted.link?.source} from byte ${adopted.link?.marker} (event ${adopted.event?.sequence})\n`
        : `adopted ${key} from ${values.catalog}, but not linked: ${adopted.reason}\n`,
    );
    return 0;
  });
}

export const linksUsage = `usage: sessionstate links [--agent ID] [--json]

Lists the namespace's adopted links: the session, its catalog, the transcript or node it reads, how far
it has read (its marker), when it was last scanned and what that scan came to on this server.

${connectionUsage}
`;

/** `sessionstate links`: every adopted link of the namespace (or of one agent). */
export async function linksCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseCommandArgs(args, { agent: { type: "string" }, json: { type: "boolean" } });
  return withClient(values, env, async (client) => {
    const rows: string[][] = [];
    let pageToken = "";
    do {
      const page = await client.upstream.listUpstreamLinks({ agentId: values.agent ?? "", pageSize, pageToken });
      if (values.json === true) out.write(jsonLine(ListUpstreamLinksResponseSchema, page));
      for (const link of page.links) {
        rows.push([link.session?.key ?? "", link.catalogId, link.source, link.marker, timeText(link.lastScannedAt), link.lastScanOutcome === "" ? "-" : link.lastScanOutcome]);
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (values.json !== true) {
      out.write(rows.length === 0 ? "no adopted links: sessionstate adopt links one\n" : table(["KEY", "CATALOG", "SOURCE", "MARKER", "LAST SCAN", "OUTCOME"], rows));
    }
    return 0;
  });
}

export const scanUsage = `usage: sessionstate scan [--json]

Runs one upstream monitor tick now over the namespace's watched links (ScanNow; an admin token) and
says what it found.

${connectionUsage}
`;

/** `sessionstate scan`: ScanNow. */
export async function scanCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseCommandArgs(args, { json: { type: "boolean" } });
  return withClient(values, env, async (client) => {
    const report = await client.upstream.scanNow({});
    if (values.json === true) {
      out.write(jsonLine(ScanNowResponseSchema, report));
      return 0;
    }
    const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`;
    out.write(
      `scanned ${plural(report.linksScanned, "link")}: ${plural(report.eventsRecorded, "event")} recorded` +
        `${report.linksHeld > 0 ? `, ${report.linksHeld} held at a long line` : ""}` +
        `${report.linksTimedOut > 0 ? `, ${report.linksTimedOut} timed out` : ""}` +
        `${report.linksFailed > 0 ? `, ${report.linksFailed} failed (see the server's log)` : ""}\n`,
    );
    return 0;
  });
}
