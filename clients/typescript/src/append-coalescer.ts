import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Metadata, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import {
  AppendRequestSchema,
  type AppendBatchResponse,
  type AppendResponse,
} from "./gen/sessionstate/v1/signal_log_pb.js";

type AppendInit = MessageInitShape<typeof AppendRequestSchema>;

/** Per-append options: the caller's own deadline and cancellation. */
export interface AppendOptions {
  /** Deadline in ms from now; the append rejects with DEADLINE_EXCEEDED when it passes. */
  timeoutMs?: number;
  /** Rejects the append with CANCELLED when aborted (an append already sent may still be recorded). */
  signal?: AbortSignal;
}

/** What one AppendBatch call carries and how long it may take. */
export interface BatchCall {
  appends: AppendInit[];
  /** The latest deadline among the batch's appends (ms since the epoch), or none. */
  deadlineMs: number | undefined;
  /** Aborts when every append of the batch has been abandoned by its caller. */
  signal: AbortSignal;
}

interface Waiting {
  request: AppendInit;
  /** How many times it was sent and answered UNAVAILABLE, and the last such answer. */
  failures: number;
  lastError?: ServiceError;
  /** Settled: answered, failed, timed out or cancelled. */
  done: boolean;
  /** The request's encoded size, in bytes. */
  size: number;
  deadlineMs: number | undefined;
  signal: AbortSignal | undefined;
  settle: (outcome: { response: AppendResponse } | { error: ServiceError }) => void;
}

/** Most appends one coalesced call carries (the server takes up to 1000). */
export const maxCoalescedAppends = 1000;
/** Largest coalesced request by default, in bytes: the server's default request limit (1 MiB). */
export const defaultMaxBatchBytes = 1024 * 1024;

/**
 * Resending an append after UNAVAILABLE (a replica died, a database was unreachable): how often and how
 * soon. Safe because every append carries a dedupe key (the client gives one to those without).
 */
export interface AppendRetry {
  /** Sends after the first one; 0 turns retrying off. */
  maxRetries: number;
  /** The first pause, doubled each time (full jitter), at most `maxDelayMs`. */
  initialDelayMs: number;
  maxDelayMs: number;
}

/** The default: up to 6 resends, about 2.5 s in all on average, and never past the append's deadline. */
export const defaultAppendRetry: AppendRetry = { maxRetries: 6, initialDelayMs: 100, maxDelayMs: 1000 };

/**
 * An error shaped like grpc-js's, for one failed entry of a batch. The server names the entry
 * (`appends[3]: summary: …`); the caller made one append, so its error reads as Append's would.
 */
function entryError(code: number, batchMessage: string): ServiceError {
  const message = batchMessage.replace(/^appends\[\d+\]: /, "");
  const name = GrpcStatus[code] ?? String(code);
  return Object.assign(new Error(`${code} ${name}: ${message}`), { code, details: message, metadata: new Metadata() });
}

function varintSize(value: number): number {
  let size = 1;
  for (let rest = value; rest >= 128; rest = Math.floor(rest / 128)) size++;
  return size;
}

/** The bytes one entry adds to an AppendBatchRequest: its tag, its length and its body. */
function entrySize(requestSize: number): number {
  return 1 + varintSize(requestSize) + requestSize;
}

/**
 * Coalesces appends made in the same turn of the event loop into AppendBatch calls: many concurrent
 * appends then cost one round trip and one commit. A batch holds at most 1000 appends and at most
 * `maxBatchBytes` of encoded request, so appends that would each pass the server's request limit never
 * fail together. Each caller still gets its own answer (its AppendResponse, or an error with its own
 * entry's status, or the whole call's when the call failed) and keeps its own deadline and signal. A lone
 * append goes out on the next turn, so coalescing adds no waiting. Appends answered UNAVAILABLE are sent
 * again (see `AppendRetry`) within their deadline; with several replicas the next call goes to another.
 */
export class AppendCoalescer {
  private waiting: Waiting[] = [];
  private waitingBytes = 0;

