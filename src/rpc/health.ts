import { EventEmitter, once } from "node:events";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
  type HealthCheckResponse,
} from "../../gen/grpc/health/v1/health_pb.js";
import { StatusError } from "../errors.js";
import type { ServiceHandlers } from "./service-adapter.js";

/**
 * The serving state reported by `grpc.health.v1.Health`, for the whole server ("") and each named
 * service alike. Written here rather than taken from grpc-health-check so that its Watch streams are
 * ordinary tracked streams that shutdown can end.
 */
export class HealthState {
  private serving = false;
  private readonly changes = new EventEmitter();

  constructor(private readonly serviceNames: readonly string[]) {
    this.changes.setMaxListeners(0);
  }

  /** Sets SERVING (true) or NOT_SERVING (false) for every service and tells watchers. */
  setServing(serving: boolean): void {
    if (this.serving === serving) return;
    this.serving = serving;
    this.changes.emit("change");
  }

  private statusOf(service: string): ServingStatus | undefined {
    if (service !== "" && !this.serviceNames.includes(service)) return undefined;
    return this.serving ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  }

  /** The Health service handlers. */
  handlers(): ServiceHandlers<(typeof Health)["method"]> {
    return {
      check: async (request) => {
        const status = this.statusOf(request.service);
        if (status === undefined) throw new StatusError("NOT_FOUND", `service: unknown service "${request.service}"`);
        return { status };
      },
      list: async () => {
        const statuses: Record<string, HealthCheckResponse> = {};
        for (const name of ["", ...this.serviceNames]) {
          statuses[name] = { status: this.statusOf(name) } as HealthCheckResponse;
        }
        return { statuses };
      },
      watch: (request, { signal }) => this.statuses(request.service, signal),
    };
  }

  /** The service's status now, then each time it changes, until `signal` aborts. */
  private async *statuses(service: string, signal: AbortSignal): AsyncGenerator<{ status: ServingStatus }> {
    while (!signal.aborted) {
      yield { status: this.statusOf(service) ?? ServingStatus.SERVICE_UNKNOWN };
      try {
        await once(this.changes, "change", { signal });
      } catch {
        return; // aborted: the stream is closing
      }
    }
  }
}
