import { invalidArgument } from "../errors.js";

/** Default and largest page sizes of the List RPCs. */
export const defaultPageSize = 100;
export const maxPageSize = 1000;

/** An opaque token naming the sort key of a page's last row. */
export function encodePageToken(position: readonly string[]): string {
  return Buffer.from(JSON.stringify(position), "utf8").toString("base64url");
}

/**
 * The position (`arity` strings) a page token names, `undefined` for the empty token; INVALID_ARGUMENT
 * naming `field` when it is not a token this service made.
 */
export function decodePageToken(field: string, token: string, arity: number): string[] | undefined {
  if (token === "") return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === arity && value.every((part) => typeof part === "string")) {
      return value as string[];
    }
  } catch {
    // fall through to the refusal below
  }
  throw invalidArgument(field, "is not a token returned by this service");
}

/**
 * Cuts one page from `rows`, which the caller fetched with `limit + 1` so that an extra row says another
 * page exists; the token names the page's last row by `positionFromPair`.
 */
export function paginate<T>(rows: readonly T[], limit: number, positionFromPair: (row: T) => readonly string[]): { page: T[]; nextPageToken: string } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, nextPageToken: rows.length > limit && last !== undefined ? encodePageToken(positionFromPair(last)) : "" };
}

/** The page size asked for: 0 means the default, above the maximum is clamped, negative is INVALID_ARGUMENT. */
export function pageSizeFromRequest(field: string, requested: number): number {
  if (requested < 0) throw invalidArgument(field, "must not be negative");
  return requested === 0 ? defaultPageSize : Math.min(requested, maxPageSize);
}
