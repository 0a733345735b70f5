import type { Upstream } from "../../gen/sessionstate/v1/upstream_pb.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import { notYetImplemented } from "./unimplemented.js";

/** The Upstream service: adopted sessions and the upstream monitor. */
export function upstreamHandlers(): ServiceHandlers<(typeof Upstream)["method"]> {
  return {
    adopt: notYetImplemented,
    setRunActive: notYetImplemented,
    recordOwnUserText: notYetImplemented,
    reportRemoteItems: notYetImplemented,
    listUpstreamLinks: notYetImplemented,
    scanNow: notYetImplemented,
  };
}
