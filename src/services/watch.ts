import type { Watch } from "../../gen/sessionstate/v1/watch_pb.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import { notYetImplemented } from "./unimplemented.js";

/** The Watch service: cursors and stale notices. */
export function watchHandlers(): ServiceHandlers<(typeof Watch)["method"]> {
  return {
    watch: notYetImplemented,
    unwatch: notYetImplemented,
    listWatches: notYetImplemented,
    subscribeStaleNotices: notYetImplemented,
    ackNotices: notYetImplemented,
  };
}
