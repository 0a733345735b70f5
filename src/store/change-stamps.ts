import type { SessionId } from "../domain/session-key.js";

/** Number of stamp slots; sessions share a slot by hash, which costs a needless miss and nothing else. */
const slotCount = 4096;

/**
 * A stamp per session that changes whenever anything a SessionStatus answer reads of it may have changed:
 * its head (state version, prune watermark) or its events. A reader that remembers an answer with the stamp
 * it read before the answer can tell, from the stamp alone, whether the answer still holds. A backend keeps
 * them from every write it knows of: SQLite's process owns its file and sees them all; a PostgreSQL replica
 * learns of other replicas' writes through its feed, and checks it has heard of every write before using one.
 *
 * Fixed memory: sessions hash into `slotCount` slots, and a bump gives its slot a value larger than any
 * stamp given before, so every stamp read before the bump differs from every one read after it. A write
 * that touches sessions it cannot name (pruning) bumps all of them at once.
 */
export class ChangeStamps {
  private readonly slots = new Float64Array(slotCount);
  private latest = 0;
  private all = 0;

  /** The session's current stamp. */
  of(session: SessionId): number {
    return Math.max(this.slots[slotFromSession(session)]!, this.all);
  }

  /** Marks the session changed. Bumping inside a transaction that rolls back only costs a miss. */
  bump(session: SessionId): void {
    this.slots[slotFromSession(session)] = ++this.latest;
  }

  /** Marks every session changed. */
  bumpAll(): void {
    this.all = ++this.latest;
  }
}

/** FNV-1a over the UTF-16 units of namespace, agent id and key. */
function slotFromSession(session: SessionId): number {
  const { namespace, agentId, key } = session;
  let hash = 0x811c9dc5;
  for (let i = 0; i < namespace.length; i++) hash = Math.imul(hash ^ namespace.charCodeAt(i), 0x01000193);
  hash = Math.imul(hash ^ 0xffff, 0x01000193);
  for (let i = 0; i < agentId.length; i++) hash = Math.imul(hash ^ agentId.charCodeAt(i), 0x01000193);
  hash = Math.imul(hash ^ 0xffff, 0x01000193);
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % slotCount;
}
