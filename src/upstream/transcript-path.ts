import { realpath, stat } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "node:path";
import { StatusError } from "../errors.js";

/** A transcript file inside the root, or the reason it cannot be linked. */
export type TranscriptTarget = { path: string; sizeBytes: number } | { declined: string };

/** True when `candidate` (an absolute path) is `root` or under it, lexically. */
export function isInside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/**
 * Resolves a transcript path (absolute, or relative to the root) to a regular file inside the transcript
 * root. Escapes, lexical (`..`) or through symlinks, are PERMISSION_DENIED and nothing is read; a missing
 * path or one that is not a regular file is declined. `rootRealPath` must already be a real path.
 * Messages never name paths outside the root.
 */
export async function resolveTranscriptPath(rootRealPath: string, given: string): Promise<TranscriptTarget> {
  const field = "local_transcript.path";
  if (given.trim() === "" || given.includes("\u0000")) {
    throw new StatusError("INVALID_ARGUMENT", `${field}: must be a non-empty path`);
  }
  const lexical = resolve(rootRealPath, given);
  if (!isInside(rootRealPath, lexical)) {
    throw new StatusError("PERMISSION_DENIED", `${field}: is outside the transcript root`);
  }
  let real: string;
  try {
    real = await realpath(lexical);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { declined: "the transcript file does not exist" };
    throw err;
  }
  if (!isInside(rootRealPath, real)) {
    throw new StatusError("PERMISSION_DENIED", `${field}: resolves (through a symlink) outside the transcript root`);
  }
  const info = await stat(real);
  if (!info.isFile()) return { declined: "the transcript path is not a regular file" };
  return { path: real, sizeBytes: info.size };
}
