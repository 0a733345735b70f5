/**
 * `POST /hooks/<cli>` on the HTTP port (API.md "Additions for hooks"): the JSON a CLI's hook gets, as the
 * CLI sends it. Admitted like any call (bearer token, namespace header), at most `maxBodyBytes`, then
 * answered `204` with no body before anything is looked up, so a CLI's prompt never waits on a scan; the
 * call is then handed to upstream/hook-calls. Refusals: 400 (not a JSON object with a string session_id),
 * 401 / 403 (token, namespace), 404 (an unknown CLI), 413 (too large); each a short plain text that names
 * nothing of the request, and the same whether a session is adopted or not.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { admitCaller, type Authenticate } from "./call-admission.js";
import { plain } from "./http-port.js";
import { hookCallFromJson, type HookCalls } from "../upstream/hook-calls.js";
import { isHookCli } from "../domain/hook-clis.js";

/** Largest hook body taken (API.md: 1 MiB). */
export const maxHookBodyBytes = 1024 * 1024;

/** The HTTP status of an admission refusal. */
function httpStatusOf(code: GrpcStatus): number {
  switch (code) {
    case GrpcStatus.UNAUTHENTICATED:
      return 401;
    case GrpcStatus.PERMISSION_DENIED:
      return 403;
    default:
      return 400;
  }
}

/** Reads a request body up to `limit` bytes: the bytes, or "too large" as soon as it passes the limit. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | "too large" | "aborted"> {
  return new Promise((resolve) => {
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > limit) return resolve("too large");
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners("data");
        resolve("too large");
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks, size)));
    req.on("error", () => resolve("aborted"));
    req.on("aborted", () => resolve("aborted"));
  });
}

/** The handler of `/hooks/<cli>` for the HTTP port. */
export function hookEndpoint(calls: HookCalls, authenticate: Authenticate | undefined): (cli: string, req: IncomingMessage, res: ServerResponse) => void {
  return (cli, req, res) => {
    if (!isHookCli(cli)) return plain(res, 404, "not found\n");
    const caller = admitCaller((name) => {
      const value = req.headers[name];
      return value === undefined ? [] : Array.isArray(value) ? value : [value];
    }, authenticate, "namespace");
    if ("status" in caller) {
      calls.refused(cli, caller.status.details);
      return plain(res, httpStatusOf(caller.status.code), `${caller.status.details}\n`);
    }
    void readBody(req, maxHookBodyBytes).then((body) => {
      if (body === "aborted") return;
      if (body === "too large") {
        calls.refused(cli, "body too large");
        return plain(res, 413, `a hook's body is at most ${maxHookBodyBytes} bytes\n`);
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString("utf8"));
      } catch {
        calls.refused(cli, "not JSON");
        return plain(res, 400, "the body must be a JSON object with a string session_id\n");
      }
      const call = hookCallFromJson(cli, parsed);
      if ("problem" in call) {
        calls.refused(cli, call.problem);
        return plain(res, 400, `${call.problem}\n`);
      }
      // Answered first: the CLI's prompt waits on this call, never on a scan.
      res.writeHead(204, { "cache-control": "no-store" });
      res.end();
      void calls.take(call, caller.namespace, caller.principal);
    });
  };
}
