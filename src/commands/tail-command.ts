import { StaleNoticeSchema } from "../../gen/sessionstate/v1/watch_pb.js";
import { connectionUsage, describeCallFailure, parseCommandArgs, serverAddress, UsageError, withClient } from "./connection.js";
import { counted, jsonLine } from "./output.js";

export const tailUsage = `usage: sessionstate tail (--watcher KEY | --prefix PREFIX)... [--group G [--max-in-flight N]] [--ack] [--json]

Prints stale notices as they come (pending ones first), reconnecting when the stream breaks; says on
standard error when it is connected, when the pending notices have all come (synced), and why it is
reconnecting. --ack acknowledges each notice after printing it. --group joins a consumer group: each
notice goes to one member of the group at a time (its claim and delivery count are printed), and one
not acknowledged goes to another member when this tail ends.

${connectionUsage}
`;

/** `sessionstate tail`: follows the notice stream until `signal` aborts (Ctrl-C). */
export async function tailCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
  signal: AbortSignal,
): Promise<number> {
  const { values } = parseCommandArgs(args, {
    watcher: { type: "string", multiple: true },
    prefix: { type: "string", multiple: true },
    ack: { type: "boolean" },
    json: { type: "boolean" },
    group: { type: "string" },
    "max-in-flight": { type: "string" },
  });
  const maxInFlight = values["max-in-flight"] === undefined ? undefined : Number(values["max-in-flight"]);
  if (maxInFlight !== undefined && (!Number.isInteger(maxInFlight) || maxInFlight < 1 || maxInFlight > 1000)) throw new UsageError("--max-in-flight: give a whole number from 1 to 1000");
  if (maxInFlight !== undefined && values.group === undefined) throw new UsageError("--max-in-flight: only with --group");
  const watchers = values.watcher ?? [];
  const prefixes = values.prefix ?? [];
  if (watchers.length === 0 && prefixes.length === 0) throw new UsageError("give at least one --watcher or --prefix");
  const address = serverAddress(values, env);
  // Each reason for reconnecting is said once until the stream is back, not at every attempt.
  let lastReason: string | undefined;
  return withClient(values, env, async (client) => {
    const notices = client.subscribe({
      watchers,
      prefixes,
      signal,
      ...(values.group === undefined ? {} : { group: values.group }),
      ...(maxInFlight === undefined ? {} : { maxInFlight }),
      onConnected: () => {
        lastReason = undefined;
        err.write(`connected to ${address}\n`);
      },
      onSynced: (pendingDelivered) => err.write(`synced: ${counted(pendingDelivered, "pending notice")} delivered; waiting for more\n`),
      onReconnect: (failure) => {
        const reason = describeCallFailure(failure, address);
        if (reason !== lastReason) err.write(`reconnecting: ${reason}\n`);
        lastReason = reason;
      },
    });
    for await (const notice of notices) {
      if (values.json === true) out.write(jsonLine(StaleNoticeSchema, notice));
      else {
        const claim = notice.claimId === "" ? "" : ` (claim ${notice.claimId}, delivery ${notice.deliveryCount})`;
        out.write(`${notice.watcherSessionKey}${notice.wake ? " (wake)" : ""}${notice.queueOnly ? " (queue only)" : ""}${claim}: ${notice.text}\n`);
      }
      if (values.ack === true) await client.ack(notice);
    }
    return 0;
  });
}
