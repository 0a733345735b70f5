// Prints the tree of src/ and the import graph between its folders, and fails (exit 1) on a cycle.
// `npm run deps`. A folder is a node (src/store/sqlite is one, src/store another); a file directly in
// src/ is a node of its own. Imports of generated code (gen/), of the client package's sources and of the
// packages that shape the layering (grpc-js, protobuf-es, the database drivers) are shown as nodes too.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
const src = join(root, "src");
const watchedPackages = ["@grpc/grpc-js", "@bufbuild/protobuf", "better-sqlite3", "pg", "@sessionstate/client"];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return sourceFiles(path);
      return name.endsWith(".ts") ? [path] : [];
    });
}

/** The node a file belongs to: its folder under src/, or the file itself when it lies directly in src/. */
function nodeOf(file: string): string {
  const rel = relative(src, file);
  if (!rel.startsWith("..")) return dirname(rel) === "." ? rel : dirname(rel).split(sep).join("/");
  const outside = relative(root, file).split(sep);
  if (outside[0] === "gen") return "gen/";
  if (outside[0] === "clients") return `clients/${outside[1]}`;
  return outside.join("/");
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"|import\("([^"]+)"\)/g)].map((m) => (m[1] ?? m[2])!);
}

const files = sourceFiles(src);
const edges = new Map<string, Set<string>>();
for (const file of files) {
  const from = nodeOf(file);
  const targets = edges.get(from) ?? new Set<string>();
  edges.set(from, targets);
  for (const spec of importsOf(file)) {
    let to: string | undefined;
    if (spec.startsWith(".")) to = nodeOf(resolve(dirname(file), spec.replace(/\.js$/, ".ts")));
    else to = watchedPackages.find((pkg) => spec === pkg || spec.startsWith(`${pkg}/`));
    if (to !== undefined && to !== from) targets.add(to);
  }
}

// The tree: each folder's files with their line counts, then its folders.
function printTree(dir: string, depth: number): void {
  const entries = readdirSync(dir).sort();
  const pad = "  ".repeat(depth);
  for (const name of entries.filter((n) => n.endsWith(".ts") && !statSync(join(dir, n)).isDirectory())) {
    const lines = readFileSync(join(dir, name), "utf8").split("\n").length - 1;
    console.log(`${pad}${name.padEnd(30 - pad.length)} ${String(lines).padStart(4)}`);
  }
  for (const name of entries.filter((n) => statSync(join(dir, n)).isDirectory())) {
    console.log(`${pad}${name}/`);
    printTree(join(dir, name), depth + 1);
  }
}
console.log("src/");
printTree(src, 1);

console.log("\nimports between nodes (a folder of src/, a file directly in src/, or a package):");
for (const [from, targets] of [...edges].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`  ${from.padEnd(16)} → ${[...targets].sort().join(", ") || "(nothing)"}`);
}

// Cycles: strongly connected components of more than one node (Tarjan).
const index = new Map<string, number>();
const low = new Map<string, number>();
const stack: string[] = [];
const onStack = new Set<string>();
const cycles: string[][] = [];
let counter = 0;
function visit(node: string): void {
  index.set(node, counter);
  low.set(node, counter++);
  stack.push(node);
  onStack.add(node);
  for (const next of edges.get(node) ?? []) {
    if (!index.has(next)) {
      visit(next);
      low.set(node, Math.min(low.get(node)!, low.get(next)!));
    } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
  }
  if (low.get(node) === index.get(node)) {
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) cycles.push(component.sort());
  }
}
for (const node of edges.keys()) if (!index.has(node)) visit(node);

if (cycles.length > 0) {
  for (const cycle of cycles) console.error(`cycle: ${cycle.join(" ⇄ ")}`);
  process.exit(1);
}
console.log("\nno cycles");
