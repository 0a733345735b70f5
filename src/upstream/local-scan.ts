/**
 * Reading a local transcript link for the monitor (SPEC §8, §12.4): from its marker to the last complete
 * line, each line classified by its catalog's rules, the gateway's own echo set apart, within a deadline,
 * and abortable by a stop. What it read is a finding; committing it is the monitor's.
 */
import { stat } from "node:fs/promises";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { LinkRecord } from "../domain/records.js";
import type { ScanFinding } from "../domain/upstream-link.js";
import type { SessionActivity } from "./session-activity.js";
import type { SkimResult } from "./json-skim.js";
import { classifierForCatalog, classifyLine, classifySkimmed, knownCatalogIds, readFirstRow, skimmingSink } from "./transcript-catalogs.js";
import { type LongLineSink, readCompleteLines } from "./transcript-reader.js";
import type { NonHumanClass, RowClassifier, RowContext, RowVerdict } from "./transcript-rows.js";

/** The classes of transcript rows a scan counts. */
export type RowClass = "human" | NonHumanClass;

/** How long one link's scan may read before it is abandoned for the tick (SPEC §12.4). */
export const defaultScanTimeoutMs = 45_000;
/** The abort reason of a scan past its deadline (any other abort is a stop). */
const scanTimedOut = Symbol("scan timed out");

/** What reading a local link found, before anything is committed. */
export interface LocalRead {
  finding: ScanFinding;
  rows: Record<RowClass, number>;
  /** The marker waits at a line longer than the limit that has no newline yet. */
  held: boolean;
  /** The session's run count when the scan began: the commit checks that no run started since. */
  runStartsBefore: number;
  /** Prompts read: the rows a person or the gateway typed (human turns and the gateway's echo). */
  prompts: number;
  /** The CLI's prompt ids those rows name (Claude Code's `promptId`), for a hook's scan waiting for its row. */
  promptIds: string[];
}

/** What a scan of a local link came to: a read, or why there is none. */
export type LocalScan = LocalRead | "unclassifiable" | "timed_out" | "discarded";

/** Reading settings. */
export interface LocalScanSettings {
  maxLineBytes: number;
  syntheticPrefixes: readonly string[];
  /** How long one link's scan may read (default 45 s); past it the link waits for the next tick. */
  scanTimeoutMs?: number;
}

/** `work`, or a rejection with the signal's reason as soon as it aborts (what `work` does then is left to it). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/** Reads local transcript links; `stop()` aborts the reads in flight (their markers stay). */
export class LocalScanner {
  /** Links already reported as having no classifier (once per process, not once per tick). */
  private readonly warnedUnclassifiable = new Set<string>();
  /** Scans reading now: a stop aborts them. */
  private readonly inFlight = new Set<AbortController>();

