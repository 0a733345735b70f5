import { isAgentQualified } from "../domain/session-key.js";
import { consumerGroupPattern, maxMaxInFlight } from "../domain/consumer-group.js";
import { clientFromFlags, CommandFailure, connectionUsage, parseCommandArgs, UsageError } from "./connection.js";

export const mcpUsage = `usage: sessionstate mcp --session KEY [--group G [--max-in-flight N]]

Serves the Model Context Protocol on standard input and output, for an agent runtime (Claude Code,
Codex, ...) to start as an MCP server. The agent is the session KEY (agent-qualified, e.g.
agent:main:main); its tools: session_status, sessions_list, session_watch, session_unwatch and
stale_notices (which returns this session's pending notices and acknowledges them). The server lives
in the @sessionstate/mcp package, installed beside this one. With --group, several agents (or copies of
one) that serve the same session share its notices: each stale_notices call returns only the notices no
other member of the group holds, at most N (default 16).

${connectionUsage}
`;

/** `sessionstate mcp`: runs the MCP server of @sessionstate/mcp until its client closes standard input. */
export async function mcpCommand(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseCommandArgs(args, { session: { type: "string" }, group: { type: "string" }, "max-in-flight": { type: "string" } });
  const session = values.session?.trim();
  if (session === undefined || session === "") throw new UsageError("--session is required");
  if (!isAgentQualified(session)) throw new UsageError(`--session must be an agent-qualified key such as agent:main:main (got "${session}")`);
  const maxInFlight = values["max-in-flight"] === undefined ? 0 : Number(values["max-in-flight"]);
  if (!Number.isInteger(maxInFlight) || maxInFlight < 0 || maxInFlight > maxMaxInFlight) throw new UsageError(`--max-in-flight: give a whole number from 1 to ${maxMaxInFlight}`);
  if (values["max-in-flight"] !== undefined && values.group === undefined) throw new UsageError("--max-in-flight: only with --group");
  if (values.group !== undefined && !consumerGroupPattern.test(values.group)) throw new UsageError("--group: 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'");
  let mcp: typeof import("@sessionstate/mcp");
  try {
    mcp = await import("@sessionstate/mcp");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") throw err;
    throw new CommandFailure("the MCP server is in the @sessionstate/mcp package: install it beside sessionstate (npm pack ./clients/mcp, then npm install -g ./sessionstate-mcp-0.1.0.tgz)", {
      cause: err,
    });
  }
  const client = clientFromFlags(values, env);
  try {
    await mcp.serveMcpOverStdio({ client, session, ...(values.group === undefined ? {} : { group: values.group, maxInFlight }) });
    return 0;
  } finally {
    client.close();
  }
}
