/**
 * Waits for `work` at most `ms`: resolves when it settles (fulfilled or rejected) or when the time is up,
 * whichever comes first. What `work` does after that, or how it fails, is left to it; the timer does not
 * keep the process alive. For stopping within a bound whatever a peer does.
 */
export async function settleWithin(ms: number, work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms));
    timer.unref();
  });
  const settled = work.then(
    () => undefined,
    () => undefined,
  );
  await Promise.race([settled, timeUp]);
  clearTimeout(timer);
}
