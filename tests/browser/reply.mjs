// A service run waiting for a person's answer (`request_user_input`), answered from the console
// in a real browser (Debian chromium through playwright-core): find the paused run, read its
// question, type the answer, reply, see the run complete with the answer in its transcript and
// the pause timed on the step's card. Screenshots go to $ARTIFACTS.
//
// Environment: STUDIO_URL, STUDIO_TOKEN, RUN (the paused run's id), ANSWER, CHROMIUM.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const base = process.env.STUDIO_URL;
const token = process.env.STUDIO_TOKEN || "";
const run = process.env.RUN;
const answer = process.env.ANSWER;
const artifacts = process.env.ARTIFACTS || "target/browser-artifacts";
if (!base || !run || !answer) {
  console.error("STUDIO_URL, RUN and ANSWER are required");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
page.on("pageerror", (err) => console.error("page error:", err.message));
const shot = (name) => page.screenshot({ path: join(artifacts, name), fullPage: true });
const step = (text) => console.log("browser:", text);

try {
  await page.goto(`${base}/studio#token=${encodeURIComponent(token)}`);
  step(`finding run ${run}, paused for an answer`);
  const row = page.locator(`#runs li[data-run="${run}"]`);
  await row.locator('.badge:text-is("paused")').waitFor({ timeout: 30000 });
  await row.click();
  await page.waitForSelector("#run-waiting #reply-run", { timeout: 20000 });
  await page.waitForSelector('#timeline li.step li.pause[data-reason="human_input"] .waited:text-is("waiting…")', { timeout: 20000 });
  await shot("reply-1-waiting.png");

  step("replying");
  await page.fill("#answer-text", answer);
  await page.click("#reply-run");
  await page.waitForSelector('#run-status .badge:text-is("completed")', { timeout: 30000 });
  await page.waitForSelector(`#transcript li:has-text("${answer}")`, { timeout: 20000 });
  await page.waitForSelector('#timeline li.step li.pause[data-reason="human_input"] .waited.took:has-text("waited")', { timeout: 20000 });
  step("two steps: the question, then the answer after the reply");
  await page.waitForSelector('#timeline li.step[data-step="0"] li.tool[data-tool="request_user_input"]');
  await page.waitForSelector('#timeline li.step[data-step="1"] .model.took:has-text("model call")', { timeout: 20000 });
  await shot("reply-2-answered.png");
  step("ok");
} catch (err) {
  await shot("reply-failure.png").catch(() => {});
  console.error("browser test failed:", err.message);
  process.exitCode = 1;
} finally {
  await browser.close();
}
