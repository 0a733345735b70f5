import { createHash } from "node:crypto";
import type { SessionId } from "../domain/session-key.js";

/** How many of a session's own upstream texts are remembered for self-echo detection. */
export const ownTextsKept = 10;

function idOf(session: SessionId): string {
  return `${session.agentId}\u0000${session.key}`;
}

/** Trims and collapses whitespace runs: the form in which texts are compared. */
export function normalizeUserText(text: string): string {
  return text.trim().replace(/\s+/gu, " ");
}

function digest(text: string): string {
  return createHash("sha256").update(normalizeUserText(text), "utf8").digest("hex");
}

/**
 * What gateways report about sessions in real time: runs in progress (the monitor leaves those sessions
 * alone) and the texts the gateway itself sent upstream (so their echo is not a human turn). Kept in
 * memory; texts only as SHA-256 digests, never as text.
 */
export class SessionActivity {
  private readonly activeRuns = new Set<string>();
  private readonly starts = new Map<string, number>();
  private readonly ownTexts = new Map<string, string[]>();

  /** Marks a run as started (`true`) or ended on a session. */
  setRunActive(session: SessionId, active: boolean): void {
    const id = idOf(session);
    if (active) {
      this.activeRuns.add(id);
      this.starts.set(id, (this.starts.get(id) ?? 0) + 1);
    } else {
      this.activeRuns.delete(id);
    }
  }

  /** True while a run is active on the session. */
  isRunActive(session: SessionId): boolean {
    return this.activeRuns.has(idOf(session));
  }

  /** A number that changes whenever a run starts on the session: compare before and after a scan. */
  runStarts(session: SessionId): number {
    return this.starts.get(idOf(session)) ?? 0;
  }

  /** Remembers a text the gateway sent upstream; keeps the 10 most recent per session. */
  recordOwnText(session: SessionId, text: string): void {
    const id = idOf(session);
    const texts = this.ownTexts.get(id) ?? [];
    texts.push(digest(text));
    if (texts.length > ownTextsKept) texts.splice(0, texts.length - ownTextsKept);
    this.ownTexts.set(id, texts);
  }

  /** True when `text`, normalised, equals one of the session's recent own texts (exact, case-sensitive). */
  isOwnEcho(session: SessionId, text: string): boolean {
    const texts = this.ownTexts.get(idOf(session));
    return texts !== undefined && texts.includes(digest(text));
  }

  /** Forgets a session (after it is deleted). */
  forget(session: SessionId): void {
    const id = idOf(session);
    this.activeRuns.delete(id);
    this.starts.delete(id);
    this.ownTexts.delete(id);
  }
}
