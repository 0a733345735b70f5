import { hashToken } from "../rpc/tokens.js";
import { UsageError } from "./connection.js";

export const tokenUsage = `usage: sessionstate token hash < token.txt

Reads a token on standard input and prints the SHA-256 hex digest to put in the tokens file.
`;

/** `sessionstate token hash`: the tokens file stores only digests, never tokens. */
export async function tokenCommand(args: readonly string[], input: NodeJS.ReadableStream, out: NodeJS.WritableStream): Promise<number> {
  if (args[0] !== "hash" || args.length > 1) throw new UsageError('the only token command is "token hash"');
  let text = "";
  for await (const chunk of input) text += chunk.toString();
  const token = text.replace(/\r?\n$/, "");
  if (token.trim() === "") throw new UsageError("standard input held no token");
  if (/\s/.test(token)) throw new UsageError("a token must not contain whitespace");
  out.write(`${hashToken(token)}\n`);
  return 0;
}
