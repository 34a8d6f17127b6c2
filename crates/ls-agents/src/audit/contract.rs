//! The Financial Audit seed's stdout contract, for single tasks and campaigns:
//!
//! ```text
//! [START] task=<task> env=financial_audit_env model=<model>
//! [STEP] step=<n> action=submit_<k>_findings reward=<r:.6f> done=<true|false> error=<msg|null>
//! [END] success=<bool> steps=<n> score=<s:.6f> rewards=<r1,r2,...>
//!
//! [START] campaign seed=<s> periods=<p>
//! [STEP] period=<p> phase=start
//! [STEP] period=<p> role=<role> findings=<k>
//! [STEP] period=<p> phase=overseer_review decisions=<k>
//! [END] campaign_id=<id> periods=<p> success=<bool>
//! ```
//!
//! Numbers are clamped to [0.01, 0.99] and written with six decimals; a task succeeds at a score
//! of [`super::SUCCESS_SCORE`]; a campaign succeeds when every period was played and advanced.

use super::{AuditCampaignRecord, AuditObserver, AuditTaskRecord, SUCCESS_SCORE};
use std::io::Write;

/// Benchmark name in `[START]` lines.
pub const ENV_NAME: &str = "financial_audit_env";

fn unit(x: f64) -> String {
    let x = if x.is_finite() { x } else { 0.01 };
    format!("{:.6}", x.clamp(0.01, 0.99))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Writes the contract's lines.
pub struct ContractLines<W: Write> {
    pub out: W,
}

impl<W: Write> AuditObserver for ContractLines<W> {
    fn task_start(&mut self, task: &str, model: &str) {
        let _ = writeln!(
            self.out,
            "[START] task={} env={ENV_NAME} model={}",
            one_line(task),
            one_line(model)
        );
    }

    fn task_end(&mut self, r: &AuditTaskRecord) {
        let error = r
            .error
            .as_deref()
            .map(one_line)
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "null".into());
        if r.steps > 0 {
            let _ = writeln!(
                self.out,
                "[STEP] step={} action=submit_{}_findings reward={} done=true error={error}",
                r.steps,
                r.findings.len(),
                unit(r.rewards.last().copied().unwrap_or(0.0))
            );
        }
        let score = r.score.unwrap_or(0.01);
        let rewards: Vec<String> = if r.rewards.is_empty() {
            vec![unit(score)]
        } else {
            r.rewards.iter().map(|x| unit(*x)).collect()
        };
        let _ = writeln!(
            self.out,
            "[END] success={} steps={} score={} rewards={}",
            !r.failed && score >= SUCCESS_SCORE,
            r.steps.max(1),
            unit(score),
            rewards.join(",")
        );
        let _ = self.out.flush();
    }

    fn campaign_start(&mut self, seed: u64, periods: u32) {
        let _ = writeln!(self.out, "[START] campaign seed={seed} periods={periods}");
    }

    fn period_start(&mut self, period: u32) {
        let _ = writeln!(self.out, "[STEP] period={period} phase=start");
    }

    fn role_done(&mut self, period: u32, role: &str, findings: usize) {
        let _ = writeln!(
            self.out,
            "[STEP] period={period} role={role} findings={findings}"
        );
    }

    fn review_done(&mut self, period: u32, decisions: usize) {
        let _ = writeln!(
            self.out,
            "[STEP] period={period} phase=overseer_review decisions={decisions}"
        );
    }

    fn campaign_end(&mut self, r: &AuditCampaignRecord) {
        let _ = writeln!(
            self.out,
            "[END] campaign_id={} periods={} success={}",
            one_line(&r.campaign_id),
            r.periods,
            r.completed
        );
        let _ = self.out.flush();
    }
}
