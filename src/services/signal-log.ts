import type { AppendRequest, SignalLog } from "../../gen/sessionstate/v1/signal_log_pb.js";
import type { Clock } from "../clock.js";
import { normalizeKey } from "../domain/session-key.js";
import type { ServiceHandlers, CallContext } from "../rpc/service-adapter.js";
import type { Retention } from "../jobs/retention.js";
import type { Store } from "../store/store.js";
import type { AppendOutcome } from "../domain/records.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { ActivityByMinute } from "../activity-by-minute.js";
import { refusalFromError } from "../refusals.js";
import { invalidArgument } from "../errors.js";
import { appendInputFromRequest } from "./append-request.js";
import { authorizeAgents, authorizeKeys, requireAdmin } from "./authorize.js";
import { appendBatchResponse, appendResponse } from "../codec/response-codec.js";
import { sessionIdFromRef } from "./convert.js";

/** What the SignalLog service needs. */
export interface SignalLogDeps {
  store: Store;
  clock: Clock;
  retention: Retention;
  metrics?: Metrics;
  log: Logger;
  /** Counts recorded events and the notices they open (GetServerInfo). */
  activityByMinute?: ActivityByMinute;
}

/** Most entries one AppendBatch call may hold. */
export const maxBatchAppends = 1000;

/** The SignalLog service: append, session lifecycle and on-demand retention. */
export function signalLogHandlers({ store, clock, retention, metrics, log, activityByMinute }: SignalLogDeps): ServiceHandlers<(typeof SignalLog)["method"]> {
  /** One append, validated, authorised and stored. */
  const appendOne = async (request: AppendRequest, context: CallContext): Promise<AppendOutcome> => {
    const input = appendInputFromRequest(request, clock.nowMs(), context.namespace);
    authorizeAgents(context, [input.session.agentId]);
    authorizeKeys(context, input.notifyWatcherKeys);
    const outcome = await store.append(input);
    if (!outcome.recorded) {
      metrics?.countAppend(input.kind, "not_watched");
    } else {
      metrics?.countAppend(input.kind, outcome.deduplicated ? "deduplicated" : "recorded");
      if (outcome.noticesOpened > 0) metrics?.noticesOpened.inc(outcome.noticesOpened);
      if (!outcome.deduplicated) {
        activityByMinute?.count(context.namespace, "appends");
        activityByMinute?.count(context.namespace, "noticesOpened", outcome.noticesOpened);
      }
    }
    return outcome;
  };

  return {
    append: async (request, context) => appendResponse(await appendOne(request, context)),
    appendBatch: async (request, context) => {
      if (request.appends.length > maxBatchAppends) {
        throw invalidArgument("appends", `at most ${maxBatchAppends} per call (got ${request.appends.length})`);
      }
      // Every entry is queued in this turn, so all of them share one group commit.
      const results = await Promise.all(
        request.appends.map((append, i) =>
          appendOne(append, context).catch((err: unknown) => {
            const refusal = refusalFromError(err);
            if (refusal.log !== undefined) log[refusal.log.level]({ err, method: context.method }, refusal.log.what);
            return { code: refusal.code, message: `appends[${i}]: ${refusal.message}` };
          }),
        ),
      );
      return appendBatchResponse(results);
    },
    resetSession: async (request, context) => {
      const watcherKey = normalizeKey("watcher_session_key", request.watcherSessionKey);
      authorizeKeys(context, [watcherKey]);
      return { cursorsRemoved: await store.resetWatcher(context.namespace, watcherKey, clock.nowMs()) };
    },
    deleteSession: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      const removed = await store.deleteSession(session);
      return removed;
    },
    prune: async (_request, context) => {
      requireAdmin(context, "Prune");
      return retention.runNow();
    },
  };
}
