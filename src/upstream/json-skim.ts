import parser, { type Token } from "stream-json/core/parser.js";
import { none } from "stream-chain/defs.js";

/**
 * A string too long to keep whole while skimming a line: its first characters after any leading
 * whitespace (what prefix rules read) and its full length. Classifiers read texts through
 * `textFromValue` (transcript-rows.ts), which knows this shape.
 */
export class LongText {
  constructor(
    /** Up to `SkimLimits.headChars` characters, starting at the first one that is not whitespace. */
    readonly head: string,
    /** The length of the whole string, in UTF-16 code units. */
    readonly length: number,
  ) {}
}

/** How much of a line the skimmer keeps. Memory stays bounded by these, whatever the line's length. */
export interface SkimLimits {
  /** Strings up to this length (UTF-16 code units) are kept whole. */
  keepChars: number;
  /** Characters kept of a longer string (after its leading whitespace). */
  headChars: number;
  /** Characters kept whole across the line; past it, longer strings keep only their head. */
  lineChars: number;
  /** Values kept across the line (containers and scalars); past it, the line is too complex to skim. */
  maxValues: number;
  /** Containers nested deeper than this are passed over, not kept (no classifier reads that deep). */
  keepDepth: number;
}

/**
 * The default limits. A string up to 512 Ki characters stays whole, twice the longest text a gateway
 * may record as its own, so an echo of it is still recognised; at most 8 Mi characters, 100,000 values
 * and 8 levels are kept: a few tens of MiB at worst, for a line of any length.
 */
export const defaultSkimLimits: SkimLimits = {
  keepChars: 512 * 1024,
  headChars: 4096,
  lineChars: 8 * 1024 * 1024,
  maxValues: 100_000,
  keepDepth: 8,
};

/** What skimming a line gave: its value (long strings as `LongText`), or why it has none. */
export type SkimResult = { value: unknown } | { unreadable: "malformed" | "too-complex" };

/** A value inside a container deeper than `keepDepth`: passed over, never read. */
const passedOver: Readonly<Record<string, never>> = Object.freeze(Object.create(null) as Record<string, never>);

class TooComplex extends Error {}

/** Builds one string from its chunks, keeping it whole up to a limit and only its head past it. */
class StringBuilder {
  private parts: string[] = [];
  private kept = 0;
  private length = 0;
  private head: string | undefined; // set once the string is too long to keep whole
  private sawText = false; // a non-whitespace character has been seen (for the head)

  constructor(private readonly keepLimit: number, private readonly headChars: number) {}

  add(chunk: string): void {
    this.length += chunk.length;
    if (this.head === undefined) {
      if (this.kept + chunk.length <= this.keepLimit) {
        this.parts.push(chunk);
        this.kept += chunk.length;
        return;
      }
      const whole = this.parts.join("");
      this.parts = [];
      this.head = "";
      this.extendHead(whole);
    }
    this.extendHead(chunk);
  }

  private extendHead(text: string): void {
    if (this.head === undefined || this.head.length >= this.headChars) return;
    let piece = text;
    if (!this.sawText) {
      piece = piece.trimStart();
      if (piece === "") return;
      this.sawText = true;
    }
    this.head += piece.slice(0, this.headChars - this.head.length);
  }

  /** The string, or a `LongText` when it was too long to keep; and how many characters it kept whole. */
  finish(): { value: string | LongText; keptChars: number } {
    if (this.head === undefined) return { value: this.parts.join(""), keptChars: this.kept };
    return { value: new LongText(this.head, this.length), keptChars: 0 };
  }
}

interface Frame {
  /** The container being built, or undefined while passing over a container too deep to keep. */
  container: Record<string, unknown> | unknown[] | undefined;
  /** The key the next value goes under (objects); undefined passes the value over. */
  key?: string | undefined;
}

/**
 * Parses one JSON value from pieces of bytes, in order, with bounded memory: the value it returns is the
 * one `JSON.parse` would give, except that strings longer than the limits are `LongText`s, containers
 * deeper than `keepDepth` are empty stand-ins, and keys longer than 1,024 characters (no classifier's)
 * are dropped. Built on stream-json's tokenizer, which streams strings in chunks.
 */
