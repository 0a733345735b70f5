/**
 * `@sessionstate/client` as a user gets it: packed, installed into an empty project from the tarball,
 * used from plain JavaScript (ESM and CommonJS) against a real server, and type-checked from TypeScript
 * (where a wrong field must fail). Run by `npm run test:packages` (in .ci/run): it installs from the npm registry.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { runProgram, spawnServer, type ServerProcess } from "../support/process-helpers.js";
import { tempDir } from "../support/helpers.js";
import { emptyProject, npmInstall, pack, repoRoot } from "./package-helpers.js";

describe("the @sessionstate/client package", () => {
  const project = emptyProject();
  const packs = tempDir();
  const data = tempDir();
  let server: ServerProcess;

  before(async () => {
    const tarball = await pack(join(repoRoot, "clients/typescript"), packs.dir);
    await npmInstall(project.dir, [tarball]);
    server = await spawnServer(["--listen", "127.0.0.1:0", "--db", join(data.dir, "state.db")]);
  });
  after(async () => {
    server?.child.kill("SIGTERM");
    await server?.exited;
    project.remove();
    packs.remove();
    data.remove();
  });

  test("installs with grpc-js and protobuf-es (a ranged peer) only: no SQLite, pino or prom-client", () => {
    const installed = (name: string) => existsSync(join(project.dir, "node_modules", name));
    assert.ok(installed("@sessionstate/client"));
    assert.ok(installed("@grpc/grpc-js"));
    assert.ok(installed("@bufbuild/protobuf"));
    for (const name of ["better-sqlite3", "pino", "prom-client", "postgres", "tsx", "sessionstate"]) assert.equal(installed(name), false, name);
    const manifest = JSON.parse(readFileSync(join(project.dir, "node_modules/@sessionstate/client/package.json"), "utf8")) as {
      dependencies: object;
      peerDependencies: object;
    };
    assert.deepEqual(Object.keys(manifest.dependencies).sort(), ["@grpc/grpc-js"]);
    // protobuf-es is a peer, in a range, so a gateway that uses it too has one copy (npm installs it beside the client).
    assert.deepEqual(manifest.peerDependencies, { "@bufbuild/protobuf": "^2.13.0" });
  });

  test("a plain node ESM script appends, is notified, acks, and gets a refusal as a status it can compare", async () => {
    writeFileSync(
      join(project.dir, "gateway.mjs"),
      `import { ActorType, EventKind, SessionStateClient, StatusCode } from "@sessionstate/client";
const client = new SessionStateClient({ address: process.argv[2] });
const watcher = "agent:main:main";
const target = "agent:main:worker";
await client.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
const notices = client.subscribe({ watchers: [watcher] });
const appended = await client.append({ session: { key: target }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "goal set" });
const { value: notice } = await notices.next();
const ack = await client.ack(notice, { reconciledThrough: appended.stateVersion });
let refused;
try {
  await client.append({ session: { key: "" }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "x" });
} catch (err) {
  refused = { invalidArgument: err.code === StatusCode.INVALID_ARGUMENT, details: err.details };
}
await notices.return();
client.close();
console.log(JSON.stringify({ version: String(appended.stateVersion), target: notice.target.key, notified: String(notice.notifiedVersion), acknowledged: ack.acknowledged, refused }));
`,
    );
    const { stdout } = await runProgram(process.execPath, ["gateway.mjs", server.address], project.dir);
    const result = JSON.parse(stdout.trim()) as Record<string, unknown>;
    assert.deepEqual(result, {
      version: "1",
      target: "agent:main:worker",
      notified: "1",
      acknowledged: true,
      // Appends travel in AppendBatch calls, but a refusal reads as Append's would: the field, not the entry.
      refused: { invalidArgument: true, details: "session.key: must not be empty" },
    });
  });

  test("CommonJS: require() gets the same client, which appends and reads back", async () => {
    writeFileSync(
      join(project.dir, "gateway.cjs"),
      `const { ActorType, EventKind, SessionStateClient } = require("@sessionstate/client");
(async () => {
  const client = new SessionStateClient({ address: process.argv[2] });
  const appended = await client.append({ session: { key: "agent:main:cjs" }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "from require" });
  const status = await client.reconcile.sessionStatus({ session: { key: "agent:main:cjs" }, changesSince: 0n });
  client.close();
  console.log(JSON.stringify({ recorded: appended.recorded, summaries: status.stateChanges.events.map((e) => e.summary) }));
})();
`,
    );
    const { stdout } = await runProgram(process.execPath, ["gateway.cjs", server.address], project.dir);
    assert.deepEqual(JSON.parse(stdout.trim()), { recorded: true, summaries: ["from require"] });
  });

  test("TypeScript: a gateway type-checks with tsc --strict, and a wrong field fails to", async () => {
    await npmInstall(project.dir, ["typescript@5.9.3", "@types/node@20"]);
    writeFileSync(
      join(project.dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", noEmit: true, types: ["node"] } }),
    );
    mkdirSync(join(project.dir, "src"), { recursive: true });
    const gateway = (appendFields: string) => `import { ActorType, EventKind, SessionStateClient, StatusCode, type CallError, type StaleNotice } from "@sessionstate/client";
const client = new SessionStateClient({ address: "127.0.0.1:50051", token: "t", logger: { warn: () => {} } });
export async function turn(): Promise<bigint | undefined> {
  const response = await client.appendBestEffort({ session: { key: "agent:main:main" }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, ${appendFields} });
  return response?.stateVersion;
}
export async function consume(notice: StaleNotice): Promise<boolean> {
  try {
    return (await client.ack(notice, { reconciledThrough: 3n })).acknowledged;
  } catch (err) {
    return (err as CallError).code === StatusCode.UNAVAILABLE;
  }
}
`;
    writeFileSync(join(project.dir, "src/gateway.ts"), gateway('summary: "goal set"'));
    await runProgram(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "."], project.dir);
    writeFileSync(join(project.dir, "src/gateway.ts"), gateway('summry: "goal set"'));
    const failed = await runProgram(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "."], project.dir).then(
      () => assert.fail("a wrong field type-checked"),
      (err: { stdout: string }) => err.stdout,
    );
    assert.match(failed, /src\/gateway\.ts\(\d+,\d+\): error TS2561: Object literal may only specify known properties, but 'summry' does not exist/u);
  });
});
