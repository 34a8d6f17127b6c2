// One audit campaign period on `serve --env audit`: four specialist tasks, overseer review, advance.
import { test, expect, env, shot } from "./fixtures.mjs";

const ROLES = ["expense_specialist", "invoice_specialist", "gst_specialist", "fraud_specialist"];

test("run one audit campaign period", async ({ page }) => {
  await page.goto(`${env("LS_AUDIT_URL")}/ui/`);
  await expect(page.locator("#env-badge")).toHaveText("Financial Audit");
  await page.fill("#campaign-periods", "2");
  await page.click("#start-campaign");
  await expect(page.locator("main h2")).toContainText("Campaign cmp-");
  for (const role of ROLES) {
    const card = page.locator(`section.role-card[data-role="${role}"]`);
    await card.locator("button.start-task").click();
    await expect(card.locator("details.panel").first()).toBeVisible();
    if (role === "expense_specialist") {
      await expect(page.locator("main")).toContainText("Active instructions (16)");
      await shot(page, "audit");
    }
    await card.locator("button.add-finding").click();
    await card.locator("button.submit-findings").click();
    await expect(card).toContainText("grade: weighted");
  }
  await page.click("#overseer-review");
  await expect(page.locator("#review-result")).toContainText("4 accepted");
  await page.click("#advance");
  await expect(page.locator("#campaign-score")).toContainText("Campaign score");
  await expect(page.locator("#campaign-score tbody tr")).toHaveCount(1);
  await expect(page.locator("main")).toContainText("Period 2 of 2");
  await shot(page, "audit-score");
});
