/**
 * Per-call figures with h2load (Debian `nghttp2-client`) as the load generator: it sends raw gRPC
 * requests (an HTTP/2 POST with a length-prefixed protobuf body read from a file) for a fraction of the
 * CPU a Node client needs, so the server, not the client, is what saturates. h2load counts HTTP 200s only
 * and a gRPC error is also a 200, so every run is checked by the caller against the server's own record.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { cpuSeconds } from "./lib.js";

/** The shape of every h2load run: 4 connections, 16 streams each, 40,000 requests (plus a warm-up). */
export const h2loadShape = { requests: 40_000, connections: 4, streams: 16, warmupRequests: 4_000 } as const;

/** What one h2load run measured. */
export interface H2loadRun {
  requestsPerSec: number;
  /** Requests h2load saw answered with HTTP 2xx. */
  succeeded: number;
  /** The server process's CPU per 1,000 calls, in ms. */
  serverCpuMsPer1000: number;
}

/** Writes one gRPC frame (a 0 byte, the big-endian 4-byte length, the message) to `dir/name`; returns the path. */
export function grpcBodyFile(dir: string, name: string, message: Uint8Array): string {
  const frame = Buffer.alloc(5 + message.byteLength);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, 5);
  const path = join(dir, `${name}.grpc`);
  writeFileSync(path, frame);
  return path;
}

/** True when h2load is installed. */
export async function hasH2load(): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn("h2load", ["--version"], { stdio: "ignore" });
    child.once("error", () => resolve(false));
    child.once("exit", (code) => resolve(code === 0));
  });
}

/** How a request goes out: its headers, and over HTTP/1.1 (`--h1`: one request at a time per connection) or HTTP/2. */
export interface H2loadRequest {
  headers: readonly string[];
  http1: boolean;
}

/** A gRPC call (the body a gRPC frame: grpcBodyFile). */
export const grpcCall: H2loadRequest = { headers: ["content-type: application/grpc", "te: trailers"], http1: false };
/** A Connect unary call with a JSON body, over HTTP/1.1, as curl or a browser sends it. */
export const connectJsonCall: H2loadRequest = { headers: ["content-type: application/json"], http1: true };

function runH2load(url: string, bodyPath: string, requests: number, request: H2loadRequest): Promise<{ requestsPerSec: number; succeeded: number }> {
  const args = [
    "-n", String(requests),
    // The same calls in flight either way: HTTP/1.1 carries one at a time per connection.
    ...(request.http1
      ? ["--h1", "-c", String(h2loadShape.connections * h2loadShape.streams)]
      : ["-c", String(h2loadShape.connections), "-m", String(h2loadShape.streams)]),
    "-d", bodyPath,
    ...request.headers.flatMap((header) => ["-H", header]),
    url,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn("h2load", args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.once("error", (err) => reject(new Error(`cannot run h2load (apt-get install nghttp2-client): ${err.message}`)));
    child.once("exit", (code) => {
      const rate = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(out);
      const ok = /status codes: (\d+) 2xx/.exec(out);
      if (code !== 0 || rate === null || ok === null) return reject(new Error(`h2load failed (exit ${code}): ${out.slice(-500)}`));
      resolve({ requestsPerSec: Number(rate[1]), succeeded: Number(ok[1]) });
    });
  });
}

/**
 * Drives `url` (http://HOST:PORT/pkg.Service/Method) with the body in `bodyPath`: a warm-up run, then the
 * measured run, with the CPU of process `pid` (the server) taken around it.
 */
export async function h2loadRate(url: string, bodyPath: string, pid: number, request: H2loadRequest = grpcCall): Promise<H2loadRun> {
  await runH2load(url, bodyPath, h2loadShape.warmupRequests, request);
  const cpuBefore = cpuSeconds(pid);
  const run = await runH2load(url, bodyPath, h2loadShape.requests, request);
  const serverCpuMsPer1000 = ((cpuSeconds(pid) - cpuBefore) * 1000 * 1000) / h2loadShape.requests;
  return { ...run, serverCpuMsPer1000 };
}
