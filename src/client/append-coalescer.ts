import type { MessageInitShape } from "@bufbuild/protobuf";
import { Metadata, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import type { AppendBatchResponse, AppendRequestSchema, AppendResponse } from "../../gen/sessionstate/v1/signal_log_pb.js";

type AppendInit = MessageInitShape<typeof AppendRequestSchema>;

interface Waiting {
  request: AppendInit;
  resolve: (response: AppendResponse) => void;
  reject: (error: ServiceError) => void;
}

/** Most appends one coalesced call carries (the server takes up to 1000). */
export const maxCoalescedAppends = 1000;

/** An error shaped like grpc-js's, for one failed entry of a batch. */
function entryError(code: number, message: string): ServiceError {
  const name = GrpcStatus[code] ?? String(code);
  return Object.assign(new Error(`${code} ${name}: ${message}`), { code, details: message, metadata: new Metadata() });
}

/**
 * Coalesces appends made in the same turn of the event loop into one AppendBatch call: many concurrent
 * appends then cost one round trip and one commit. Each caller still gets its own answer: its
 * AppendResponse, or an error with its own entry's status (or the whole call's, when the call failed).
 * A lone append goes out on the next turn, so coalescing adds no waiting.
 */
export class AppendCoalescer {
  private waiting: Waiting[] = [];

  constructor(private readonly sendBatch: (appends: AppendInit[]) => Promise<AppendBatchResponse>) {}

  append(request: AppendInit): Promise<AppendResponse> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      if (this.waiting.length === maxCoalescedAppends) this.flush();
      else if (this.waiting.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.waiting;
    if (batch.length === 0) return;
    this.waiting = [];
    this.sendBatch(batch.map((waiting) => waiting.request)).then(
      (response) =>
        batch.forEach((waiting, i) => {
          const result = response.results[i]?.result;
          if (result?.case === "response") waiting.resolve(result.value);
          else if (result?.case === "failure") waiting.reject(entryError(result.value.code, result.value.message));
          else waiting.reject(entryError(GrpcStatus.INTERNAL, `the server sent no result for entry ${i}`));
        }),
      (err: ServiceError) => batch.forEach((waiting) => waiting.reject(err)),
    );
  }
}
