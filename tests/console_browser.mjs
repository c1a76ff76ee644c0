// The web console in real headless Chromium (Debian's /usr/bin/chromium, driven by npm playwright-core): signs in
// through the link `foldermind console --url` prints, reads the overview, searches, opens a hit's preview, asks,
// restarts a worker, adds and removes a folder, copies a client's snippet, reads doctor's findings and tests the connection,
// makes a scoped client key and revokes it, and looks at the console without a session in a second, fresh profile. Prints what it saw as one JSON line for
// tests/test_console_browser.py. Run from the directory whose node_modules holds playwright-core.
// Usage: node console_browser.mjs PYTHON HOME QUERY WORKER EXTRA_FOLDER PDF_QUERY KEY_FOLDER [SCREENSHOT]
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [python, home, query, worker, extra, pdfQuery, keyFolder, screenshot] = process.argv.slice(2);
const ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
  "--disable-sync", "--no-first-run", "--disable-quic",
];
const WAIT = { timeout: 60000 };

async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "fm-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium", args: ARGS, headless: true, viewport: { width: 1280, height: 900 },
  });
  return { context, profile };
}

function link() {
  return execFileSync(python, ["-m", "foldermind.kernel.cli", "--home", home, "console", "--url"], {
    encoding: "utf8",
  }).trim();
}

