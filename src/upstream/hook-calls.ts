/**
 * What a CLI's hook call says and what it leads to (SPEC §8.2): the call's JSON read as each CLI writes it
 * (unknown fields ignored), its links found by transcript path and then by session id, the scans started,
 * and the calls counted per CLI for GetServerInfo and the metrics. Transport-free: rpc/hook-endpoint
 * answers the HTTP request before `take` runs.
 */
import { performance } from "node:perf_hooks";
import type { Clock } from "../clock.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Store } from "../store/store.js";
import { StatusError } from "../errors.js";
import type { Principal } from "../domain/principal.js";
import type { HookScans } from "./hook-scans.js";
import { isInside, resolveTranscriptPath } from "./transcript-path.js";
import { resolve } from "node:path";

import { hookClis, promptEvents, type HookCli } from "../domain/hook-clis.js";

/** What a hook call may be: its outcome in the metrics and GetServerInfo. */
export type HookOutcome = "matched" | "unmatched" | "refused";

/** A hook call's fields that matter here; the rest (the prompt's text among them) is never kept. */
export interface HookCall {
  cli: HookCli;
  /** The CLI's session id (a link's thread id). */
  sessionId: string;
  /** The transcript the CLI writes, as it named it. */
  transcriptPath: string | undefined;
  /**
   * The prompt's id as the transcript row will carry it: Claude Code's `prompt_id` (the row's `promptId`),
   * Codex's `turn_id` (the `turn_id` of its rollout's UserMessage item).
   */
  promptId: string | undefined;
  /** False for an event other than the CLI's prompt event: answered, and nothing is scanned. */
  isPrompt: boolean;
}

/** Longest session id, prompt id and transcript path taken, in characters. */
const maxIdLength = 256;
const maxPathLength = 4096;

/** An optional string field, or the problem with it. */
function optionalString(body: Record<string, unknown>, field: string, maxLength: number): { value: string | undefined } | { problem: string } {
  const value = body[field];
  if (value === undefined || value === null || value === "") return { value: undefined };
  if (typeof value !== "string") return { problem: `${field} must be a string` };
  if (value.length > maxLength) return { problem: `${field} must be at most ${maxLength} characters` };
  return { value };
}

/** Reads a hook call's parsed JSON body, or says what is wrong with it (the answer is 400). */
export function hookCallFromJson(cli: HookCli, body: unknown): HookCall | { problem: string } {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return { problem: "the body must be a JSON object" };
  const fields = body as Record<string, unknown>;
  if (typeof fields.session_id !== "string" || fields.session_id.trim() === "") return { problem: "session_id must be a non-empty string" };
  if (fields.session_id.length > maxIdLength) return { problem: `session_id must be at most ${maxIdLength} characters` };
  const path = optionalString(fields, "transcript_path", maxPathLength);
  if ("problem" in path) return path;
  const promptId = optionalString(fields, cli === "codex" ? "turn_id" : "prompt_id", maxIdLength);
  if ("problem" in promptId) return promptId;
  const event = fields.hook_event_name;
  return {
    cli,
    sessionId: fields.session_id.trim(),
    transcriptPath: path.value,
    promptId: promptId.value,
    isPrompt: event === undefined || event === promptEvents[cli],
  };
}

/** One CLI's hook calls as this process heard them. */
export interface HookCounts {
  matched: number;
  unmatched: number;
  refused: number;
  /** When the last call came (any outcome); undefined before the first. */
  lastCallAtMs: number | undefined;
}

/** Most links one call scans (a transcript is one session's; a session id could be adopted a few times). */
const maxLinksPerCall = 16;

/**
 * Takes the hook calls: finds each call's links and asks HookScans to scan them, and counts every call by
 * CLI and outcome. A call that matches no link is treated exactly as one that does, up to its count.
 */
export class HookCalls {
  private readonly counts = new Map<HookCli, HookCounts>();

  constructor(
    private readonly deps: {
      store: Pick<Store, "hookLinks">;
      scans: Pick<HookScans, "scan">;
      clock: Clock;
      /** Real path of the transcript root; undefined when local adoption is off (then only session ids match). */
      transcriptRoot: string | undefined;
      log: Logger;
      metrics?: Metrics | undefined;
    },
  ) {}

  /** Counts a call refused before its JSON was read (a bad token, namespace, size or body). */
  refused(cli: HookCli, why: string): void {
    this.count(cli, "refused");
    this.deps.log.debug({ cli, why }, "hook call refused");
  }

  /**
   * Finds a well-formed call's links in `namespace` (of the agents `principal` may act for) and starts their scans. Called after the call was
   * answered; never throws (a failure is logged).
   */
  async take(call: HookCall, namespace: string, principal?: Principal): Promise<void> {
    const calledAt = performance.now();
    try {
      if (!call.isPrompt) {
        this.count(call.cli, "unmatched");
        return;
      }
      const path = await this.pathInsideRoot(call.transcriptPath);
      // A token scoped to some agents scans only their sessions' links.
      const links = (await this.deps.store.hookLinks(namespace, { path, threadId: call.sessionId }, maxLinksPerCall)).filter(
        (link) => principal === undefined || principal.admin || principal.agents.has(link.session.agentId),
      );
      this.count(call.cli, links.length > 0 ? "matched" : "unmatched");
      if (links.length === 0) {
        this.deps.log.debug({ cli: call.cli, namespace }, "hook call matched no adopted link");
        return;
      }
      this.deps.scans.scan(links, { promptId: call.promptId, calledAt });
    } catch (err) {
      this.deps.log.error({ err, cli: call.cli }, "hook call failed");
    }
  }

  /** The calls heard per CLI, every CLI listed. */
  snapshot(): Array<{ cli: HookCli } & HookCounts> {
    return hookClis.map((cli) => ({ cli, ...(this.counts.get(cli) ?? { matched: 0, unmatched: 0, refused: 0, lastCallAtMs: undefined }) }));
  }

  private count(cli: HookCli, outcome: HookOutcome): void {
    const counts = this.counts.get(cli) ?? { matched: 0, unmatched: 0, refused: 0, lastCallAtMs: undefined };
    counts[outcome]++;
    counts.lastCallAtMs = this.deps.clock.nowMs();
    this.counts.set(cli, counts);
    this.deps.metrics?.hookCalls.inc({ cli, outcome });
  }

  /**
   * The real path of a call's transcript when it is a regular file inside the root; undefined otherwise
   * (outside the root, through a symlink out of it, missing): then only the session id can match, and
   * nothing outside the root is ever read.
   */
  private async pathInsideRoot(given: string | undefined): Promise<string | undefined> {
    const root = this.deps.transcriptRoot;
    if (root === undefined || given === undefined) return undefined;
    // Outside the root by its very text: no look at the file system (and no error made: the common case
    // of a CLI whose transcripts this server does not read).
    if (!isInside(root, resolve(root, given))) return undefined;
    try {
      const target = await resolveTranscriptPath(root, given);
      return "declined" in target ? undefined : target.path;
    } catch (err) {
      if (err instanceof StatusError) {
        this.deps.log.debug({ why: err.message }, "hook call's transcript_path is not a file under the transcript root");
        return undefined;
      }
      throw err;
    }
  }
}