  constructor(
    private readonly activity: SessionActivity,
    private readonly settings: LocalScanSettings,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /** Aborts the scans reading now. */
  stop(): void {
    for (const scan of this.inFlight) scan.abort();
  }

  /**
   * Reads a local link (its source must be a transcript) within the scan deadline: `timed_out` past it
   * (the marker stays for the next tick), `discarded` when a stop aborted it, `unclassifiable` when its
   * catalog has no classifier.
   */
  async scan(link: LinkRecord): Promise<LocalScan> {
    if (link.source.kind !== "transcript") throw new Error("only a transcript link is read locally");
    const classifier = this.classifierFor(link, link.source.path);
    if (classifier === undefined) return "unclassifiable";
    const timeoutMs = this.settings.scanTimeoutMs ?? defaultScanTimeoutMs;
    const abort = new AbortController();
    this.inFlight.add(abort);
    const timer = setTimeout(() => abort.abort(scanTimedOut), timeoutMs);
    timer.unref();
    try {
      return await abortable(this.read(link, link.source.path, classifier, abort.signal), abort.signal);
    } catch (err) {
      if (abort.signal.reason === scanTimedOut) {
        this.log.warn({ agentId: link.session.agentId, catalogId: link.catalogId, timeoutMs }, "upstream scan timed out: its marker stays for the next tick");
        return "timed_out";
      }
      if (abort.signal.aborted) return "discarded"; // stopping
      throw err;
    } finally {
      clearTimeout(timer);
      this.inFlight.delete(abort);
    }
  }

  /**
   * The classifier of a local link's catalog. A link adopted before adoption checked catalogs may have
   * none: it is never read with another catalog's rules (warned once per path).
   */
  private classifierFor(link: LinkRecord, path: string): RowClassifier | undefined {
    const classifier = classifierForCatalog(link.catalogId);
    if (classifier === undefined && !this.warnedUnclassifiable.has(path)) {
      this.warnedUnclassifiable.add(path);
      this.log.warn({ agentId: link.session.agentId, catalogId: link.catalogId, known: knownCatalogIds }, "no transcript classifier for this link's catalog: not scanned");
    }
    return classifier;
  }

  /** Reads a local link from its marker to the last complete line (stops when `signal` aborts). */
  private async read(link: LinkRecord, path: string, classifier: RowClassifier, signal: AbortSignal): Promise<LocalRead> {
    const runStartsBefore = (await this.activity.runState(link.session)).starts;
    const isOwnEcho = await this.activity.ownEchoTest(link.session);
    const offset = Number(link.marker);
    const rows: Record<RowClass, number> = { human: 0, injected: 0, tool: 0, other: 0 };
    let prompts = 0;
    const promptIds: string[] = [];
    let finding: ScanFinding;
    let held = false;
    try {
      const info = await stat(path);
      if (!info.isFile()) {
        finding = { kind: "inconclusive" };
      } else if (info.size <= offset) {
        finding = { kind: "read", marker: link.marker, humanTurns: 0, newestHumanAtMs: 0 };
      } else {
        let humanTurns = 0;
        let newestHumanAtMs = Number.NEGATIVE_INFINITY;
        const take = (verdict: RowVerdict): void => {
          if (!verdict.human) {
            rows[verdict.rowClass]++;
            return;
          }
          prompts++;
          if (verdict.promptId !== undefined) promptIds.push(verdict.promptId);
          // The gateway's own text coming back is something it injected, not a person acting. A text cut
          // while skimming is longer than any text a gateway records as its own.
          if (!verdict.textCut && isOwnEcho(verdict.text)) {
            rows.injected++;
            return;
          }
          rows.human++;
          humanTurns++;
          newestHumanAtMs = Math.max(newestHumanAtMs, verdict.timestampMs ?? info.mtimeMs);
        };
        const context: RowContext = { syntheticPrefixes: this.settings.syntheticPrefixes };
        if (classifier.readsFirstRow) context.firstRow = await readFirstRow(path, this.settings.maxLineBytes);
        const read = await readCompleteLines(
          path,
          offset,
          this.settings.maxLineBytes,
          {
            line: (bytes) => take(classifyLine(classifier, bytes, context)),
            longLine: () => this.skimLongLine(link, (skimmed) => take(classifySkimmed(classifier, skimmed, context))),
          },
          Number.POSITIVE_INFINITY,
          signal,
        );
        if (read.longLineWaitingAt !== undefined) held = true;
        finding = { kind: "read", marker: String(read.endOffset), humanTurns, newestHumanAtMs };
      }
    } catch (err) {
      if (signal.aborted) throw err;
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        finding = { kind: "gone" };
      } else {
        this.log.warn({ err, agentId: link.session.agentId }, "upstream check inconclusive");
        finding = { kind: "inconclusive" };
      }
    }
    return { finding, rows, held, runStartsBefore, prompts, promptIds };
  }

  /**
   * Streams a line longer than `--max-line-bytes` through the skimmer (bounded memory), then hands what
   * it gave to `done`. Counted and logged: such lines are rare and slow to read.
   */
  private skimLongLine(link: LinkRecord, done: (skimmed: SkimResult) => void): LongLineSink {
    let bytes = 0;
    const inner = skimmingSink((skimmed) => {
      this.metrics?.monitorLongLines.inc({ outcome: "value" in skimmed ? "classified" : skimmed.unreadable });
      this.log.info(
        { agentId: link.session.agentId, bytes, maxLineBytes: this.settings.maxLineBytes, ...("value" in skimmed ? {} : { unreadable: skimmed.unreadable }) },
        "transcript line longer than the limit: classified by streaming",
      );
      done(skimmed);
    });
    return {
      write: (piece) => {
        bytes += piece.length;
        return inner.write(piece);
      },
      end: () => inner.end(),
    };
  }
}
