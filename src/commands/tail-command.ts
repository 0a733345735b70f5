import { toJsonString } from "@bufbuild/protobuf";
import { StaleNoticeSchema } from "../../gen/sessionstate/v1/watch_pb.js";
import { clientFromFlags, connectionOptions, connectionUsage, parseCommandArgs, UsageError } from "./connection.js";

export const tailUsage = `usage: sessionstate tail (--watcher KEY | --prefix PREFIX)... [--ack] [--json]

Prints stale notices as they come (pending ones first), reconnecting when the stream breaks.
--ack acknowledges each notice after printing it.

${connectionUsage}
`;

/** `sessionstate tail`: follows the notice stream until `signal` aborts (Ctrl-C). */
export async function tailCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  out: NodeJS.WritableStream,
  signal: AbortSignal,
): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, {
    ...connectionOptions,
    watcher: { type: "string", multiple: true },
    prefix: { type: "string", multiple: true },
    ack: { type: "boolean" },
    json: { type: "boolean" },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const watchers = values.watcher ?? [];
  const prefixes = values.prefix ?? [];
  if (watchers.length === 0 && prefixes.length === 0) throw new UsageError("give at least one --watcher or --prefix");
  const client = clientFromFlags(values, env);
  try {
    for await (const notice of client.subscribe({ watchers, prefixes, signal })) {
      if (values.json === true) out.write(`${toJsonString(StaleNoticeSchema, notice)}\n`);
      else out.write(`${notice.watcherSessionKey}${notice.wake ? " (wake)" : ""}${notice.queueOnly ? " (queue only)" : ""}: ${notice.text}\n`);
      if (values.ack === true) await client.ack(notice);
    }
    return 0;
  } finally {
    client.close();
  }
}
