import { create } from "@bufbuild/protobuf";
import { ListNamespacesResponseSchema, ListSessionsResponseSchema, SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { WatchProvenance, type Cursor } from "../../gen/sessionstate/v1/types_pb.js";
import { ListWatchesResponseSchema, StaleNoticeSchema } from "../../gen/sessionstate/v1/watch_pb.js";
import { noticeFromCursor } from "../domain/notice.js";
import type { CursorRecord } from "../domain/records.js";
import { connectionUsage, parseCommandArgs, UsageError, withClient } from "./connection.js";
import { counted, countFlag, enumText, eventLine, jsonLine, provenanceFlag, table, timeText } from "./output.js";

/** The page size every listing asks for: the largest the API serves. */
const pageSize = 1000;

export const namespacesUsage = `usage: sessionstate namespaces [--json]

Lists the namespaces that hold a session or a watch, with their sessions, events, watches, pending
notices and last append. Every namespace the token may use, whatever --namespace says.

${connectionUsage}
`;

/** `sessionstate namespaces`: every namespace, one per row (or one ListNamespaces page per JSON line). */
export async function namespacesCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseCommandArgs(args, { json: { type: "boolean" } });
  return withClient(values, env, async (client) => {
    const rows: string[][] = [];
    let pageToken = "";
    do {
      const page = await client.reconcile.listNamespaces({ pageSize, pageToken });
      if (values.json === true) out.write(jsonLine(ListNamespacesResponseSchema, page));
      for (const namespace of page.namespaces) {
        const { name, sessions, events, watches, pendingNotices, updatedAt } = namespace;
        rows.push([name, String(sessions), String(events), String(watches), String(pendingNotices), timeText(updatedAt)]);
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (values.json !== true) {
      out.write(rows.length === 0 ? "no namespaces yet: nothing has been appended or watched\n" : table(["NAMESPACE", "SESSIONS", "EVENTS", "WATCHES", "PENDING", "LAST APPEND"], rows));
    }
    return 0;
  });
}

export const sessionsUsage = `usage: sessionstate sessions [--agent A] [--prefix P | --recent] [--limit N] [--page-token T] [--json]

Lists the sessions of the namespace by agent id and key, with their state version, last change,
pruned-through version and whether an upstream transcript is adopted; with --prefix only the keys that
start with P (by key, then agent), with --recent the most recently changed first. Shows the first 100
(--limit); when more follow, the last line says how to ask for them (with the same --prefix or --recent).

${connectionUsage}
`;

/** `sessionstate sessions`: a page of sessions of one namespace (or of one agent). */
export async function sessionsCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseCommandArgs(args, {
    agent: { type: "string" },
    prefix: { type: "string" },
    recent: { type: "boolean" },
    limit: { type: "string" },
    "page-token": { type: "string" },
    json: { type: "boolean" },
  });
  const limit = Number(countFlag("--limit", values.limit) ?? 100n);
  if (limit === 0) throw new UsageError("--limit must be at least 1");
  if (values.prefix !== undefined && values.recent === true) throw new UsageError("--prefix and --recent cannot be combined");
  const order = { keyPrefix: values.prefix ?? "", recentFirst: values.recent === true };
  const again = values.prefix !== undefined ? ` --prefix ${JSON.stringify(values.prefix)}` : values.recent === true ? " --recent" : "";
  return withClient(values, env, async (client) => {
    const rows: string[][] = [];
    let pageToken = values["page-token"] ?? "";
    do {
      const page = await client.reconcile.listSessions({ agentId: values.agent ?? "", ...order, pageSize: Math.min(pageSize, limit - rows.length), pageToken });
      if (values.json === true) out.write(jsonLine(ListSessionsResponseSchema, page));
      for (const summary of page.sessions) {
        const { session, stateVersion, updatedAt, prunedThrough, hasUpstream } = summary;
        rows.push([session?.key ?? "", session?.agentId ?? "", String(stateVersion), timeText(updatedAt), String(prunedThrough), hasUpstream ? "yes" : "no"]);
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "" && rows.length < limit);
    if (values.json !== true) {
      out.write(rows.length === 0 ? "no sessions\n" : table(["SESSION", "AGENT", "VERSION", "UPDATED", "PRUNED THROUGH", "UPSTREAM"], rows));
      if (pageToken !== "") out.write(`… more sessions follow: sessionstate sessions${again} --page-token ${pageToken}\n`);
    }
    return 0;
  });
}

export const eventsUsage = `usage: sessionstate events <key> [--agent A] [--since V] [--limit N] [--json]

Prints the log of a session: every event after version V (default 0: all that retention kept), oldest
first, up to N events (default 1000). Says when older events were pruned (a history gap).

${connectionUsage}
`;

/** `sessionstate events`: a session's log, read a SessionStatus page at a time. */
export async function eventsCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { agent: { type: "string" }, since: { type: "string" }, limit: { type: "string" }, json: { type: "boolean" } }, ["<key>"]);
  const key = positionals[0]!;
  let since = countFlag("--since", values.since) ?? 0n;
  const limit = Number(countFlag("--limit", values.limit) ?? 1000n);
  return withClient(values, env, async (client) => {
    const lines: string[] = [];
    let printed = 0;
    let header: string | undefined;
    let gap = false;
    for (;;) {
      const response = await client.reconcile.sessionStatus({ session: { key, agentId: values.agent ?? "" }, changesSince: since, limit: Math.min(200, limit - printed) });
      if (values.json === true) out.write(jsonLine(SessionStatusResponseSchema, response));
      header ??= `session ${response.session?.key} (agent ${response.session?.agentId}), state version ${response.stateVersion}`;
      const changes = response.stateChanges!;
      gap ||= changes.historyGap;
      for (const event of changes.events) lines.push(eventLine(event));
      printed += changes.events.length;
      const last = changes.events.at(-1);
      if (!changes.truncated || last === undefined) break;
      since = last.sequence;
      if (printed >= limit) {
        lines.push(`  … more events follow: sessionstate events ${key} --since ${since}`);
        break;
      }
    }
    if (values.json !== true) {
      const gapLine = gap ? ["history gap: events before these were pruned (retention); the log starts later than asked"] : [];
      out.write(`${[header!, ...gapLine, counted(printed, "event"), ...lines].join("\n")}\n`);
    }
    return 0;
  });
}

