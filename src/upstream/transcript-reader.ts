import { open } from "node:fs/promises";

/** What one read of a transcript consumed. */
export interface TranscriptRead {
  /** Offset just past the last complete line consumed; the new marker. */
  endOffset: number;
  /** Set when a line longer than the limit starts at `endOffset`: the marker is held there. */
  oversizedLineAt?: number;
}

const chunkBytes = 64 * 1024;

/**
 * Reads `path` from byte `fromOffset` to its current end and hands each complete line (without its
 * newline) to `onLine`, in order. A trailing partial line is left for the next read. A line longer than
 * `maxLineBytes` stops the read at its start, so no byte is ever skipped unclassified. Short reads are
 * handled; the file is read in bounded chunks. Throws the file-system error (ENOENT, EACCES, ...) as is.
 */
export async function readCompleteLines(
  path: string,
  fromOffset: number,
  maxLineBytes: number,
  onLine: (line: Buffer) => void,
): Promise<TranscriptRead> {
  const handle = await open(path, "r");
  try {
    const chunk = Buffer.allocUnsafe(chunkBytes);
    let partial: Buffer[] = [];
    let partialBytes = 0;
    let lineStart = fromOffset; // file offset of the first byte of the line being assembled
    let position = fromOffset;
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, chunkBytes, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      let start = 0;
      for (;;) {
        const newline = chunk.indexOf(0x0a, start);
        if (newline === -1 || newline >= bytesRead) break;
        const piece = chunk.subarray(start, newline);
        if (partialBytes + piece.length > maxLineBytes) return { endOffset: lineStart, oversizedLineAt: lineStart };
        onLine(partial.length === 0 ? Buffer.from(piece) : Buffer.concat([...partial, piece]));
        lineStart += partialBytes + piece.length + 1;
        partial = [];
        partialBytes = 0;
        start = newline + 1;
      }
      if (start < bytesRead) {
        const rest = chunk.subarray(start, bytesRead);
        if (partialBytes + rest.length > maxLineBytes) return { endOffset: lineStart, oversizedLineAt: lineStart };
        partial.push(Buffer.from(rest));
        partialBytes += rest.length;
      }
    }
    return { endOffset: lineStart };
  } finally {
    await handle.close();
  }
}
