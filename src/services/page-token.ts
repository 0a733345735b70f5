import { invalidArgument } from "../errors.js";
import type { SessionId } from "../model/session-key.js";

/** Default and largest page sizes of the List RPCs. */
export const defaultPageSize = 100;
export const maxPageSize = 1000;

/** An opaque token naming the last session of a page. */
export function encodePageToken(last: SessionId): string {
  return Buffer.from(JSON.stringify([last.agentId, last.key]), "utf8").toString("base64url");
}

/** The position a page token names, `undefined` for the empty token; INVALID_ARGUMENT when malformed. */
export function decodePageToken(field: string, token: string): SessionId | undefined {
  if (token === "") return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && typeof value[1] === "string") {
      return { agentId: value[0], key: value[1] };
    }
  } catch {
    // fall through to the refusal below
  }
  throw invalidArgument(field, "is not a token returned by this service");
}

/** The page size asked for: 0 means the default, above the maximum is clamped, negative is INVALID_ARGUMENT. */
export function pageSizeOf(field: string, requested: number): number {
  if (requested < 0) throw invalidArgument(field, "must not be negative");
  return requested === 0 ? defaultPageSize : Math.min(requested, maxPageSize);
}
