import { open } from "node:fs/promises";

/** Where the lines of a transcript go. */
export interface LineSink {
  /** A complete line of at most `maxLineBytes` (without its newline). */
  line(bytes: Buffer): void;
  /** A line longer than `maxLineBytes` starts: its bytes follow through the returned sink, in order. */
  longLine(): LongLineSink;
}

/** The bytes of one line longer than the limit. */
export interface LongLineSink {
  write(piece: Buffer): Promise<void>;
  /** The line's newline was reached: it is complete. Not called for a line still being written. */
  end(): Promise<void>;
}

/** What one read of a transcript consumed. */
export interface TranscriptRead {
  /** Offset just past the last complete line consumed; the new marker. */
  endOffset: number;
  /** Set when a line longer than the limit starts at `endOffset` and has no newline yet. */
  longLineWaitingAt?: number;
}

const chunkBytes = 64 * 1024;

/**
 * Reads `path` from byte `fromOffset` to its current end, or to the end of its `maxLines`-th line, and
 * hands each complete line to the sink, in order. A line up to `maxLineBytes` arrives whole; a longer one
 * is streamed through `sink.longLine()` in pieces, so memory stays bounded by the chunk size whatever
 * the line's length. A trailing line without its newline is left for the next read (a long one is
 * streamed again then). The file is read in bounded chunks; short reads are handled. Throws the
 * file-system error (ENOENT, EACCES, ...) as is, and the abort reason when `signal` aborts (checked per chunk).
 */
export async function readCompleteLines(
  path: string,
  fromOffset: number,
  maxLineBytes: number,
  sink: LineSink,
  maxLines = Number.POSITIVE_INFINITY,
  signal?: AbortSignal,
): Promise<TranscriptRead> {
  const handle = await open(path, "r");
  try {
    const chunk = Buffer.allocUnsafe(chunkBytes);
    let partial: Buffer[] = []; // the line so far, while it is within the limit
    let lineBytes = 0; // bytes of the line so far
    let long: LongLineSink | undefined; // set while streaming a line past the limit
    let lineStart = fromOffset; // file offset of the first byte of the line being assembled
    let lines = 0;
    let position = fromOffset;

    /** Adds bytes of the current line (copied: the chunk buffer is reused), switching to streaming past the limit. */
    const addToLine = async (piece: Buffer): Promise<void> => {
      lineBytes += piece.length;
      if (long === undefined && lineBytes > maxLineBytes) {
        long = sink.longLine();
        for (const earlier of partial) await long.write(earlier);
        partial = [];
      }
      if (long !== undefined) await long.write(Buffer.from(piece));
      else partial.push(Buffer.from(piece));
    };

    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead } = await handle.read(chunk, 0, chunkBytes, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      let start = 0;
      for (;;) {
        const newline = chunk.indexOf(0x0a, start);
        if (newline === -1 || newline >= bytesRead) break;
        await addToLine(chunk.subarray(start, newline));
        if (long !== undefined) await long.end();
        else sink.line(partial.length === 1 ? partial[0]! : Buffer.concat(partial));
        lineStart += lineBytes + 1;
        partial = [];
        lineBytes = 0;
        long = undefined;
        start = newline + 1;
        if (++lines >= maxLines) return { endOffset: lineStart };
      }
      if (start < bytesRead) await addToLine(chunk.subarray(start, bytesRead));
    }
    return long === undefined ? { endOffset: lineStart } : { endOffset: lineStart, longLineWaitingAt: lineStart };
  } finally {
    await handle.close();
  }
}