export class JsonSkimmer {
  private readonly tokenize = parser({
    packKeys: false,
    streamKeys: true,
    packStrings: false,
    streamStrings: true,
    packNumbers: false,
    streamNumbers: true,
    jsonStreaming: false,
    maxDepth: 100_000,
  });
  private readonly stack: Frame[] = [];
  private root: { value: unknown } | undefined;
  private failure: "malformed" | "too-complex" | undefined;
  private values = 0;
  private keptChars = 0;
  private text: StringBuilder | undefined; // a key or string in progress
  private number: string | undefined; // a number in progress (its first 1,024 characters)

  constructor(private readonly limits: SkimLimits = defaultSkimLimits) {}

  /** Feeds the next bytes of the line. */
  async write(piece: Buffer): Promise<void> {
    if (this.failure !== undefined) return;
    await this.run(piece);
  }

  /** Ends the line and returns what it held. */
  async end(): Promise<SkimResult> {
    if (this.failure === undefined) await this.run(none);
    if (this.failure === undefined && this.root === undefined) this.failure = "malformed";
    if (this.failure !== undefined) return { unreadable: this.failure };
    return { value: this.root!.value };
  }

  private async run(input: Buffer | typeof none): Promise<void> {
    try {
      // The tokenizer takes strings or bytes (it mends UTF-8 split across pieces) and answers with an
      // async generator of tokens, whatever its declared type says.
      const tokens = this.tokenize(input as unknown as string) as unknown as AsyncIterable<Token>;
      for await (const token of tokens) this.take(token);
    } catch (err) {
      this.failure = err instanceof TooComplex ? "too-complex" : "malformed";
    }
  }

  private count(): void {
    this.values++;
    if (this.values > this.limits.maxValues) throw new TooComplex();
  }

  private get top(): Frame | undefined {
    return this.stack[this.stack.length - 1];
  }

  /** True while inside a container that is not kept. */
  private get passingOver(): boolean {
    const top = this.top;
    return top !== undefined && top.container === undefined;
  }

  private place(value: unknown): void {
    const top = this.top;
    if (top === undefined) {
      this.root = { value };
      return;
    }
    const { container } = top;
    if (container === undefined) return;
    if (Array.isArray(container)) {
      container.push(value);
    } else if (top.key !== undefined) {
      container[top.key] = value;
      top.key = undefined;
    }
  }

  private open(container: Record<string, unknown> | unknown[]): void {
    if (this.passingOver || this.stack.length >= this.limits.keepDepth) {
      this.place(passedOver);
      this.stack.push({ container: undefined });
      return;
    }
    this.count();
    this.place(container);
    this.stack.push({ container });
  }

  private take(token: Token): void {
    switch (token.name) {
      case "startObject":
        this.open(Object.create(null) as Record<string, unknown>);
        return;
      case "startArray":
        this.open([]);
        return;
      case "endObject":
      case "endArray":
        this.stack.pop();
        return;
      case "startKey":
        this.text = new StringBuilder(1024, 0);
        return;
      case "endKey": {
        const key = this.text!.finish().value;
        this.text = undefined;
        const top = this.top!;
        top.key = typeof key === "string" ? key : undefined;
        return;
      }
      case "startString": {
        const budgetLeft = Math.max(0, this.limits.lineChars - this.keptChars);
        this.text = new StringBuilder(Math.min(this.limits.keepChars, budgetLeft), this.limits.headChars);
        return;
      }
      case "stringChunk":
        this.text!.add(token.value);
        return;
      case "endString": {
        const { value, keptChars } = this.text!.finish();
        this.text = undefined;
        this.keptChars += keptChars;
        this.scalar(value);
        return;
      }
      case "startNumber":
        this.number = "";
        return;
      case "numberChunk":
        if (this.number!.length < 1024) this.number += token.value.slice(0, 1024 - this.number!.length);
        return;
      case "endNumber":
        this.scalar(Number(this.number));
        this.number = undefined;
        return;
      case "nullValue":
      case "trueValue":
      case "falseValue":
        this.scalar(token.value);
        return;
      case "keyValue":
      case "stringValue":
      case "numberValue":
      case "whitespace":
        // Not produced with the options above (values are streamed, not packed).
        throw new Error(`unexpected token ${token.name}`);
      default: {
        const never: never = token;
        throw new Error(`unknown token ${String(never)}`);
      }
    }
  }

  private scalar(value: unknown): void {
    if (this.passingOver) return;
    this.count();
    this.place(value);
  }
}
