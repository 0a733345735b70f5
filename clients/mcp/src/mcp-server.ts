/**
 * An MCP server that lets an agent reconcile with sessionstate by itself, as the seed's agents do: its
 * own session's stale notices (consuming them is the dequeue), exact deltas with session_status, the
 * sessions of an agent, and watching or unwatching targets. One configured session per server; stdio.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
// The client is compiled into this package (dist/typescript/src): it needs no other package of ours.
import { ActorType, EventKind, type CallError, type SessionStateClient, type StaleNotice, type StateEvent, StatusCode } from "../../typescript/src/index.js";
import { z } from "zod";

/**
 * The calls the server makes: any SessionStateClient (the `sessionstate mcp` command passes its own copy of
 * the client, compiled into the server package; structurally the same).
 */
export type McpClient = Pick<SessionStateClient, "watch" | "reconcile" | "ack">;

/** What the server needs: a connected client and the session it acts for. */
export interface McpServerOptions {
  client: McpClient;
  /** The agent-qualified key of the session this agent is (the watcher), e.g. `agent:main:main`. */
  session: string;
  /** How long `stale_notices` waits for the server to deliver the pending notices, in ms. Default 5 s. */
  noticesTimeoutMs?: number;
  /**
   * A consumer group this agent's notices are shared in (docs/api.md of the server, consumer groups): each
   * `stale_notices` call returns only the notices no other member holds, at most `maxInFlight` (default 16).
   */
  group?: string;
  maxInFlight?: number;
}

const statusNames = new Map<number, string>(Object.entries(StatusCode).map(([name, code]) => [code, name]));

/** Lower-case names as the seed writes them: `human_direct_message`, `human`. */
function enumName(names: Record<number, string>, value: number): string {
  const name = names[value];
  return name === undefined ? String(value) : name.toLowerCase();
}

function eventToJson(event: StateEvent): Record<string, unknown> {
  return {
    sequence: Number(event.sequence),
    kind: enumName(EventKind as unknown as Record<number, string>, event.kind),
    actorType: enumName(ActorType as unknown as Record<number, string>, event.actorType),
    ...(event.actorId === "" ? {} : { actorId: event.actorId }),
    summary: event.summary,
    ...(event.occurredAt === undefined
      ? {}
      : { occurredAt: new Date(Number(event.occurredAt.seconds) * 1000 + Math.floor(event.occurredAt.nanos / 1e6)).toISOString() }),
  };
}

function result(value: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }] };
}

/** A failed call as an MCP tool error carrying the service's status and message. */
function toolError(err: unknown): CallToolResult {
  const error = err as Partial<CallError>;
  const text =
    typeof error.code === "number" ? `${statusNames.get(error.code) ?? error.code}: ${error.details ?? error.message ?? ""}` : `error: ${(err as Error).message}`;
  return { isError: true, content: [{ type: "text", text }] };
}

async function guarded(run: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    return result(await run());
  } catch (err) {
    return toolError(err);
  }
}

/** The notices pending for `watcher` now: read from a subscription until the server says they are all sent. */
async function pendingNotices(client: McpClient, watcher: string, timeoutMs: number, group: string, maxInFlight: number): Promise<StaleNotice[]> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), timeoutMs);
  const notices: StaleNotice[] = [];
  const call = client.watch.subscribeStaleNotices({ watcherSessionKeys: [watcher], consumerGroup: group, maxInFlight: group === "" ? 0 : maxInFlight }, { timeoutMs: undefined, signal: stop.signal });
  try {
    for await (const message of call) {
      if (message.message.case === "notice") notices.push(message.message.value);
      else if (message.message.case === "synced") return notices;
    }
    throw new Error("the notice stream ended before the pending notices were sent");
  } catch (err) {
    if (stop.signal.aborted) throw Object.assign(new Error(`no answer from sessionstate within ${timeoutMs} ms`), { code: StatusCode.DEADLINE_EXCEEDED, details: `no answer within ${timeoutMs} ms` });
    throw err;
  } finally {
    clearTimeout(timer);
    call.cancel();
  }
}

/** Builds the MCP server with its five tools (not yet connected to a transport). */
export function createMcpServer({ client, session, noticesTimeoutMs = 5000, group = "", maxInFlight = 0 }: McpServerOptions): McpServer {
  const server = new McpServer({ name: "sessionstate", version: "0.1.0" });
  const options = { client, session, noticesTimeoutMs, group, maxInFlight };
  // One function per tool: its description, input schema and what it calls.
  for (const register of [sessionStatusTool, sessionsListTool, sessionWatchTool, sessionUnwatchTool, staleNoticesTool]) register(server, options);
  return server;
}

