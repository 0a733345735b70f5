import type { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import type { WireMessage } from "../codec/wire-message.js";
import type { SessionId } from "../domain/session-key.js";

type Answer = WireMessage<typeof SessionStatusResponseSchema>;

interface Entry {
  stamp: number;
  answer: Answer;
}

/** A question looked up: its remembered answer, or how to remember the answer about to be read. */
export type Lookup = { answer: Answer } | { remember: (answer: Answer) => void };

/**
 * Encoded SessionStatus answers, by (session, changes_since, limit), each kept with the store's status
 * stamp of its session read before the answer was (Store.statusStamp). An answer is served again only
 * while the stamp is unchanged, so it is exactly what the store would answer now. Where other processes
 * write too (PostgreSQL replicas), the stamps are first brought up to date with every write committed
 * before the question (Store.statusStampsCurrent); a question with no answer held never waits for that.
 * Several watchers reconciling one target after a notice ask the same question; the first reads the
 * store, the others get its bytes. Bounded by the bytes of the answers held; the least recently used go first.
 */
export class StatusAnswerCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  /**
   * `maxBytes` 0 keeps nothing; `stampOf` is the store's Store.statusStamp: it must change on every write
   * that may change a session's answer; `stampsCurrent`, the store's Store.statusStampsCurrent.
   */
  constructor(
    private readonly maxBytes: number,
    private readonly stampOf: (session: SessionId) => number,
    private readonly stampsCurrent: () => Promise<void> | undefined = () => undefined,
  ) {}

  /**
   * Looks up SessionStatus(session, changesSince, limit). The stamp is read now, before the caller reads
   * the store, so a write in between only makes the answer remembered under it miss later.
   */
  async lookup(session: SessionId, changesSince: number | undefined, limit: number): Promise<Lookup> {
    const key = StatusAnswerCache.keyOf(session, changesSince, limit);
    let stamp = this.stampOf(session);
    if (this.entries.get(key)?.stamp === stamp) {
      // An answer is held for this stamp: it is served only if no write the stamps have not heard of yet changed it.
      const hearing = this.stampsCurrent();
      if (hearing !== undefined) {
        await hearing;
        stamp = this.stampOf(session);
      }
    }
    const answer = this.get(key, stamp);
    return answer !== undefined ? { answer } : { remember: (read) => this.put(key, stamp, read) };
  }

  /** The key of a question: lengths tell namespace, agent id and key apart without a separator. */
  static keyOf(session: SessionId, changesSince: number | undefined, limit: number): string {
    const { namespace, agentId, key } = session;
    return `${limit} ${changesSince ?? "-"} ${namespace.length} ${namespace}${agentId.length} ${agentId}${key}`;
  }

  /** The answer remembered for `key` if it was read under `stamp`. */
  private get(key: string, stamp: number): Answer | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.stamp !== stamp) {
      this.remove(key, entry);
      return undefined;
    }
    // Most recently used last: Map keeps insertion order.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.answer;
  }

  /** Remembers `answer`, read after `stamp` was. */
  private put(key: string, stamp: number, answer: Answer): void {
    const size = answer.bytes.byteLength + key.length;
    if (size > this.maxBytes / 8) return;
    const old = this.entries.get(key);
    if (old !== undefined) this.remove(key, old);
    this.entries.set(key, { stamp, answer });
    this.bytes += size;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.remove(oldest, entry);
    }
  }

  /** Answers held and their bytes. */
  get size(): { answers: number; bytes: number } {
    return { answers: this.entries.size, bytes: this.bytes };
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.answer.bytes.byteLength + key.length;
  }
}
