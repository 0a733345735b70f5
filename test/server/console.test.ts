/**
 * The console (SPEC §13.2, issue 36) in a real browser: Debian's chromium driven by playwright-core,
 * against a real server with tokens, its data written through gRPC. It lists what was appended, shows a
 * pair's L, N, M and notice text exactly as ListWatches has them, shows a notice live as an append opens it
 * and marks it acknowledged after the ack, lets a token scoped to one namespace see nothing of another,
 * and answers a bad token with a plain message. Each view is saved as a screenshot (SESSIONSTATE_SCREENSHOTS,
 * default a temporary folder, printed). The page loads nothing from elsewhere and breaks none of its
 * content security policy (every console error fails the test).
 */
import assert from "node:assert/strict";
import { appendFileSync, existsSync, mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { createServer } from "node:http";
import { chromium, type Browser, type Page } from "playwright-core";
import { hashToken } from "../../src/rpc/tokens.js";
import { connect, goal, human, startTestServer, tempDir, type Clients, type TestServer } from "../support/helpers.js";

/** The browser: Debian's package (apt install chromium), or SESSIONSTATE_CHROMIUM. */
const chromiumPath = process.env.SESSIONSTATE_CHROMIUM ?? "/usr/bin/chromium";
const browserRequired = process.env.SESSIONSTATE_REQUIRE_BROWSER === "1";
const noBrowser = `no browser at ${chromiumPath} (apt install chromium): the console's browser tests are skipped`;
function skipWithoutBrowser(): false | string {
  if (existsSync(chromiumPath)) return false;
  if (browserRequired) throw new Error(`${noBrowser}, but SESSIONSTATE_REQUIRE_BROWSER=1 requires it`);
  console.log(noBrowser);
  return noBrowser;
}

const secrets = { admin: "console-admin-secret", teamA: "console-team-a-secret" };
const W = "agent:main:main";
const worker = (i: number): string => `agent:main:subagent:worker-${i}`;

describe("the console in a browser", { skip: skipWithoutBrowser() }, () => {
  const dir = tempDir();
  const shots = process.env.SESSIONSTATE_SCREENSHOTS ?? join(tmpdir(), "sessionstate-console-screenshots");
  let t: TestServer;
  let base: string;
  let admin: Clients;
  let teamA: Clients;
  let browser: Browser;
  const consoleErrors: string[] = [];

  /** A page with a fresh tab (its own sessionStorage) that records every console error and failed request. */
  async function newPage(): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
    page.on("pageerror", (error) => consoleErrors.push(error.message));
    page.on("request", (request) => {
      if (!request.url().startsWith(base)) consoleErrors.push(`request to elsewhere: ${request.url()}`);
    });
    return page;
  }

  /** Opens the console in a new tab and enters `token` in its form. */
  async function signIn(token: string, hash = "#/"): Promise<Page> {
    const page = await newPage();
    await page.goto(`${base}/${hash}`);
    await page.getByLabel("Token").fill(token);
    await page.getByRole("button", { name: "Use this token" }).click();
    return page;
  }

  /** The height of each mark on the session's time axis (its circle's cy), in sequence order. */
  const markHeights = async (page: Page): Promise<string[]> =>
    Promise.all((await page.locator("svg.timeline circle").all()).map(async (mark) => (await mark.getAttribute("cy")) ?? ""));

  const shoot = (page: Page, name: string): Promise<Buffer> => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

  before(async () => {
    mkdirSync(shots, { recursive: true });
    const tokensFile = join(dir.dir, "tokens.json");
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { name: "operator", sha256: hashToken(secrets.admin), admin: true },
          { name: "gateway-a", sha256: hashToken(secrets.teamA), agents: ["main"], namespaces: ["team-a"] },
        ],
      }),
    );
    const root = join(dir.dir, "transcripts");
    mkdirSync(root);
    const transcript = join(realpathSync(root), "adopted.jsonl");
    writeFileSync(transcript, `${JSON.stringify({ type: "user", message: { role: "user", content: "first prompt" }, timestamp: "2026-12-01T11:00:00Z" })}\n`);
    t = await startTestServer({ tokensFile, transcriptRoot: realpathSync(root), monitorIntervalMs: 86_400_000 });
    base = `http://${t.server.httpAddress}`;
    admin = connect(t.server.address, { token: secrets.admin });
    teamA = connect(t.server.address, { token: secrets.teamA, namespace: "team-a" });
    // The default namespace: a manager watching three workers, each changed a few times a minute apart,
    // and an adopted session whose transcript a person wrote in.
    for (let i = 1; i <= 3; i++) await admin.watch.watch({ watcherSessionKey: W, target: { key: worker(i) } });
    for (let step = 0; step < 12; step++) {
      t.clock.advance(47_000);
      const i = (step % 3) + 1;
      await admin.signalLog.append(step % 4 === 3 ? human(worker(i), { actorId: "alice" }) : goal(worker(i), { summary: `step ${step}: plan revised` }));
    }
    await admin.upstream.adopt({ session: { key: "agent:main:adopted" }, catalogId: "claude", hostId: "host-1", source: { case: "localTranscript", value: { path: transcript } } });
    await admin.watch.watch({ watcherSessionKey: W, target: { key: "agent:main:adopted" } });
    appendFileSync(
      transcript,
      `${JSON.stringify({ type: "user", message: { role: "user", content: "a person typed this" }, promptId: "p-1", timestamp: "2026-12-01T12:05:00Z" })}\n`,
    );
    // Claude Code's hook call for the prompt: the server scans the transcript at once and records the turn.
    const hook = await fetch(`${base}/hooks/claude`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${secrets.admin}` },
      body: JSON.stringify({ session_id: "s-1", transcript_path: transcript, prompt_id: "p-1", hook_event_name: "UserPromptSubmit" }),
    });
    assert.equal(hook.status, 204);
    const humanTurns = async () =>
      (await admin.reconcile.sessionStatus({ session: { key: "agent:main:adopted" }, changesSince: 0n })).stateChanges!.events.filter((e) => e.summary === "human message via claude").length;
    for (let tries = 0; (await humanTurns()) === 0; tries++) {
      assert.ok(tries < 200, "the hook's scan recorded the turn");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // Namespace team-a: sessions of the same names, which the default namespace never sees.
    await teamA.signalLog.append(goal("agent:main:team-a-only"));
    browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
    console.log(`screenshots in ${shots}`);
  });

  after(async () => {
    await browser?.close();
    admin?.close();
    teamA?.close();
    await t?.dispose();
    dir.remove();
  });

  test("the first page asks for a token; a bad token gets a plain message and sees nothing", async () => {
    const page = await newPage();
    await page.goto(`${base}/`);
    await page.getByRole("alert").filter({ hasText: "This server asks for a token." }).waitFor();
    await shoot(page, "token");
    await page.getByLabel("Token").fill("not-a-token");
    await page.getByRole("button", { name: "Use this token" }).click();
    await page.getByRole("alert").filter({ hasText: "The server did not accept the token. Enter a valid token to continue." }).waitFor();
    assert.equal(await page.getByText(worker(1)).count(), 0);
    await page.close();
  });

  test("the first page lists each namespace with its counts and its most recently changed sessions, appended through gRPC", async () => {
    const page = await signIn(secrets.admin);
    const card = page.getByRole("region", { name: "default" });
    await card.getByRole("caption").filter({ hasText: "Most recently changed in default" }).waitFor();
    const namespaces = await admin.reconcile.listNamespaces({});
    const counts = namespaces.namespaces.find((n) => n.name === "default")!;
    const facts = await card.locator("dl.facts").innerText();
    assert.match(facts, new RegExp(`Sessions\\s+${counts.sessions}\\b`));
    assert.match(facts, new RegExp(`Events\\s+${counts.events}\\b`));
    assert.match(facts, new RegExp(`Pending notices\\s+${counts.pendingNotices}\\b`));
    const recent = await admin.reconcile.listSessions({ recentFirst: true, pageSize: 5 });
    const shown = await card.locator("tbody tr td:first-child").allInnerTexts();
    assert.deepEqual(shown, recent.sessions.map((s) => s.session!.key));
    await page.getByRole("region", { name: "team-a" }).getByText("agent:main:team-a-only").waitFor();
    await shoot(page, "overview");
    await page.close();
  });

  test("sessions are searched by key prefix, each view has its own address", async () => {
    const page = await signIn(secrets.admin, "#/ns/default/sessions");
    await page.getByLabel("Key starts with").fill("agent:main:subagent:");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForURL(/#\/ns\/default\/sessions\?prefix=agent%3Amain%3Asubagent%3A/);
    await page.getByRole("table").filter({ hasText: "Sessions whose key starts with" }).waitFor();
    const keys = await page.locator("tbody tr td:first-child").allInnerTexts();
    assert.deepEqual(keys, [worker(1), worker(2), worker(3)]);
    await shoot(page, "sessions");
    // The same address in another tab (the token entered again: it is kept per tab) shows the same page.
    const again = await signIn(secrets.admin, new URL(page.url()).hash);
    await again.getByRole("table").filter({ hasText: "Sessions whose key starts with" }).waitFor();
    assert.deepEqual(await again.locator("tbody tr td:first-child").allInnerTexts(), keys);
    await again.close();
    await page.close();
  });

  test("by keyboard alone: tab to the search field, type, press Enter; every field has its label", async () => {
    const page = await signIn(secrets.admin, "#/ns/default/sessions");
    await page.getByRole("button", { name: "Search" }).waitFor();
    await page.locator("body").focus();
    let tabs = 0;
    // (Expressions as text: they run in the page, whose DOM types the test's Node types do not have.)
    while ((await page.evaluate<string | undefined>("document.activeElement?.id")) !== "prefix") {
      assert.ok(++tabs <= 20, "the search field is reached by Tab");
      await page.keyboard.press("Tab");
    }
    await page.keyboard.type("agent:main:adopted");
    await page.keyboard.press("Enter");
    await page.waitForURL(/prefix=agent%3Amain%3Aadopted/);
    await page.getByRole("link", { name: "agent:main:adopted" }).waitFor();
    // Each form field is named by a label (what a screen reader says).
    const unlabeled = await page.evaluate<string[]>('[...document.querySelectorAll("input, select")].filter((field) => field.labels.length === 0).map((field) => field.outerHTML)');
    assert.deepEqual(unlabeled, []);
    await page.close();
  });

  test("a session shows its events on a time axis and its pairs with L, N, M and the exact notice text ListWatches has", async () => {
    const page = await signIn(secrets.admin, `#/ns/default/session/main/${encodeURIComponent(worker(1))}`);
    const pairs = page.getByRole("table").filter({ hasText: `Sessions watching ${worker(1)}` });
    await pairs.waitFor();
    const [cursor] = (await admin.watch.listWatches({ target: { key: worker(1) } })).cursors;
    assert.ok(cursor !== undefined && cursor.pendingNoticeText !== "", "the worker's pair has a pending notice");
    const cells = await pairs.locator("tbody tr").first().locator("td").allInnerTexts();
    assert.deepEqual(cells, [W, "explicit", String(cursor.ackedVersion), String(cursor.notifiedVersion), String(cursor.materialVersion), "pending", cursor.pendingNoticeText]);
    const status = await admin.reconcile.sessionStatus({ session: { key: worker(1) }, changesSince: 0n });
    const events = status.stateChanges!.events;
    assert.equal(await page.locator("svg.timeline .mark").count(), events.length);
    // The worker's events are minutes apart: every mark stands at one height, and the legend names the colours.
    assert.deepEqual(new Set(await markHeights(page)), new Set(["17"]));
    assert.equal(await page.locator("p.legend").count(), 1);
    const rows = await page.getByRole("table").filter({ hasText: "Events" }).locator("tbody tr td:first-child").allInnerTexts();
    assert.deepEqual(rows, events.map((e) => String(e.sequence)).reverse());
    await shoot(page, "session");
    // A consumer group's member that holds the pair's notice is named in its row.
    const gw = admin.watch.subscribeStaleNotices({ watcherSessionKeys: [W], consumerGroup: "gateway-main", maxInFlight: 10 }, { timeoutMs: 30_000 });
    try {
      const iterator = gw[Symbol.asyncIterator]();
      for (let item = await iterator.next(); !item.done && item.value.message.case !== "synced"; item = await iterator.next());
      await page.reload();
      await pairs.waitFor();
      const held = await pairs.locator("tbody tr").first().locator("td").nth(5).innerText();
      assert.match(held, /^pending\nheld by gateway-main 127\.0\.0\.1:\d+$/);
    } finally {
      gw.cancel();
    }
    await page.close();
  });

  test("a session without events shows no chart and no legend; events at one moment stand one above another", async () => {
    const page = await signIn(secrets.admin, `#/ns/default/session/main/${encodeURIComponent(W)}`);
    await page.getByText("No events are retained for this session.").waitFor();
    assert.equal(await page.locator("svg.timeline").count(), 0);
    assert.equal(await page.locator("p.legend").count(), 0);
    await page.close();
    const burst = "agent:main:burst";
    for (let i = 0; i < 3; i++) await admin.signalLog.append(goal(burst, { summary: `burst ${i}` }));
    const at = await admin.reconcile.sessionStatus({ session: { key: burst }, changesSince: 0n });
    const when = new Date(Number(at.stateChanges!.events[0]!.occurredAt!.seconds) * 1000).toISOString().slice(0, 19).replace("T", " ");
    const shown = await signIn(secrets.admin, `#/ns/default/session/main/${encodeURIComponent(burst)}`);
    const timeline = shown.locator("svg.timeline");
    await timeline.waitFor();
    assert.equal(await timeline.getAttribute("aria-label"), `Time axis: 3 events from ${when}Z to ${when}Z`);
    // Three marks at one x: the first on the lowest stem, each next one a level (14 px) higher.
    assert.deepEqual(await markHeights(shown), ["45", "31", "17"]);
    assert.equal(await shown.locator("p.legend").count(), 1);
    await shown.close();
  });

  test("live: a notice opened by an append appears within a second, and is marked acknowledged after the ack", async () => {
    const pending = (await admin.reconcile.listNamespaces({})).namespaces.find((n) => n.name === "default")!.pendingNotices;
    assert.ok(pending > 1n, `several notices are pending (${pending})`);
    const page = await signIn(secrets.admin, "#/ns/default/live");
    await page.getByRole("status").filter({ hasText: `Following every watcher of every agent: ${pending} notices were pending; new ones appear as they open.` }).waitFor();
    // Notices pending before the page opened say so: when they opened is not known to the page.
    const received = await page.locator("table.live tbody tr td:first-child").allInnerTexts();
    assert.deepEqual(received, new Array<string>(Number(pending)).fill("already pending"));
    // Acknowledge the worker-4 pair's history first: a fresh pair, so its notice is the one this test opens.
    await admin.watch.watch({ watcherSessionKey: W, target: { key: worker(4) } });
    const appended = await admin.signalLog.append(goal(worker(4), { summary: "live change" }));
    const openedAt = performance.now();
    const row = page.locator("table.live tbody tr").filter({ hasText: worker(4) });
    await row.waitFor({ timeout: 5000 });
    const appearedMs = performance.now() - openedAt;
    assert.match(await row.locator("td").first().innerText(), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    const [cursor] = (await admin.watch.listWatches({ watcherSessionKey: W, target: { key: worker(4) } })).cursors;
    assert.deepEqual(await row.locator("td").allInnerTexts().then((cells) => cells.slice(1)), [
      W,
      worker(4),
      String(cursor!.ackedVersion),
      String(cursor!.notifiedVersion),
      "pending",
      cursor!.pendingNoticeText,
    ]);
    await shoot(page, "live-pending");
    const ack = await admin.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: worker(4) }, notifiedVersion: appended.event!.sequence }] });
    assert.equal(ack.results[0]?.acknowledged, true);
    const ackedAt = performance.now();
    await page.locator('table.live tbody tr[data-state="acknowledged"]').filter({ hasText: worker(4) }).waitFor({ timeout: 5000 });
    const markedMs = performance.now() - ackedAt;
    console.log(`live view: the notice appeared ${appearedMs.toFixed(0)} ms after the append; marked acknowledged ${markedMs.toFixed(0)} ms after the ack`);
    assert.ok(appearedMs < 1000, `the notice appeared after ${appearedMs.toFixed(0)} ms`);
    await page.locator("svg.minutes").waitFor();
    await shoot(page, "live");
    await page.close();
  });

  test("the server view: version, backend, node id, database, retention, and the monitor's links with their last outcome", async () => {
    const page = await signIn(secrets.admin, "#/ns/default/server");
    const links = page.getByRole("table").filter({ hasText: "Upstream links in default" });
    await links.waitFor();
    const info = await admin.reconcile.getServerInfo({});
    const facts = await page.locator("dl.facts").first().innerText();
    assert.equal(info.database, resolve(t.dbPath));
    for (const [term, value] of [["Version", info.version], ["Backend", info.backend], ["Node id", info.nodeId], ["Database", "reachable"], ["Stored in", info.database], ["Your token", "operator (admin)"]]) {
      assert.match(facts, new RegExp(`${term}\\s+${value!.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(\n|$)`));
    }
    // The outcome is ListUpstreamLinks' at the moment the page read it: the hook's scan recorded the turn,
    // and the monitor's first tick (15 s after start) may have scanned the link again since.
    const outcomeNow = async () => (await admin.upstream.listUpstreamLinks({})).links[0]!.lastScanOutcome;
    let shown: (string | undefined)[] = [];
    for (let tries = 0; tries < 3; tries++) {
      const before = await outcomeNow();
      await page.reload();
      await links.waitFor();
      shown = await links.locator("tbody tr").first().locator("td").allInnerTexts().then((cells) => [cells[0], cells[1], cells[5]]);
      if (shown[2] === before && (await outcomeNow()) === before) break;
    }
    assert.deepEqual(shown, ["agent:main:adopted", "claude", await outcomeNow()]);
    assert.ok(["recorded", "scanned"].includes(shown[2]!));
    const hooks = page.getByRole("table").filter({ hasText: "The CLIs' prompt hooks" });
    const claude = await hooks.locator("tbody tr").first().locator("td").allInnerTexts();
    assert.deepEqual([claude[0], claude[2], claude[3], claude[4]], ["claude", "1", "0", "0"]);
    assert.notEqual(claude[1], "never");
    assert.deepEqual(await hooks.locator("tbody tr").nth(1).locator("td").allInnerTexts(), ["codex", "never", "0", "0", "0"]);
    await shoot(page, "server");
    await page.close();
  });

  test("a token scoped to one namespace sees that namespace only: the other is neither listed nor readable", async () => {
    const page = await signIn(secrets.teamA);
    await page.getByRole("region", { name: "team-a" }).getByText("agent:main:team-a-only").waitFor();
    assert.equal(await page.getByRole("region", { name: "default" }).count(), 0);
    assert.equal(await page.getByText(worker(1)).count(), 0);
    await page.goto(`${base}/#/ns/default/sessions`);
    await page.getByRole("alert").filter({ hasText: 'Your token may not see this: namespace "default" is outside the scope of token "gateway-a"' }).waitFor();
    assert.equal(await page.getByText(worker(1)).count(), 0);
    // Where the server keeps its data is for an admin token.
    assert.equal((await teamA.reconcile.getServerInfo({})).database, "");
    await page.goto(`${base}/#/ns/team-a/server`);
    assert.match(await page.locator("dl.facts").first().innerText(), /Stored in\s+shown to an admin token only\n/);
    // Live in team-a: nothing pending when the page opens, then one.
    await page.goto(`${base}/#/ns/team-a/live`);
    await page.getByRole("status").filter({ hasText: "Following every watcher of main: no notice was pending; new ones appear as they open." }).waitFor();
    await teamA.watch.watch({ watcherSessionKey: W, target: { key: "agent:main:team-a-only" } });
    await teamA.signalLog.append(goal("agent:main:team-a-only", { summary: "one more" }));
    await page.reload();
    await page.getByRole("status").filter({ hasText: "Following every watcher of main: 1 notice was pending; new ones appear as they open." }).waitFor();
    await page.close();
  });

  test("a page of another origin, or one that rebound its name to this port, can neither read nor append (auth off)", async () => {
    const open = await startTestServer({ httpListen: { host: "127.0.0.1", port: 0 } });
    const port = Number(open.server.httpAddress!.split(":")[1]);
    // Another local origin: a page served on its own port, as any local web app's.
    const other = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>elsewhere</title>"));
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    // A rebinding page: the browser resolves attacker.test to this machine, as DNS rebinding makes it.
    const rebinding = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--host-resolver-rules=MAP attacker.test 127.0.0.1"] });
    try {
      const append = JSON.stringify({ session: { key: "agent:main:victim" }, kind: "EVENT_KIND_GOAL_CHANGED", actorType: "ACTOR_TYPE_AGENT", summary: "written by a web page" });
      // Page script as text: tsx would add helpers of its own to a function handed to the page.
      const attack = (page: Page, api: string): Promise<Record<string, string>> =>
        page.evaluate(`(async () => {
          const api = ${JSON.stringify(api)};
          const append = ${JSON.stringify(append)};
          const outcome = (request) => request.then(
            async (response) => (response.status + " " + (await response.text())).trim(),
            (error) => "failed: " + error.message,
          );
          return {
            read: await outcome(fetch(api + "/sessionstate.v1.Reconcile/ListNamespaces", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })),
            append: await outcome(fetch(api + "/sessionstate.v1.SignalLog/Append", { method: "POST", headers: { "content-type": "application/json" }, body: append })),
            // A "simple" request sends no preflight: the port refuses it for its Origin before reading it.
            blind: await outcome(fetch(api + "/sessionstate.v1.SignalLog/Append", { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: append })),
          };
        })()`);
      const elsewhere = await browser.newPage();
      await elsewhere.goto(`http://127.0.0.1:${(other.address() as { port: number }).port}/`);
      const fromElsewhere = await attack(elsewhere, `http://127.0.0.1:${port}`);
      const rebound = await rebinding.newPage();
      const landing = await rebound.goto(`http://attacker.test:${port}/`);
      const fromRebound = await attack(rebound, `http://attacker.test:${port}`);
      console.log(`another origin: ${JSON.stringify(fromElsewhere)}; rebound name: ${landing?.status()} ${JSON.stringify(fromRebound)}`);
      assert.deepEqual(fromElsewhere, { read: "failed: Failed to fetch", append: "failed: Failed to fetch", blind: "0" });
      assert.equal(landing?.status(), 421, "the console is not served to a rebound name");
      const misdirected = "421 misdirected request: this server does not answer to that name (see --http-allowed-hosts)";
      assert.deepEqual(fromRebound, { read: misdirected, append: misdirected, blind: misdirected });
      const victim = await open.reconcile.sessionStatus({ session: { key: "agent:main:victim" } });
      assert.equal(victim.stateVersion, 0n, "nothing was appended");
      assert.deepEqual((await open.reconcile.listNamespaces({})).namespaces, []);
      // The console itself still works at its own names.
      for (const name of [`localhost:${port}`, `127.0.0.1:${port}`]) {
        const page = await browser.newPage();
        await page.goto(`http://${name}/#/`);
        await page.getByRole("heading", { name: "Namespaces" }).waitFor();
        await page.close();
      }
      await elsewhere.close();
    } finally {
      await rebinding.close();
      await new Promise<void>((resolve) => other.close(() => resolve()));
      await open.dispose();
    }
  });

  test("the page broke no rule of its content security policy and asked nothing of any other origin", async () => {
    const response = await fetch(`${base}/`);
    await response.text();
    assert.match(response.headers.get("content-security-policy") ?? "", /default-src 'none'; script-src 'self'/);
    assert.equal(response.headers.get("x-frame-options"), "DENY");
    assert.deepEqual(consoleErrors.filter((error) => !/the server responded with a status of 40[13]/.test(error)), []);
  });
});
