/**
 * Runs jobs one at a time, in the order they were asked for. A failed job does not stop later ones; its
 * caller sees the failure.
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `job` after every job queued before it, and resolves or rejects with its result. */
  run<T>(job: () => Promise<T>): Promise<T> {
    const result = this.tail.then(job);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves when every job queued so far has settled. */
  async idle(): Promise<void> {
    await this.tail;
  }
}
