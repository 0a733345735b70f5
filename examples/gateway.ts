/**
 * An example gateway, end to end: a manager session spawns a child, a person talks to the child, the
 * manager receives one stale notice, reconciles with SessionStatus, and acknowledges.
 *
 *   node --import tsx examples/gateway.ts 127.0.0.1:50051
 *
 * Set SESSIONSTATE_TOKEN when the server requires authentication.
 */
import { ActorType, EventKind, SessionStateClient } from "@sessionstate/client";

const address = process.argv[2] ?? "127.0.0.1:50051";
const manager = "agent:main:main";
const child = `agent:main:subagent:example-${process.pid}`;

const client = new SessionStateClient({ address, token: process.env.SESSIONSTATE_TOKEN });
const stop = new AbortController();
try {
  // 1. Spawning the child seeds the manager's cursor on it: everything so far is known.
  await client.signalLog.append({
    session: { key: child },
    kind: EventKind.CHILD_SPAWNED,
    actorType: ActorType.AGENT,
    actorId: manager,
    summary: "child spawned for the example",
    notifySessionKeys: [manager],
  });
  process.stdout.write(`spawned ${child}\n`);

  const notices = client.subscribe({ watchers: [manager], signal: stop.signal });
  const next = notices.next();

  // 2. A person sends a turn straight into the child. Best effort: this never throws.
  await client.appendBestEffort({
    session: { key: child },
    kind: EventKind.HUMAN_DIRECT_MESSAGE,
    actorType: ActorType.HUMAN,
    summary: "human message via example",
  });

  // 3. The manager's next turn consumes the notice ...
  const { value: notice } = await next;
  if (notice === undefined) throw new Error("the notice stream ended");
  process.stdout.write(`notice: ${notice.text}\n`);

  // 4. ... reconciles exactly what changed ...
  const status = await client.reconcile.sessionStatus({ session: notice.target, changesSince: notice.changesSince });
  for (const event of status.stateChanges?.events ?? []) {
    process.stdout.write(`changed: #${event.sequence} ${EventKind[event.kind]} "${event.summary}"\n`);
  }

  // 5. ... and acknowledges, saying how far it caught up.
  const ack = await client.ack(notice, { reconciledThrough: status.stateVersion });
  process.stdout.write(`acknowledged=${ack.acknowledged} reopened=${ack.reopened} version=${status.stateVersion}\n`);
} finally {
  stop.abort();
  client.close();
}
