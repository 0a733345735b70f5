import { isAgentQualified } from "../domain/session-key.js";
import { AppendResponseSchema, PruneResponseSchema } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { AckNoticesResponseSchema, UnwatchResponseSchema, WatchResponseSchema } from "../../gen/sessionstate/v1/watch_pb.js";
import { connectionUsage, parseCommandArgs, UsageError, withClient } from "./connection.js";
import { actorTypeFlag, counted, countFlag, enumText, eventKindFlag, jsonLine, provenanceFlag } from "./output.js";

export const appendUsage = `usage: sessionstate append <key> --kind KIND [--summary TEXT] [--agent A] [--actor TYPE] [--actor-id ID]
                           [--run-id ID] [--notify WATCHER]... [--only-if-watched] [--dedupe-key K] [--json]

Records one event in a session's log, as a gateway does. KIND is one of human-direct-message,
goal-changed, upstream-missing, child-spawned, run-completed, run-failed, compacted, adopted, created,
imported. --actor is human, agent or system (default system; a human-direct-message needs human). --notify names a watcher to tell
(a child's parent); --only-if-watched records nothing unless someone watches the session.

${connectionUsage}
`;

/** `sessionstate append`: one Append. */
export async function appendCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    {
      kind: { type: "string" },
      summary: { type: "string" },
      agent: { type: "string" },
      actor: { type: "string" },
      "actor-id": { type: "string" },
      "run-id": { type: "string" },
      notify: { type: "string", multiple: true },
      "only-if-watched": { type: "boolean" },
      "dedupe-key": { type: "string" },
      json: { type: "boolean" },
    },
    ["<key>"],
  );
  const kind = eventKindFlag("--kind", values.kind ?? "");
  const actorType = actorTypeFlag("--actor", values.actor ?? "system");
  return withClient(values, env, async (client) => {
    const response = await client.signalLog.append({
      session: { key: positionals[0]!, agentId: values.agent ?? "" },
      kind,
      actorType,
      actorId: values["actor-id"] ?? "",
      runId: values["run-id"] ?? "",
      summary: values.summary ?? "",
      notifySessionKeys: values.notify ?? [],
      onlyIfWatched: values["only-if-watched"] === true,
      dedupeKey: values["dedupe-key"] ?? "",
    });
    if (values.json === true) out.write(jsonLine(AppendResponseSchema, response));
    else if (!response.recorded) out.write(`not recorded: no one watches the session (--only-if-watched); state version ${response.stateVersion}\n`);
    else {
      const what = response.deduplicated ? "already recorded (same --dedupe-key)" : "recorded";
      out.write(`${what}: event ${response.event?.sequence} (${enumText(EventKind, kind)}), state version ${response.stateVersion}\n`);
      // SPEC §2: a bare key is logged and versioned, but nothing can watch it.
      const key = positionals[0]!.trim();
      if (!isAgentQualified(key)) out.write(`note: ${key} is a bare key: it is logged and versioned, but no watcher is ever told of it (watches are of agent:<agentId>:<rest> keys)\n`);
    }
    return 0;
  });
}

export const watchUsage = `usage: sessionstate watch <watcher> <target> [--agent A] [--ambient] [--extra-kind KIND]... [--json]

Makes <watcher> watch <target> (its agent: --agent, or the one in its key) from the target's current
version: the watcher gets one stale notice when the target next changes by another actor. Both keys
must be agent-qualified (agent:<id>:<rest>). --ambient watches as an ambient pair (queued, never wakes);
--extra-kind also notifies on run-completed, run-failed or compacted. Exit 1 when not watched.

${connectionUsage}
`;

/** `sessionstate watch`: one Watch; a refusal (a bare key, the session itself) is printed and exits 1. */
export async function watchCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { agent: { type: "string" }, ambient: { type: "boolean" }, "extra-kind": { type: "string", multiple: true }, json: { type: "boolean" } },
    ["<watcher>", "<target>"],
  );
  const [watcher, target] = positionals as [string, string];
  const provenance = provenanceFlag("--ambient", values.ambient === true ? "ambient" : "explicit");
  const extraMaterialKinds = (values["extra-kind"] ?? []).map((kind) => eventKindFlag("--extra-kind", kind));
  return withClient(values, env, async (client) => {
    const response = await client.watch.watch({ watcherSessionKey: watcher, target: { key: target, agentId: values.agent ?? "" }, provenance, extraMaterialKinds });
    if (values.json === true) out.write(jsonLine(WatchResponseSchema, response));
    else if (response.watched) {
      const cursor = response.cursor!;
      out.write(`${watcher} watches ${target} (agent ${cursor.target?.agentId}) from version ${cursor.ackedVersion}: L ${cursor.ackedVersion}  N ${cursor.notifiedVersion}  M ${cursor.materialVersion}\n`);
    } else out.write(`not watched: ${response.reason}\n`);
    return response.watched ? 0 : 1;
  });
}

