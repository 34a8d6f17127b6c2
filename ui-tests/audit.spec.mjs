// Audit campaigns on `serve --env audit`: one full period (four specialist tasks, overseer review,
// advance, campaign score), then periods until a regulatory shock fires (on the period clock,
// after a specialist submit; docs/audit.md) and shows on the card.
import { test, expect, env, shot, SHOTS } from "./fixtures.mjs";

const ROLES = ["expense_specialist", "invoice_specialist", "gst_specialist", "fraud_specialist"];

async function start(page, periods) {
  await page.goto(`${env("LS_AUDIT_URL")}/ui/`);
  await expect(page.locator("#env-badge")).toHaveText("Financial Audit");
  await page.fill("#campaign-periods", String(periods));
  await page.click("#start-campaign");
  await expect(page.locator("main h2")).toContainText("Campaign cmp-");
}

/** Work one period: each specialist submits one finding (again if a server defers it); returns
 *  the shocks seen. */
async function period(page, onTask, beforeAdvance) {
  const shocks = [];
  for (const role of ROLES) {
    const card = page.locator(`section.role-card[data-role="${role}"]`);
    await card.locator("button.start-task").click();
    await expect(card.locator("details.panel").first()).toBeVisible();
    if (onTask) await onTask(role);
    await card.locator("button.add-finding").click();
    await card.locator("button.submit-findings").click();
    await expect(card).toContainText("Submitted");
    if (await card.locator(".shock").count()) {
      await expect(card.locator(".shock").first()).toContainText(/Shock fired: REG-\d+: \w/);
      shocks.push(await card.locator(".shock").first().innerText());
      if (shocks.length === 1) await card.screenshot({ path: `${SHOTS}/audit-shock.png` });
      if ((await card.innerText()).includes("deferred")) {
        await card.locator("button.submit-findings").click();
        await expect(card.locator("button.submit-findings")).toHaveCount(0);
      }
    }
    await expect(card).toContainText("grade: weighted");
  }
  await page.click("#overseer-review");
  await expect(page.locator("#review-result")).toContainText("accepted");
  if (beforeAdvance) await beforeAdvance();
  await page.click("#advance");
  await expect(page.locator("#campaign-score")).toBeVisible();
  return shocks;
}

test("run one audit campaign period", async ({ page }) => {
  await start(page, 2);
  await period(page, async (role) => {
    if (role === "expense_specialist") {
      await expect(page.locator("main")).toContainText("Active instructions (16)");
      await shot(page, "audit");
    }
  }, async () => {
    await expect(page.locator("#review-result")).toContainText("4 accepted");
    await expect(page.locator("#review-decisions tbody tr")).toHaveCount(4);
  });
  await expect(page.locator("#campaign-score tbody tr")).toHaveCount(1);
  await expect(page.locator("#campaign-score")).toContainText("Campaign score");
  await expect(page.locator("main")).toContainText("Period 2 of 2");
  await shot(page, "audit-score");
});

test("regulatory shocks show as they fire", async ({ page }) => {
  await start(page, 3);
  const seen = [];
  for (let p = 1; p <= 3; p++) seen.push(...(await period(page)));
  // Period 3 brings REG-001 in the GST episode (docs/audit.md).
  expect(seen.join(" | ")).toContain("Shock fired");
  await expect(page.locator("#campaign-score tbody tr")).toHaveCount(3);
});
