import type { SignalLog } from "../../gen/sessionstate/v1/signal_log_pb.js";
import type { Clock } from "../clock.js";
import { normalizeKey } from "../model/session-key.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import type { Retention } from "../store/retention.js";
import type { Store } from "../store/store.js";
import type { SessionActivity } from "../upstream/session-activity.js";
import { appendInputFromRequest } from "./append-request.js";
import { eventToProto, sessionIdFromRef } from "./convert.js";

/** What the SignalLog service needs. */
export interface SignalLogDeps {
  store: Store;
  clock: Clock;
  retention: Retention;
  activity: SessionActivity;
}

/** The SignalLog service: append, session lifecycle and on-demand retention. */
export function signalLogHandlers({ store, clock, retention, activity }: SignalLogDeps): ServiceHandlers<(typeof SignalLog)["method"]> {
  return {
    append: async (request) => {
      const outcome = await store.append(appendInputFromRequest(request, clock.nowMs()));
      if (!outcome.recorded) return { recorded: false, stateVersion: BigInt(outcome.stateVersion) };
      return {
        recorded: true,
        deduplicated: outcome.deduplicated,
        event: eventToProto(outcome.event),
        stateVersion: BigInt(outcome.stateVersion),
      };
    },
    resetSession: async (request) => ({
      cursorsRemoved: await store.resetWatcher(normalizeKey("watcher_session_key", request.watcherSessionKey)),
    }),
    deleteSession: async (request) => {
      const session = sessionIdFromRef("session", request.session);
      const removed = await store.deleteSession(session);
      activity.forget(session);
      return removed;
    },
    prune: async () => retention.runNow(),
  };
}
