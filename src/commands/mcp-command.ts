import { isAgentQualified } from "../domain/session-key.js";
import { clientFromFlags, CommandFailure, connectionUsage, parseCommandArgs, UsageError } from "./connection.js";

export const mcpUsage = `usage: sessionstate mcp --session KEY

Serves the Model Context Protocol on standard input and output, for an agent runtime (Claude Code,
Codex, ...) to start as an MCP server. The agent is the session KEY (agent-qualified, e.g.
agent:main:main); its tools: session_status, sessions_list, session_watch, session_unwatch and
stale_notices (which returns this session's pending notices and acknowledges them). The server lives
in the @sessionstate/mcp package, installed beside this one.

${connectionUsage}
`;

/** `sessionstate mcp`: runs the MCP server of @sessionstate/mcp until its client closes standard input. */
export async function mcpCommand(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseCommandArgs(args, { session: { type: "string" } });
  const session = values.session?.trim();
  if (session === undefined || session === "") throw new UsageError("--session is required");
  if (!isAgentQualified(session)) throw new UsageError(`--session must be an agent-qualified key such as agent:main:main (got "${session}")`);
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
    await mcp.serveMcpOverStdio({ client, session });
    return 0;
  } finally {
    client.close();
  }
}