export const watchesUsage = `usage: sessionstate watches [--watcher KEY] [--target KEY [--agent A]] [--provenance P] [--pending] [--json]

Lists watches (watcher/target pairs) by watcher then target, with their marks: L the version the
watcher has acknowledged, N the version its notice covers, M the newest material version; a notice is
pending when N > L. --pending lists only pairs with a pending notice, each with the notice's text.
--provenance explicit or ambient.

${connectionUsage}
`;

export const pendingUsage = `usage: sessionstate pending [--watcher KEY] [--target KEY [--agent A]] [--json]

Lists the pending stale notices, each as its watcher would receive it: the same as
'sessionstate watches --pending'. With --json, one StaleNotice per line.

${connectionUsage}
`;

/** `sessionstate watches` and `sessionstate pending`: the pairs, or their pending notices. */
export async function watchesCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  out: NodeJS.WritableStream,
  { pendingOnly = false }: { pendingOnly?: boolean } = {},
): Promise<number> {
  const { values } = parseCommandArgs(
    args,
    {
      watcher: { type: "string" },
      target: { type: "string" },
      agent: { type: "string" },
      json: { type: "boolean" },
      ...(pendingOnly ? {} : { pending: { type: "boolean" }, provenance: { type: "string" } }),
    } as const,
  );
  const pending = pendingOnly || values.pending === true;
  if (values.agent !== undefined && values.target === undefined) throw new UsageError("--agent names the agent of --target: give --target too");
  const provenance = typeof values.provenance === "string" ? provenanceFlag("--provenance", values.provenance) : WatchProvenance.UNSPECIFIED;
  return withClient(values, env, async (client) => {
    const rows: string[][] = [];
    const notices: string[] = [];
    let pageToken = "";
    do {
      const page = await client.watch.listWatches({
        watcherSessionKey: values.watcher ?? "",
        ...(values.target === undefined ? {} : { target: { key: values.target, agentId: values.agent ?? "" } }),
        provenance,
        pageSize,
        pageToken,
      });
      // The server gives each pending notice's text with its cursor: a cursor with one is a pending pair.
      const cursors = pending ? page.cursors.filter((cursor) => cursor.pendingNoticeText !== "") : page.cursors;
      if (values.json === true && !pending) out.write(jsonLine(ListWatchesResponseSchema, page));
      for (const cursor of cursors) {
        const record = cursorRecordFromProto(cursor);
        if (pending) {
          const notice = noticeFromCursor(record);
          if (values.json === true) {
            const { watcherKey, target, changesSince, notifiedVersion, ...rest } = notice;
            const message = create(StaleNoticeSchema, {
              ...rest,
              watcherSessionKey: watcherKey,
              target: { key: target.key, agentId: target.agentId },
              changesSince: BigInt(changesSince),
              notifiedVersion: BigInt(notifiedVersion),
            });
            out.write(jsonLine(StaleNoticeSchema, message));
          }
          const held = cursor.claimedBy === "" ? "" : `\n  held by ${cursor.claimedBy.split("\n").join("; ")}`;
          notices.push(`${record.watcherKey} -> ${record.target.key} (agent ${record.target.agentId})  L ${record.acked}  N ${record.notified}  M ${record.material}\n  ${cursor.pendingNoticeText}${held}`);
        }
        rows.push([
          record.watcherKey,
          record.target.key,
          record.target.agentId,
          String(record.acked),
          String(record.notified),
          String(record.material),
          // A consumer group's member holds it: which group, and the member's address.
          cursor.pendingNoticeText === "" ? "no" : cursor.claimedBy === "" ? "yes" : `yes, held by ${cursor.claimedBy.split("\n").join("; ")}`,
          enumText(WatchProvenance, cursor.provenance),
          timeText(cursor.updatedAt),
        ]);
      }
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    if (values.json === true) return 0;
    if (pending) out.write(notices.length === 0 ? "no pending notices\n" : `${notices.join("\n")}\n`);
    else out.write(rows.length === 0 ? "no watches\n" : table(["WATCHER", "TARGET", "AGENT", "L", "N", "M", "PENDING", "PROVENANCE", "UPDATED"], rows));
    return 0;
  });
}

/** A cursor as the API sends it, in the domain's terms (the notice text and pending rule are the domain's). */
function cursorRecordFromProto(cursor: Cursor): CursorRecord {
  return {
    watcherKey: cursor.watcherSessionKey,
    target: { namespace: "", key: cursor.target?.key ?? "", agentId: cursor.target?.agentId ?? "" },
    acked: Number(cursor.ackedVersion),
    notified: Number(cursor.notifiedVersion),
    material: Number(cursor.materialVersion),
    updatedAtMs: 0,
    provenance: cursor.provenance === WatchProvenance.AMBIENT ? "ambient" : "explicit",
    extraKinds: [],
  };
}
