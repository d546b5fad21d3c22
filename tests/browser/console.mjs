// Drives the studio console in a real browser (Debian chromium through playwright-core):
// set a breakpoint, start a run, approve the parked tool, then replay from step 1 with an
// edited tool result. Screenshots go to $ARTIFACTS (target/browser-artifacts by default).
//
// Environment: STUDIO_URL (the service, e.g. http://127.0.0.1:8080), STUDIO_TOKEN,
// STANDALONE_URL (optional: a standalone studio the service is linked to),
// AGENT (e.g. host_app/helper), TOOL (the tool to break on), CHROMIUM (/usr/bin/chromium).
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const base = process.env.STUDIO_URL;
const token = process.env.STUDIO_TOKEN || "";
const agent = process.env.AGENT || "host_app/helper";
const tool = process.env.TOOL || "get_context";
const artifacts = process.env.ARTIFACTS || "target/browser-artifacts";
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!base) {
  console.error("STUDIO_URL is required");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
const outside = [];
page.on("request", (req) => {
  if (!req.url().startsWith(base)) outside.push(req.url());
});
page.on("pageerror", (err) => console.error("page error:", err.message));
const shot = (name) => page.screenshot({ path: join(artifacts, name), fullPage: true });
const step = (text) => console.log("browser:", text);

try {
  await page.goto(`${base}/studio#token=${encodeURIComponent(token)}`);
  step("waiting for the runtime and its agent");
  await page.waitForSelector(`#nr-agent option:text-is("${agent}")`, { state: "attached", timeout: 20000 });

  step(`setting a breakpoint on ${tool}`);
  await page.check(`input[name=bp][value="${tool}"]`);
  await page.click("#save-breakpoints");
  await page.waitForSelector('#flash:has-text("Breakpoints saved")');

  step("starting a run");
  await page.selectOption("#nr-agent", { label: agent });
  await page.fill("#nr-input", "Look it up, please.");
  await page.click("#nr-submit");
  const firstRow = page.locator("#commands tbody tr").first();
  await firstRow.locator("a").waitFor({ timeout: 20000 });
  await firstRow.locator("a").click();

  step("waiting for the parked call");
  const card = page.locator("#pending .card").first();
  await card.waitFor({ timeout: 20000 });
  const callId = await card.getAttribute("data-call");
  const sourceRun = (await page.textContent("#run-id")).trim();
  await shot("1-parked.png");

  step(`approving ${callId}`);
  await card.locator("button.approve").click();
  await page.waitForSelector('#run-status .badge:text-is("completed")', { timeout: 20000 });
  await page.waitForSelector('#transcript li:has-text("all done")', { timeout: 20000 });
  await shot("2-approved.png");

  step("replaying from step 1 with an edited tool result");
  await page.fill("#rp-step", "1");
  await page.selectOption("#rp-engine", "live");
  await page.fill(
    "#rp-edits",
    JSON.stringify([{ kind: "tool_result", step: 0, call_id: callId, tool_result: "EDITED IN THE BROWSER" }]),
  );
  await page.click("#rp-submit");
  const replayRow = page.locator("#commands tbody tr").first();
  await replayRow.locator('.badge:text-is("finished")').waitFor({ timeout: 20000 });
  await replayRow.locator("a").click();
  await page.waitForFunction((source) => {
    const id = document.querySelector("#run-id");
    return id && id.textContent.trim() !== source;
  }, sourceRun);
  await page.waitForSelector('#run-status .badge:text-is("completed")', { timeout: 20000 });
  await page.waitForSelector('#transcript li:has-text("EDITED IN THE BROWSER")', { timeout: 20000 });
  await page.waitForSelector('#transcript li:has-text("forked answer")', { timeout: 20000 });
  await page.waitForSelector("#timeline li", { timeout: 20000 });
  await shot("3-replayed.png");

  const standalone = process.env.STANDALONE_URL;
  if (standalone) {
    step("the standalone studio lists the linked service and its commands");
    await page.goto(`${standalone}/studio`);
    await page.waitForSelector('#mode:text-is("standalone")');
    await page.waitForSelector(`#nr-agent option:text-is("${agent}")`, { state: "attached", timeout: 20000 });
    await page.waitForSelector("#decide-form:not([hidden])");
    await shot("4-standalone.png");
  }

  const foreign = outside.filter((u) => !standalone || !u.startsWith(standalone));
  if (foreign.length) {
    throw new Error("the console loaded something from elsewhere: " + foreign.join(", "));
  }
  step("ok");
} catch (err) {
  await shot("failure.png").catch(() => {});
  console.error("browser test failed:", err.message);
  process.exitCode = 1;
} finally {
  await browser.close();
}
