import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** PEM files of a throwaway CA, a server certificate for 127.0.0.1/localhost, and a client certificate. */
export interface TestPki {
  caPem: Buffer;
  serverCertPem: Buffer;
  serverKeyPem: Buffer;
  clientCertPem: Buffer;
  clientKeyPem: Buffer;
  /** Paths of the same files, for the command line. */
  paths: Record<"ca" | "serverCert" | "serverKey" | "clientCert" | "clientKey", string>;
}

/**
 * Makes a fresh PKI in `dir` with Debian's openssl. Keys exist only for the test run. `serverNames` is the
 * server certificate's subjectAltName (default: IP 127.0.0.1 and DNS localhost).
 */
export function makeTestPki(dir: string, serverNames = "IP:127.0.0.1,DNS:localhost"): TestPki {
  const run = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  run("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=sessionstate test CA");
  writeFileSync(join(dir, "server.ext"), `subjectAltName=${serverNames}\n`);
  writeFileSync(join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n");
  for (const [name, subject] of [
    ["server", "/CN=localhost"],
    ["client", "/CN=gateway"],
  ] as const) {
    run("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject);
    run("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.crt`, "-days", "2", "-extfile", `${name}.ext`);
  }
  const paths = {
    ca: join(dir, "ca.crt"),
    serverCert: join(dir, "server.crt"),
    serverKey: join(dir, "server.key"),
    clientCert: join(dir, "client.crt"),
    clientKey: join(dir, "client.key"),
  };
  return {
    caPem: readFileSync(paths.ca),
    serverCertPem: readFileSync(paths.serverCert),
    serverKeyPem: readFileSync(paths.serverKey),
    clientCertPem: readFileSync(paths.clientCert),
    clientKeyPem: readFileSync(paths.clientKey),
    paths,
  };
}
