import { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { connectionUsage, parseCommandArgs, withClient } from "./connection.js";
import { counted, countFlag, eventLine, jsonLine } from "./output.js";

export const statusUsage = `usage: sessionstate status <key> [--agent A] [--since V] [--limit N] [--json]

Prints a session's state version and, with --since, what changed after version V (a page of at most
N events, default and most 200; 'sessionstate events' reads the whole log).

${connectionUsage}
`;

/** `sessionstate status`: prints a session's version and changes, for people or (--json) for scripts. */
export async function statusCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { agent: { type: "string" }, since: { type: "string" }, limit: { type: "string" }, json: { type: "boolean" } },
    ["<key>"],
  );
  const key = positionals[0]!;
  const since = countFlag("--since", values.since);
  const limit = countFlag("--limit", values.limit);
  return withClient(values, env, async (client) => {
    const response = await client.reconcile.sessionStatus({
      session: { key, agentId: values.agent ?? "" },
      changesSince: since,
      limit: limit === undefined ? 0 : Number(limit),
    });
    if (values.json === true) {
      out.write(jsonLine(SessionStatusResponseSchema, response));
      return 0;
    }
    const lines = [`session ${response.session?.key} (agent ${response.session?.agentId})`, `state version ${response.stateVersion}`];
    const changes = response.stateChanges;
    if (changes !== undefined) {
      lines.push(`changes since ${since}: ${counted(changes.events.length, "event")}`);
      for (const event of changes.events) lines.push(eventLine(event));
      if (changes.truncated) lines.push(`  … more events follow; ask again with --since ${changes.events.at(-1)?.sequence}`);
      if (changes.historyGap) {
        lines.push("history gap: part of this history was pruned; refresh the whole session instead of applying this delta");
      }
    }
    out.write(`${lines.join("\n")}\n`);
    return 0;
  });
}
