/**
 * The baseline: a bare grpc-js server whose one unary method returns the request bytes unchanged. What
 * sessionstate is compared with, on the same machine and transport, in the same run.
 *
 *   node --import tsx bench/echo-server.ts    (prints "listening on 127.0.0.1:PORT")
 */
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from "@grpc/grpc-js";
import { rawUnaryMethod } from "./lib.js";

const server = new Server();
server.addService(
  { echo: rawUnaryMethod("/bench.Echo/Echo") },
  { echo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => callback(null, call.request) },
);
server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) throw err;
  process.stdout.write(`listening on 127.0.0.1:${port}\n`);
});
process.on("SIGTERM", () => server.tryShutdown(() => process.exit(0)));
