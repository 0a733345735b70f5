import { storeFaultFromError } from "./store-errors.js";

/** Learns when storage fills up and frees again, and of every write refused meanwhile. */
export interface StorageObserver {
  /** Called once per change: `true` when a write was first refused for lack of space, `false` when one commits again. */
  fullChanged(full: boolean): void;
  /** Called for every write refused for lack of space. */
  refused(): void;
}

/**
 * Follows full storage from the outcome of each write: a refusal for lack of space (SQLITE_FULL, or PostgreSQL's disk_full) is
 * counted, and the change between full and writable is reported once, not per write.
 */
export class StorageTracker {
  private full = false;

  constructor(private readonly observer: StorageObserver | undefined) {}

  /** Records one write's outcome: `undefined` when it committed, else its error. */
  observe(error: unknown): void {
    if (this.observer === undefined) return;
    if (storeFaultFromError(error) === "full") {
      this.observer.refused();
      if (!this.full) {
        this.full = true;
        this.observer.fullChanged(true);
      }
    } else if (error === undefined && this.full) {
      this.full = false;
      this.observer.fullChanged(false);
    }
  }
}
