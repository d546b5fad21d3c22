// A newcomer's path through the console (Debian chromium through playwright-core): open the
// link `agent-runtime serve --demo` printed, find the demo run waiting for approval, see what
// it did (demo model labelled, plan, tool call, streamed text), approve it, see it complete.
// Then the console of a service with nothing configured: its empty states say what to do next.
// Screenshots go to $ARTIFACTS.
//
// Environment: CONSOLE_URL (the printed console link, with its #token=), RUN (the demo run's
// id), EMPTY_URL (optional: the console link of a plain `serve`), CHROMIUM.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const consoleUrl = process.env.CONSOLE_URL;
const run = process.env.RUN;
const emptyUrl = process.env.EMPTY_URL;
const artifacts = process.env.ARTIFACTS || "target/browser-artifacts";
if (!consoleUrl || !run) {
  console.error("CONSOLE_URL and RUN are required");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
const origins = [new URL(consoleUrl).origin].concat(emptyUrl ? [new URL(emptyUrl).origin] : []);
const outside = [];
page.on("request", (req) => {
  if (!origins.some((o) => req.url().startsWith(o))) outside.push(req.url());
});
page.on("pageerror", (err) => console.error("page error:", err.message));
const shot = (name) => page.screenshot({ path: join(artifacts, name), fullPage: true });
const step = (text) => console.log("browser:", text);

try {
  step("opening the printed console link");
  await page.goto(consoleUrl);
  await page.waitForSelector("#demo-banner:not([hidden])", { timeout: 20000 });

  step(`finding demo run ${run}, paused`);
  const row = page.locator(`#runs li[data-run="${run}"]`);
  await row.locator('.badge:text-is("paused")').waitFor({ timeout: 30000 });
  await row.locator(".badge.demo").waitFor();
  await row.click();

  step("seeing what it did and what it waits for");
  await page.waitForSelector('#run-waiting:has-text("Approve the demo summary")', { timeout: 20000 });
  await page.waitForSelector("#run-model .badge.demo");
  await page.waitForSelector('#transcript li:has-text("[demo model]")');
  await page.waitForSelector('#tool-calls td:text-is("get_context")');
  await page.waitForSelector('#timeline li:has-text("plan_updated")', { timeout: 20000 });
  await page.waitForSelector('#timeline li[data-type="tool_call_finished"] .took:has-text("tool call")');
  await page.waitForSelector('#timeline li[data-type="assistant_message_completed"] .took:has-text("model call")');
  await shot("newcomer-1-waiting.png");

  step("approving");
  await page.click("#approve-run");
  await page.waitForSelector('#run-status .badge:text-is("completed")', { timeout: 30000 });
  await page.waitForSelector('#transcript li:has-text("demo run is complete")', { timeout: 20000 });
  await page.waitForSelector('#timeline li[data-type="run.resumed"] .took:has-text("paused for")', { timeout: 20000 });
  await row.locator('.badge:text-is("completed")').waitFor({ timeout: 20000 });

  step("filtering the runs: paused ones are none now, the demo app's are one");
  await page.selectOption("#rf-status", "paused");
  await page.waitForSelector('#runs li:has-text("No run matches.")', { timeout: 20000 });
  await page.selectOption("#rf-status", "");
  await page.fill("#rf-q", "DEMO-1");
  await row.waitFor({ timeout: 20000 });
  await page.fill("#rf-q", "");

  step("another demo run from the console, sent back with changes");
  await page.click("#new-demo-run");
  await page.waitForSelector("#run-waiting", { timeout: 30000 });
  const second = (await page.textContent("#run-id")).trim();
  if (second === run) throw new Error("the console did not open the new run");
  await page.fill("#answer-text", "Say it in fewer words");
  await page.click("#request-changes");
  await page.waitForSelector('#run-status .badge:text-is("completed")', { timeout: 30000 });
  await page.waitForSelector('#transcript li:has-text("Say it in fewer words")', { timeout: 20000 });
  await shot("newcomer-3-changes.png");

  step("a third, cancelled from the console");
  await page.click("#new-demo-run");
  await page.waitForFunction((seen) => {
    const id = document.querySelector("#run-id");
    return id && !seen.includes(id.textContent.trim());
  }, [run, second], { timeout: 20000 });
  await page.waitForSelector("#run-waiting", { timeout: 30000 });
  await page.click("#cancel-run");
  await page.waitForSelector('#run-status .badge:text-is("cancelled")', { timeout: 30000 });
  await shot("newcomer-2-completed.png");

  if (emptyUrl) {
    step("a service with nothing configured says what to do next");
    await page.goto("about:blank");
    await page.goto(emptyUrl);
    await page.waitForSelector('#runs-empty:not([hidden]):has-text("serve --demo")', { timeout: 20000 });
    await page.waitForSelector('#runtimes .hint:has-text("serve --demo")', { timeout: 20000 });
    await page.waitForSelector("#nr-submit[disabled]");
    await shot("newcomer-4-empty.png");
  }

  if (outside.length) throw new Error("the console loaded something from elsewhere: " + outside.join(", "));
  step("ok");
} catch (err) {
  await shot("newcomer-failure.png").catch(() => {});
  console.error("browser test failed:", err.message);
  process.exitCode = 1;
} finally {
  await browser.close();
}
