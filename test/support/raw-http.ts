import { request } from "node:http";

/** One HTTP/1.1 request with exactly these headers (fetch would set Host itself). */
export function rawHttp(
  address: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; text: string; headers: Record<string, string | string[] | undefined> }> {
  const at = address.lastIndexOf(":");
  return new Promise((resolve, reject) => {
    const req = request(
      { host: address.slice(0, at), port: Number(address.slice(at + 1)), method: options.method ?? "GET", path: options.path, headers: options.headers ?? {}, agent: false },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