const seen = { errors: [] };
const { context, profile } = await launch();
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on("pageerror", (e) => seen.errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && seen.errors.push(m.text()));
  const signin = link();
  seen.base = new URL("/", signin).href;
  await page.goto(signin);
  await page.waitForSelector("#workers tbody tr", WAIT);
  seen.path = new URL(page.url()).pathname;
  seen.workers = await page.$$eval("#workers tbody tr", (rows) => rows.map((r) => r.dataset.worker));
  seen.folders = await page.$$eval("[data-folder]", (els) => els.map((e) => e.dataset.folder));
  seen.cookies = (await context.cookies()).map((c) => ({ httpOnly: c.httpOnly, sameSite: c.sameSite }));
  // The live part is swapped by the first event even when nothing changed since the page was rendered.
  await page.waitForFunction(() => document.body.dataset.live === "1", null, WAIT);
  seen.live = true;
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  // Readable at 800 px, dark as well as light: nothing wider than the window, the dark colours applied.
  const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  seen.light = await background();
  await page.setViewportSize({ width: 800, height: 900 });
  await page.emulateMedia({ colorScheme: "dark" });
  seen.narrow = await page.evaluate(() => document.documentElement.scrollWidth);
  seen.dark = await background();
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize({ width: 1280, height: 900 });

  // Search, by keyboard: the query box, Enter.
  await page.click('a[href="/search"]');
  await page.fill("#q", query);
  await page.press("#q", "Enter");
  await page.waitForSelector("#results", WAIT);
  seen.hits = await page.$$eval("#results li.hit", (items) =>
    items.map((li) => ({
      file: li.querySelector(".file").textContent,
      where: li.querySelector(".where").textContent,
      score: li.querySelector(".score").textContent,
      marks: Array.from(li.querySelectorAll("mark")).map((m) => m.textContent),
    })),
  );

  // The first hit opens its document at the passage, marked.
  await page.click("#results li.hit a.file");
  await page.waitForSelector(".lines .passage mark", WAIT);
  seen.preview = {
    hash: new URL(page.url()).hash,
    passage: await page.$$eval(".lines .passage mark", (marks) => marks.map((m) => m.textContent)),
    lines: await page.$$eval(".lines li", (items) => items.length),
  };

  // Ask: an answer with [1], whose link opens the cited passage.
  await page.click('a[href="/ask"]');
  await page.fill("#q", `Where did the foxes jump?`);
  await page.press("#q", "Enter");
  await page.waitForSelector("#answer a.cite", WAIT);
  seen.answer = await page.textContent("#answer .answer");
  await page.click("#answer a.cite");
  await page.waitForSelector(".lines .passage mark", WAIT);
  seen.cited = await page.$$eval(".lines .passage mark", (marks) => marks.map((m) => m.textContent));

  // A PDF hit: its page as an image, loaded, named by its alt text.
  await page.goto(new URL(`/search?q=${encodeURIComponent(pdfQuery)}&mode=keyword`, page.url()).href);
  await page.click("#results li.hit a.file");
  await page.waitForSelector("figure.page img", WAIT);
  await page.waitForFunction(() => document.querySelector("figure.page img").complete, null, WAIT);
  seen.pdf = await page.$eval("figure.page img", (img) => ({ alt: img.alt, width: img.naturalWidth }));

  // Restart a worker from the overview: its row shows a new pid, RUNNING, without a reload.
  await page.goto(new URL("/", page.url()).href);
  const row = `#workers tr[data-worker="${worker}"]`;
  await page.waitForSelector(row, WAIT);
  seen.pidBefore = (await page.textContent(`${row} .pid`)).trim();
  await page.click(`${row} button`);
  await page.waitForFunction(
    ([sel, before]) => {
      const r = document.querySelector(sel);
      return r && r.querySelector(".pid").textContent.trim() !== before && r.querySelector(".state").textContent === "RUNNING";
    },
    [row, seen.pidBefore],
    WAIT,
  );
  seen.pidAfter = (await page.textContent(`${row} .pid`)).trim();

  // A folder added from the page, by its path, then removed (after the confirming click).
  await page.fill("#path", extra);
  await page.click(".add-folder button");
  const added = `[data-folder="${extra}"]`;
  await page.waitForSelector(added, WAIT);
  seen.added = await page.$$eval("[data-folder]", (els) => els.map((e) => e.dataset.folder));
  await page.click(`${added} details.remove summary`);
  await page.click(`${added} details.remove button`);
  await page.waitForSelector(added, { ...WAIT, state: "detached" });
  seen.removed = await page.$$eval("[data-folder]", (els) => els.map((e) => e.dataset.folder));

  // Clients: a snippet copied by its button (the clipboard read back), and a test connection that succeeds.
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(seen.base).origin });
  await page.click('a[href="/clients"]');
  await page.waitForSelector("#copy-cursor-url", WAIT);
  await page.click("#copy-cursor-url");
  await page.waitForFunction(
    () => document.querySelector("#copy-cursor-url").parentElement.querySelector(".copied").textContent !== "",
    null,
    WAIT,
  );
  seen.copy = {
    said: await page.evaluate(() => document.querySelector("#copy-cursor-url").parentElement.querySelector(".copied").textContent),
    shown: await page.textContent("#snippet-cursor-url"),
    clipboard: await page.evaluate(() => navigator.clipboard.readText()),
  };
  await page.waitForSelector("#doctor tbody tr", WAIT);
  seen.doctor = await page.$$eval("#doctor tbody th", (cells) => cells.map((c) => c.textContent));
  await page.click("#test-connection");
  await page.waitForSelector("#test-result", WAIT);
  seen.tested = (await page.textContent("#test-result p")).trim();

  // Keys: a key for the one folder, by its name; its token shown once (copied by its button), listed by folder name,
  // then revoked after the confirming click.
  await page.click('a[href="/keys"]');
  await page.waitForSelector("#key-name", WAIT);
  await page.fill("#key-name", "agent");
  await page.check(`input[name="folder"][data-name="${keyFolder}"]`);
  await page.click("#add-key");
  await page.waitForSelector("#key-token", WAIT);
  const token = (await page.textContent("#key-token")).trim();
  seen.key = { made: (await page.textContent("#key-made")).trim(), token };
  await page.click("#copy-key-token");
  await page.waitForFunction(
    () => document.querySelector("#copy-key-token").parentElement.querySelector(".copied").textContent !== "",
    null,
    WAIT,
  );
  seen.key.clipboard = await page.evaluate(() => navigator.clipboard.readText());
  await page.click('main a[href="/keys"]');
  await page.waitForSelector('#keys tr[data-key="agent"]', WAIT);
  seen.key.rows = await page.$$eval("#keys tbody tr", (rows) =>
    rows.map((r) => ({ name: r.dataset.key, sees: r.querySelector(".sees").textContent })),
  );
  seen.key.shownAgain = (await page.content()).includes(token);
  await page.click('#keys tr[data-key="agent"] details.revoke summary');
  await page.click("#revoke-agent");
  await page.waitForSelector("#no-keys", WAIT);
  seen.key.afterRevoke = await page.$$eval("#keys tbody tr", (rows) => rows.length);

  // The same link again, in this profile: refused.
  const again = await page.goto(signin);
  seen.reused = again.status();
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}

// A fresh profile (no cookie): the console shows only how to sign in.
const fresh = await launch();
try {
  const page = fresh.context.pages()[0] || (await fresh.context.newPage());
  const response = await page.goto(seen.base);
  seen.anonymous = {
    status: response.status(),
    heading: await page.textContent("h1"),
    workers: (await page.$$("#workers")).length,
  };
  seen.anonymousKeys = (await page.goto(new URL("/keys", seen.base).href)).status();
} finally {
  await fresh.context.close();
  rmSync(fresh.profile, { recursive: true, force: true });
}
console.log(JSON.stringify(seen));
