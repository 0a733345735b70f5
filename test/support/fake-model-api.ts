/**
 * A stand-in for Anthropic's Messages API on loopback, for running the real Claude Code here with no
 * network (docs/development.md, "The real CLIs"): every `POST /v1/messages` gets one streamed reply, "ok",
 * so turns complete and the CLI writes its transcript as it would.
 */
import { createServer, type Server } from "node:http";

/** Starts the stand-in on 127.0.0.1 (a free port); resolves with its base URL and a close function. */
export async function startFakeModelApi(): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.method !== "POST" || !(req.url ?? "").startsWith("/v1/messages")) {
        res.writeHead(404, { "content-type": "application/json" }).end("{}");
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const event = (type: string, data: Record<string, unknown>): boolean => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      event("message_start", { message: { id: "msg_local", type: "message", role: "assistant", model: "stand-in", content: [], stop_reason: null, usage: { input_tokens: 1, output_tokens: 1 } } });
      event("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
      event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "ok" } });
      event("content_block_stop", { index: 0 });
      event("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } });
      event("message_stop", {});
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
