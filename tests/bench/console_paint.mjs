// First paint of the console's overview in headless Chromium (/usr/bin/chromium via playwright-core): signs in
// with LINK, then loads the overview REPS times, each a fresh navigation, and prints one JSON line of
// {responseEnd, domContentLoaded, firstContentfulPaint} in ms from each navigation's start (tests/bench/console.py).
// Usage: node console_paint.mjs LINK REPS
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [link, reps] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "fm-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic"],
  viewport: { width: 1280, height: 900 },
});
const out = [];
try {
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(link);
  const base = new URL("/", page.url()).href;
  for (let i = 0; i < Number(reps); i++) {
    await page.goto(base, { waitUntil: "load" });
    // The first paint can come after "load": wait for its entry (buffered), at most 10 s.
    out.push(await page.evaluate(() => new Promise((resolve) => {
      const nav = performance.getEntriesByType("navigation")[0];
      const done = (fcp) => resolve({
        responseEnd: nav.responseEnd, domContentLoaded: nav.domContentLoadedEventEnd, firstContentfulPaint: fcp,
      });
      new PerformanceObserver((list) => {
        const fcp = list.getEntriesByName("first-contentful-paint")[0];
        if (fcp) done(fcp.startTime);
      }).observe({ type: "paint", buffered: true });
      setTimeout(() => done(null), 10000);
    })));
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
