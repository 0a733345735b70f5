import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Client, credentials, type MethodDefinition } from "@grpc/grpc-js";

const passBytes = (bytes: Buffer): Buffer => bytes;

/** A unary method whose request and answer stay raw bytes: the baseline servers decode nothing. */
export function rawUnaryMethod(path: string): MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: passBytes,
    requestDeserialize: passBytes,
    responseSerialize: passBytes,
    responseDeserialize: passBytes,
  };
}

/** A process that prints `listening on HOST:PORT` once it serves. */
export interface Listening {
  child: ChildProcess;
  address: string;
  exited: Promise<unknown>;
  stop(): Promise<void>;
}

/** Spawns `node [nodeArgs] script args` and resolves at its `listening on` line. */
export async function spawnListening(script: string, args: string[], nodeArgs: string[] = []): Promise<Listening> {
  const child = spawn(process.execPath, [...nodeArgs, script, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const address = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening on (\S+)/.exec(stdout);
      if (match !== null) resolve(match[1]!);
    });
    void exited.then(() => reject(new Error(`${script} exited before listening: ${stderr}`)));
  });
  return {
    child,
    address,
    exited,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** User + system CPU seconds a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the command.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident memory of a process, in MB. */
export function rssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match === null ? Number.NaN : Number(match[1]) / 1024;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Saturated unary throughput: `inFlight` loops send pre-encoded `request` bytes to `path` for `durationMs`
 * (or until `done()` says so).
 * The same raw client serves every server measured, so only the server differs.
 */
export async function unaryRate(
  address: string,
  path: string,
  request: () => Buffer,
  inFlight: number,
  durationMs: number,
  done: () => boolean = () => false,
): Promise<number> {
  const client = new Client(address, credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
  const pass = (bytes: Buffer): Buffer => bytes;
  const call = (bytes: Buffer) =>
    new Promise<void>((resolve, reject) =>
      client.makeUnaryRequest(path, pass, pass, bytes, (err) => (err === null ? resolve() : reject(err))),
    );
  await call(request()); // connect before timing
  let calls = 0;
  const deadline = performance.now() + durationMs;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline && !done()) {
        await call(request());
        calls++;
      }
    }),
  );
  const rate = (calls / (performance.now() - started)) * 1000;
  client.close();
  return rate;
}