  constructor(
    private readonly sendBatch: (call: BatchCall) => Promise<AppendBatchResponse>,
    private readonly now: () => number,
    private readonly maxBatchBytes = defaultMaxBatchBytes,
    private readonly retry: AppendRetry = { maxRetries: 0, initialDelayMs: 0, maxDelayMs: 0 },
  ) {}

  append(request: AppendInit, options: AppendOptions = {}): Promise<AppendResponse> {
    return new Promise((resolve, reject) => {
      const { signal, timeoutMs } = options;
      if (signal?.aborted === true) return reject(entryError(GrpcStatus.CANCELLED, "the append was cancelled"));
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => waiting.settle({ error: entryError(GrpcStatus.CANCELLED, "the append was cancelled") });
      const waiting: Waiting = {
        request,
        failures: 0,
        done: false,
        size: toBinary(AppendRequestSchema, create(AppendRequestSchema, request)).byteLength,
        deadlineMs: timeoutMs === undefined ? undefined : this.now() + timeoutMs,
        signal,
        settle: (outcome) => {
          if (waiting.done) return;
          waiting.done = true;
          if (timer !== undefined) clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          if ("response" in outcome) resolve(outcome.response);
          else reject(outcome.error);
        },
      };
      if (timeoutMs !== undefined) {
        // Waiting to be sent again when the deadline comes: the answer that made it wait says more.
        timer = setTimeout(
          () => waiting.settle({ error: waiting.lastError ?? entryError(GrpcStatus.DEADLINE_EXCEEDED, "deadline exceeded") }),
          timeoutMs,
        );
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.enqueue(waiting);
    });
  }

  private enqueue(waiting: Waiting): void {
    if (this.waiting.length > 0 && this.waitingBytes + entrySize(waiting.size) > this.maxBatchBytes) this.flush();
    this.waiting.push(waiting);
    this.waitingBytes += entrySize(waiting.size);
    if (this.waiting.length === maxCoalescedAppends) this.flush();
    else if (this.waiting.length === 1) setImmediate(() => this.flush());
  }

  /** Settles an append with `error`, or sends it again later when the error is UNAVAILABLE and time allows. */
  private fail(waiting: Waiting, error: ServiceError): void {
    const delayMs = Math.random() * Math.min(this.retry.maxDelayMs, this.retry.initialDelayMs * 2 ** waiting.failures);
    const retryable =
      error.code === GrpcStatus.UNAVAILABLE &&
      waiting.failures < this.retry.maxRetries &&
      waiting.signal?.aborted !== true &&
      (waiting.deadlineMs === undefined || this.now() + delayMs < waiting.deadlineMs);
    if (!retryable) return waiting.settle({ error });
    waiting.failures++;
    waiting.lastError = error;
    setTimeout(() => {
      if (!waiting.done) this.enqueue(waiting);
    }, delayMs);
  }

  /** Sends what is waiting as one batch. */
  private flush(): void {
    const batch = this.waiting.filter((waiting) => !waiting.done && waiting.signal?.aborted !== true);
    this.waiting = [];
    this.waitingBytes = 0;
    if (batch.length === 0) return;
    const abandoned = new AbortController();
    const abandon = (): void => {
      if (batch.every((waiting) => waiting.signal?.aborted === true)) abandoned.abort();
    };
    for (const waiting of batch) waiting.signal?.addEventListener("abort", abandon, { once: true });
    const deadlines = batch.map((waiting) => waiting.deadlineMs);
    const deadlineMs = deadlines.includes(undefined) ? undefined : Math.max(...(deadlines as number[]));
    this.sendBatch({ appends: batch.map((waiting) => waiting.request), deadlineMs, signal: abandoned.signal })
      .then(
        (response) =>
          batch.forEach((waiting, i) => {
            const result = response.results[i]?.result;
            if (result?.case === "response") waiting.settle({ response: result.value });
            else if (result?.case === "failure") this.fail(waiting, entryError(result.value.code, result.value.message));
            else waiting.settle({ error: entryError(GrpcStatus.INTERNAL, `the server sent no result for entry ${i}`) });
          }),
        (err: ServiceError) => batch.forEach((waiting) => this.fail(waiting, err)),
      )
      .finally(() => {
        for (const waiting of batch) waiting.signal?.removeEventListener("abort", abandon);
      });
  }
}