/** `session_status`: a session's version and what changed after a version. */
function sessionStatusTool(server: McpServer, { client }: Required<McpServerOptions>): void {
  server.registerTool(
    "session_status",
    {
      title: "Session status",
      description:
        "A session's state version and, with changesSince, exactly what changed after that version (up to limit events, at most 200; " +
        "truncated says more remain). historyGap true means the history after changesSince was pruned: refresh the whole session " +
        "instead of applying the events as a delta. Use it when a stale notice says: session_status sessionKey ... changesSince ....",
      inputSchema: {
        sessionKey: z.string().describe('The session, e.g. "agent:main:subagent:child".'),
        changesSince: z.number().int().min(0).optional().describe("Return the events after this version."),
        limit: z.number().int().min(1).max(200).optional().describe("Most events to return (default 200)."),
      },
    },
    ({ sessionKey, changesSince, limit }) =>
      guarded(async () => {
        const status = await client.reconcile.sessionStatus({
          session: { key: sessionKey },
          ...(changesSince === undefined ? {} : { changesSince: BigInt(changesSince) }),
          limit: limit ?? 0,
        });
        const changes = status.stateChanges;
        return {
          sessionKey: status.session?.key ?? sessionKey,
          stateVersion: Number(status.stateVersion),
          ...(changes === undefined
            ? {}
            : { stateChanges: { events: changes.events.map(eventToJson), historyGap: changes.historyGap, truncated: changes.truncated } }),
        };
      }),
  );
}

/** `sessions_list`: one page of sessions with their versions. */
function sessionsListTool(server: McpServer, { client }: Required<McpServerOptions>): void {
  server.registerTool(
    "sessions_list",
    {
      title: "Sessions",
      description: "The sessions that have recorded changes, with their state versions, by agent (one page; pass pageToken for the next).",
      inputSchema: {
        agentId: z.string().optional().describe('Only this agent\'s sessions, e.g. "main".'),
        limit: z.number().int().min(1).max(1000).optional().describe("Most sessions to return (default 100)."),
        pageToken: z.string().optional().describe("nextPageToken of the previous page."),
      },
    },
    ({ agentId, limit, pageToken }) =>
      guarded(async () => {
        const page = await client.reconcile.listSessions({ agentId: agentId ?? "", pageSize: limit ?? 0, pageToken: pageToken ?? "" });
        return {
          sessions: page.sessions.map((s) => ({ sessionKey: s.session?.key ?? "", agentId: s.session?.agentId ?? "", stateVersion: Number(s.stateVersion) })),
          ...(page.nextPageToken === "" ? {} : { nextPageToken: page.nextPageToken }),
        };
      }),
  );
}

/** `session_watch`: this session watches a target. */
function sessionWatchTool(server: McpServer, { client, session }: Required<McpServerOptions>): void {
  server.registerTool(
    "session_watch",
    {
      title: "Watch a session",
      description: `Makes this session (${session}) watch a target session: when someone else changes it, one stale notice waits in stale_notices.`,
      inputSchema: { targetKey: z.string().describe('The session to watch, e.g. "agent:main:subagent:child".') },
    },
    ({ targetKey }) =>
      guarded(async () => {
        const watched = await client.watch.watch({ watcherSessionKey: session, target: { key: targetKey } });
        return { watched: watched.watched, ...(watched.reason === "" ? {} : { reason: watched.reason }) };
      }),
  );
}

/** `session_unwatch`: this session stops watching a target. */
function sessionUnwatchTool(server: McpServer, { client, session }: Required<McpServerOptions>): void {
  server.registerTool(
    "session_unwatch",
    {
      title: "Stop watching a session",
      description: `Makes this session (${session}) stop watching a target session.`,
      inputSchema: { targetKey: z.string().describe("The session to stop watching.") },
    },
    ({ targetKey }) =>
      guarded(async () => ({ removed: (await client.watch.unwatch({ watcherSessionKey: session, target: { key: targetKey } })).removed })),
  );
}

/** `stale_notices`: the notices pending for this session, acknowledged as they are returned. */
function staleNoticesTool(server: McpServer, { client, session, noticesTimeoutMs, group, maxInFlight }: Required<McpServerOptions>): void {
  server.registerTool(
    "stale_notices",
    {
      title: "Stale notices",
      description:
        `The stale notices pending for this session (${session}): one per watched session that someone else changed. Returning them ` +
        "acknowledges them: reconcile each one (its text says how: session_status with changesSince) before acting on that session. " +
        "If you already reconciled a session up to some version, pass it in reconciledThrough so changes you saw do not notify again.",
      inputSchema: {
        reconciledThrough: z
          .record(z.string(), z.number().int().min(0))
          .optional()
          .describe('Per target session key, the state version you have already reconciled to, e.g. {"agent:main:subagent:child": 19}.'),
      },
    },
    ({ reconciledThrough }) =>
      guarded(async () => {
        const notices = await pendingNotices(client, session, noticesTimeoutMs, group, maxInFlight);
        const acked = await Promise.all(
          notices.map(async (notice) => {
            const through = reconciledThrough?.[notice.target?.key ?? ""];
            const ack = await client.ack(notice, through === undefined ? {} : { reconciledThrough: BigInt(through) });
            return {
              sessionKey: notice.target?.key ?? "",
              text: notice.text,
              changesSince: Number(notice.changesSince),
              notifiedVersion: Number(notice.notifiedVersion),
              wake: notice.wake,
              queueOnly: notice.queueOnly,
              acknowledged: ack.acknowledged,
              reopened: ack.reopened,
            };
          }),
        );
        return { session, notices: acked };
      }),
  );
}

/** Serves the MCP server over standard input and output until the client closes it. */
export async function serveMcpOverStdio(options: McpServerOptions): Promise<void> {
  const server = createMcpServer(options);
  const transport = new StdioServerTransport();
  await server.connect(transport);
  // connect() installs its own close handler: chain to it.
  await new Promise<void>((resolve) => {
    const inner = transport.onclose;
    transport.onclose = () => {
      inner?.();
      resolve();
    };
  });
}
