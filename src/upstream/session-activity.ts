import { createHash } from "node:crypto";
import type { Clock } from "../clock.js";
import { isRunActive, ownTextsKept, type RunFlag } from "../domain/run-flags.js";
import type { SessionId } from "../domain/session-key.js";
import type { Store } from "../store/store.js";

/** Trims and collapses whitespace runs: the form in which texts are compared. */
export function normalizeUserText(text: string): string {
  return text.trim().replace(/\s+/gu, " ");
}

function digest(text: string): string {
  return createHash("sha256").update(normalizeUserText(text), "utf8").digest("hex");
}

/** A session's run as the monitor sees it at one moment. */
export interface RunState {
  /** A reported run is in progress (and its flag was refreshed within 6 hours): leave the session alone. */
  active: boolean;
  /** Changes whenever a run starts on the session: compare before and after a scan. */
  starts: number;
}

/**
 * What gateways report about sessions in real time: runs in progress (the monitor leaves those sessions
 * alone) and the texts the gateway itself sent upstream (so their echo is not a human turn). Kept in the
 * store, so every replica sees what any replica was told; texts only as SHA-256 digests, never as text.
 */
export class SessionActivity {
  constructor(
    private readonly store: Pick<Store, "setRunActive" | "runFlag" | "recordOwnText" | "ownTextDigests">,
    private readonly clock: Clock,
  ) {}

  /** Records that a run started (`true`) or ended on a session. */
  setRunActive(session: SessionId, active: boolean): Promise<void> {
    return this.store.setRunActive(session, active, this.clock.nowMs());
  }

  /** The session's run state now. */
  async runState(session: SessionId): Promise<RunState> {
    const flag: RunFlag | undefined = await this.store.runFlag(session);
    return { active: isRunActive(flag, this.clock.nowMs()), starts: flag?.starts ?? 0 };
  }

  /** Remembers a text the gateway sent upstream; the 10 most recent per session are kept. */
  recordOwnText(session: SessionId, text: string): Promise<void> {
    return this.store.recordOwnText(session, digest(text), ownTextsKept);
  }

  /**
   * A test of whether a text, normalised, equals one of the session's recent own texts (exact,
   * case-sensitive), over the digests remembered now: read once per scan.
   */
  async ownEchoTest(session: SessionId): Promise<(text: string) => boolean> {
    const digests = new Set(await this.store.ownTextDigests(session));
    return (text) => digests.size > 0 && digests.has(digest(text));
  }
}
