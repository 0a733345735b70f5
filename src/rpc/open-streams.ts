/**
 * The server streams open now: counted per connection and in total against their limits, each with the way
 * to end it, so that shutdown and loss of the database can end them. Health watches (clients' load
 * balancers hold one per connection) are counted apart from notice streams, so that they never take a place
 * a subscriber needs.
 */
import { status as GrpcStatus } from "@grpc/grpc-js";
import type { Status } from "./call-admission.js";

/** The limits on open streams. */
export interface StreamLimits {
  /** Most server streams open at once on one connection. */
  maxStreamsPerConnection: number;
  /** Most server streams open at once in total. */
  maxStreams: number;
}

/** An open stream's place: give it back once, when the stream ends. */
export type ReleaseStream = () => void;

export class OpenStreams {
  /** Every open stream: how to end it, and whether its service is public (health). */
  private readonly closers = new Map<(status: Status) => void, boolean>();
  private readonly byPeer = new Map<string, number>();
  private openPublic = 0;

  constructor(private readonly limits: StreamLimits) {}

  /** Streams of the service's own methods (notices) open now; health watches are not counted. */
  get own(): number {
    return this.closers.size - this.openPublic;
  }

  /**
   * Takes a place for a stream from `peer`, which `close` ends early, or says which limit is reached
   * (RESOURCE_EXHAUSTED).
   */
  open(peer: string, isPublic: boolean, close: (status: Status) => void): ReleaseStream | { status: Status } {
    const peerKey = `${isPublic ? "public" : "own"} ${peer}`;
    const onPeer = this.byPeer.get(peerKey) ?? 0;
    if (onPeer >= this.limits.maxStreamsPerConnection) {
      return {
        status: {
          code: GrpcStatus.RESOURCE_EXHAUSTED,
          details: `too many open streams on this connection (limit ${this.limits.maxStreamsPerConnection})`,
        },
      };
    }
    if ((isPublic ? this.openPublic : this.own) >= this.limits.maxStreams) {
      return { status: { code: GrpcStatus.RESOURCE_EXHAUSTED, details: `too many open streams on this server (limit ${this.limits.maxStreams})` } };
    }
    this.byPeer.set(peerKey, onPeer + 1);
    this.closers.set(close, isPublic);
    if (isPublic) this.openPublic++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.closers.delete(close);
      if (isPublic) this.openPublic--;
      const left = (this.byPeer.get(peerKey) ?? 1) - 1;
      if (left === 0) this.byPeer.delete(peerKey);
      else this.byPeer.set(peerKey, left);
    };
  }

  /** Ends every open stream (or only those of non-public services) with `status`. */
  closeAll(status: Status, { publicToo }: { publicToo: boolean }): void {
    for (const [close, isPublic] of [...this.closers]) if (publicToo || !isPublic) close(status);
  }
}
