import { toJsonString } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { clientFromFlags, connectionOptions, connectionUsage, parseCommandArgs, UsageError } from "./connection.js";

export const statusUsage = `usage: sessionstate status <key> [--agent A] [--since V] [--limit N] [--json]

Prints a session's state version and, with --since, what changed after version V.

${connectionUsage}
`;

/** `sessionstate status`: prints a session's version and changes, for people or (--json) for scripts. */
export async function statusCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, {
    ...connectionOptions,
    agent: { type: "string" },
    since: { type: "string" },
    limit: { type: "string" },
    json: { type: "boolean" },
  });
  const [key, ...extra] = positionals;
  if (key === undefined || extra.length > 0) throw new UsageError("give exactly one session key");
  if (values.since !== undefined && !/^\d+$/.test(values.since)) throw new UsageError("--since must be a non-negative integer");
  if (values.limit !== undefined && !/^\d+$/.test(values.limit)) throw new UsageError("--limit must be a non-negative integer");
  const client = clientFromFlags(values, env);
  try {
    const response = await client.reconcile.sessionStatus({
      session: { key, agentId: values.agent ?? "" },
      changesSince: values.since === undefined ? undefined : BigInt(values.since),
      limit: values.limit === undefined ? 0 : Number(values.limit),
    });
    if (values.json === true) {
      out.write(`${toJsonString(SessionStatusResponseSchema, response)}\n`);
      return 0;
    }
    const lines = [`session ${response.session?.key} (agent ${response.session?.agentId})`, `state version ${response.stateVersion}`];
    const changes = response.stateChanges;
    if (changes !== undefined) {
      lines.push(`changes since ${values.since}: ${changes.events.length} event${changes.events.length === 1 ? "" : "s"}`);
      for (const event of changes.events) {
        const at = event.occurredAt === undefined ? "" : timestampDate(event.occurredAt).toISOString();
        const kind = (EventKind[event.kind] ?? String(event.kind)).toLowerCase();
        const actor = (ActorType[event.actorType] ?? String(event.actorType)).toLowerCase();
        lines.push(`  ${event.sequence}  ${at}  ${kind}  ${actor}${event.actorId === "" ? "" : ` ${event.actorId}`}  ${event.summary}`);
      }
      if (changes.truncated) lines.push(`  … more events follow; ask again with --since ${changes.events.at(-1)?.sequence}`);
      if (changes.historyGap) {
        lines.push("history gap: part of this history was pruned; refresh the whole session instead of applying this delta");
      }
    }
    out.write(`${lines.join("\n")}\n`);
    return 0;
  } finally {
    client.close();
  }
}
