import {
  AppendBatchResponseSchema,
  AppendResponseSchema,
  AppendResultSchema,
  type AppendRequest,
  type SignalLog,
} from "../../gen/sessionstate/v1/signal_log_pb.js";
import type { Clock } from "../clock.js";
import { normalizeKey } from "../model/session-key.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import type { Retention } from "../store/retention.js";
import type { Store } from "../store/store.js";
import type { SessionActivity } from "../upstream/session-activity.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { CallContext } from "../rpc/service-adapter.js";
import { statusFromError } from "../rpc/status-from-error.js";
import { invalidArgument } from "../errors.js";
import { appendInputFromRequest } from "./append-request.js";
import { authorizeAgents, authorizeKeys, requireAdmin } from "./authorize.js";
import { composeMessage, WireMessage } from "../rpc/wire-message.js";
import { sessionIdFromRef } from "./convert.js";

/** What the SignalLog service needs. */
export interface SignalLogDeps {
  store: Store;
  clock: Clock;
  retention: Retention;
  activity: SessionActivity;
  metrics?: Metrics;
  log: Logger;
}

/** Most entries one AppendBatch call may hold. */
export const maxBatchAppends = 1000;

/** The SignalLog service: append, session lifecycle and on-demand retention. */
export function signalLogHandlers({ store, clock, retention, activity, metrics, log }: SignalLogDeps): ServiceHandlers<(typeof SignalLog)["method"]> {
  /** One append, answered as AppendResponse wire bytes. */
  const appendOne = async (request: AppendRequest, context: CallContext): Promise<Uint8Array> => {
    const input = appendInputFromRequest(request, clock.nowMs());
    authorizeAgents(context, [input.session.agentId]);
    authorizeKeys(context, input.notifyWatcherKeys);
    const outcome = await store.append(input);
    if (!outcome.recorded) {
      metrics?.appends.inc({ kind: input.kind, result: "not_watched" });
      return composeMessage(AppendResponseSchema, [{ fields: { recorded: false, stateVersion: BigInt(outcome.stateVersion) } }]);
    }
    metrics?.appends.inc({ kind: input.kind, result: outcome.deduplicated ? "deduplicated" : "recorded" });
    metrics?.noticesOpened.inc(outcome.noticesOpened);
    // The event goes out as the bytes stored with it (field 3, between the flags and the version).
    return composeMessage(AppendResponseSchema, [
      { fields: { recorded: true, deduplicated: outcome.deduplicated } },
      { field: 3, messages: [outcome.event.wire] },
      { fields: { stateVersion: BigInt(outcome.stateVersion) } },
    ]);
  };

  return {
    append: async (request, context) => new WireMessage(await appendOne(request, context)),
    appendBatch: async (request, context) => {
      if (request.appends.length > maxBatchAppends) {
        throw invalidArgument("appends", `at most ${maxBatchAppends} per call (got ${request.appends.length})`);
      }
      // Every entry is queued in this turn, so all of them share one group commit.
      const results = await Promise.all(
        request.appends.map((append, i) =>
          appendOne(append, context).then(
            (response) => composeMessage(AppendResultSchema, [{ field: 1, messages: [response] }]),
            (err: unknown) => {
              const status = statusFromError(err, log, context.method);
              return composeMessage(AppendResultSchema, [
                { fields: { result: { case: "failure", value: { code: status.code, message: `appends[${i}]: ${status.details}` } } } },
              ]);
            },
          ),
        ),
      );
      return new WireMessage(composeMessage(AppendBatchResponseSchema, [{ field: 1, messages: results }]));
    },
    resetSession: async (request, context) => {
      const watcherKey = normalizeKey("watcher_session_key", request.watcherSessionKey);
      authorizeKeys(context, [watcherKey]);
      return { cursorsRemoved: await store.resetWatcher(watcherKey) };
    },
    deleteSession: async (request, context) => {
      const session = sessionIdFromRef("session", request.session);
      authorizeAgents(context, [session.agentId]);
      const removed = await store.deleteSession(session);
      activity.forget(session);
      return removed;
    },
    prune: async (_request, context) => {
      requireAdmin(context, "Prune");
      return retention.runNow();
    },
  };
}
