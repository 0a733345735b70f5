import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The real program, as users run it. */
export const binPath = fileURLToPath(new URL("../../bin/sessionstate.js", import.meta.url));

/** A TCP port on 127.0.0.1 that was free a moment ago (for a server that must keep its port across restarts). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

const execFileAsync = promisify(execFile);

/**
 * Runs a program to completion (10 minutes at most) and returns its output; on failure the error
 * carries it. Without NODE_TEST_CONTEXT: what runs is a program, not a test reporting to this runner.
 */
export async function runProgram(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> {
  const { NODE_TEST_CONTEXT: _runner, ...inherited } = process.env;
  try {
    return await execFileAsync(file, args, { cwd, env: { ...inherited, ...env }, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
  } catch (err) {
    const { stdout = "", stderr = "" } = err as { stdout?: string; stderr?: string };
    throw Object.assign(new Error(`${file} ${args.join(" ")} failed:\n${stdout}${stderr}`), { stdout, stderr });
  }
}

/** A spawned `sessionstate` process. */
export interface ServerProcess {
  child: ChildProcess;
  /** `host:port` from the `listening on` line. */
  address: string;
  /** Everything written to standard error so far. */
  stderr(): string;
  /** Resolves with the exit code (or the signal name) when the process ends. */
  exited: Promise<number | string>;
}

/** Runs `sessionstate <args>` to completion and returns its exit code and output. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}, cwd?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [binPath, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], ...(cwd === undefined ? {} : { cwd }) });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  // "close", not "exit": the process may be gone before its last output has been read from the pipes.
  const [code] = (await once(child, "close")) as [number | null];
  return { code, stdout, stderr };
}

/**
 * Starts `sessionstate serve <args>` and resolves once it prints its `listening on` line. Rejects (with
 * its standard error) if it exits first. The caller must kill the process. `bin` is this checkout's
 * launcher unless another (an installed package's) is given.
 */
export async function spawnServer(args: string[], env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = [], bin = binPath): Promise<ServerProcess> {
  // The HTTP port defaults to the gRPC port's next one, which a free port picked for gRPC does not make
  // free too (two picked ports may even be neighbours): unless a test names it, it takes a free port of its own.
  const http = args.includes("--http-listen") || env.SESSIONSTATE_HTTP_LISTEN !== undefined ? [] : ["--http-listen", "127.0.0.1:0"];
  const child = spawn(process.execPath, [...nodeArgs, bin, "serve", ...args, ...http], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => {
    child.once("exit", (code, signal) => resolve(code ?? signal ?? -1));
  });
  const address = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /^listening on (\S+)$/m.exec(stdout);
      if (match !== null) resolve(match[1]!);
    });
    void exited.then((code) => reject(new Error(`server exited (${code}) before listening: ${stderr}`)));
  });
  return { child, address, stderr: () => stderr, exited };
}