export const unwatchUsage = `usage: sessionstate unwatch <watcher> <target> [--agent A] [--json]

Removes the watch of <watcher> on <target>, its pending notice included.

${connectionUsage}
`;

/** `sessionstate unwatch`: one Unwatch. */
export async function unwatchCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { agent: { type: "string" }, json: { type: "boolean" } }, ["<watcher>", "<target>"]);
  const [watcher, target] = positionals as [string, string];
  return withClient(values, env, async (client) => {
    const response = await client.watch.unwatch({ watcherSessionKey: watcher, target: { key: target, agentId: values.agent ?? "" } });
    if (values.json === true) out.write(jsonLine(UnwatchResponseSchema, response));
    else out.write(response.removed ? `removed the watch of ${watcher} on ${target}\n` : `${watcher} did not watch ${target}: nothing removed\n`);
    return 0;
  });
}

export const ackUsage = `usage: sessionstate ack <watcher> <target> --notified-version N [--reconciled-through V] [--agent A] [--json]

Acknowledges the stale notice of <watcher> on <target> that covers version N (its notified_version,
N in 'sessionstate pending'). --reconciled-through V: the watcher has already caught up to V, so
changes up to V open no further notice. A stale or repeated ack changes nothing (exit 1).

${connectionUsage}
`;

/** Why an ack of version N changed nothing, with what to ack instead (a stale or repeated ack changes nothing). */
function whyNotAcknowledged(watcher: string, target: string, notifiedVersion: bigint, cursor: { ackedVersion: bigint; notifiedVersion: bigint } | undefined): string {
  if (cursor === undefined) return `${watcher} does not watch ${target}`;
  if (cursor.notifiedVersion > cursor.ackedVersion) {
    return `the pending notice of ${watcher} on ${target} is version N = ${cursor.notifiedVersion}, not ${notifiedVersion}: --notified-version ${cursor.notifiedVersion} acknowledges it`;
  }
  return `nothing of ${target} is pending for ${watcher} (acknowledged through version ${cursor.ackedVersion}); a repeated ack changes nothing`;
}

/** `sessionstate ack`: one AckNotices entry. */
export async function ackCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { "notified-version": { type: "string" }, "reconciled-through": { type: "string" }, agent: { type: "string" }, json: { type: "boolean" } },
    ["<watcher>", "<target>"],
  );
  const [watcher, target] = positionals as [string, string];
  if (values["notified-version"] === undefined) throw new UsageError("give --notified-version: the version N of the notice, as 'sessionstate pending' shows it");
  const notifiedVersion = countFlag("--notified-version", values["notified-version"])!;
  const reconciledThrough = countFlag("--reconciled-through", values["reconciled-through"]);
  return withClient(values, env, async (client) => {
    const response = await client.watch.ackNotices({
      acks: [{ watcherSessionKey: watcher, target: { key: target, agentId: values.agent ?? "" }, notifiedVersion, ...(reconciledThrough === undefined ? {} : { reconciledThrough }) }],
    });
    const result = response.results[0]!;
    if (values.json === true) out.write(jsonLine(AckNoticesResponseSchema, response));
    else if (result.acknowledged) {
      const reopened = result.reopened ? `; later changes opened a new notice (version ${result.cursor?.notifiedVersion})` : "";
      out.write(`acknowledged: ${watcher} on ${target} is caught up to version ${result.cursor?.ackedVersion}${reopened}\n`);
    }
    else out.write(`not acknowledged: ${whyNotAcknowledged(watcher, target, notifiedVersion, result.cursor)}\n`);
    return result.acknowledged ? 0 : 1;
  });
}

export const pruneUsage = `usage: sessionstate prune [--json]

Runs retention now in the namespace (it also runs on its own): removes the events over the cap and the
expired watches, and says how many.

${connectionUsage}
`;

/** `sessionstate prune`: one Prune. */
export async function pruneCommand(args: readonly string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseCommandArgs(args, { json: { type: "boolean" } });
  return withClient(values, env, async (client) => {
    const response = await client.signalLog.prune({});
    if (values.json === true) out.write(jsonLine(PruneResponseSchema, response));
    else out.write(`removed ${counted(response.eventsRemoved, "event")} and ${counted(response.cursorsRemoved, "expired watch", "expired watches")}\n`);
    return 0;
  });
}
