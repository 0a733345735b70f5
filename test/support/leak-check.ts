// Loaded by every test command (`node --import tsx --import ./test/support/leak-check.ts --test ...`), so
// no helper registers a hook when imported. In each test file's process (the runner sets
// NODE_TEST_CONTEXT there; nowhere else, so a bench importing the helpers prints no empty test report):
// after the file's last test, every socket, listener and child process a test opened must be closed.
// Otherwise the file fails (and exits, rather than hanging on the open handle for ever).
import { after } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

/** Handles that mean a test left a network resource or a child process open. */
const leakedHandleKinds = new Set(["TCPSocketWrap", "TCPServerWrap", "TCPWRAP", "ProcessWrap", "Http2Session"]);

if (process.env.NODE_TEST_CONTEXT !== undefined) {
  after(async () => {
    const deadline = Date.now() + 2000;
    let leaked = process.getActiveResourcesInfo().filter((kind) => leakedHandleKinds.has(kind));
    while (leaked.length > 0 && Date.now() < deadline) {
      await sleep(20);
      leaked = process.getActiveResourcesInfo().filter((kind) => leakedHandleKinds.has(kind));
    }
    if (leaked.length === 0) return;
    setTimeout(() => process.exit(1), 500).unref();
    throw new Error(`the tests left open at teardown: ${leaked.join(", ")} (close every client, stream, server and child)`);
  });
}
