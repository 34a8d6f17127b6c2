//! Untrained baselines: seeded random, naive PAY, always ESCALATE_FRAUD.

use crate::runner::{Action, Agent};
use ls_env::StepEnvelope;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

const DECISIONS: [&str; 4] = ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"];
const TOOLS: [&str; 6] = [
    "ocr",
    "zoom",
    "lookup_policy",
    "search_ledger",
    "lookup_vendor",
    "compare_bank_account",
];

/// Seeded random policy: a few random investigation steps on visible documents, then a uniformly
/// random decision with a random confidence. The same seed and case give the same episode.
pub struct RandomAgent {
    rng: ChaCha8Rng,
    planned_tools: u32,
    taken: u32,
}

impl Default for RandomAgent {
    fn default() -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(0),
            planned_tools: 0,
            taken: 0,
        }
    }
}

impl Agent for RandomAgent {
    fn name(&self) -> String {
        "random".into()
    }
    fn model(&self) -> String {
        "ledgershield/random-baseline".into()
    }
    fn agent_type(&self) -> String {
        "random-policy".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in reset.observation.case_id.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.rng = ChaCha8Rng::seed_from_u64(seed ^ h);
        self.planned_tools = self.rng.random_range(0..=3);
        self.taken = 0;
    }
    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        let o = &last.observation;
        let steps_left = o.max_steps.saturating_sub(o.step_count);
        if self.taken < self.planned_tools && steps_left > 1 {
            self.taken += 1;
            let doc = o
                .visible_documents
                .get(self.rng.random_range(0..o.visible_documents.len().max(1)))
                .map(|d| d.doc_id.clone())
                .unwrap_or_default();
            let tool = TOOLS[self.rng.random_range(0..TOOLS.len())];
            let payload = match tool {
                "ocr" => json!({"doc_id": doc, "mode": "fast"}),
                "zoom" => json!({"doc_id": doc}),
                "lookup_policy" => json!({}),
                "search_ledger" => json!({"amount": self.rng.random_range(100..10_000)}),
                _ => json!({"vendor_key": "unknown-vendor", "proposed_bank_account": "0000"}),
            };
            return Action::new(tool, payload);
        }
        let decision = DECISIONS[self.rng.random_range(0..DECISIONS.len())];
        let confidence = ls_core::text::round_dp(self.rng.random_range(0.25..0.95_f64), 3);
        Action::new(
            "submit_decision",
            json!({"decision": decision, "confidence": confidence, "reason_codes": ["random_untrained_policy"]}),
        )
    }
}

/// A deterministic baseline that submits one fixed decision at once, without investigating.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedDecisionAgent {
    name: &'static str,
    decision: &'static str,
    confidence: f64,
    reason_code: &'static str,
}

impl FixedDecisionAgent {
    /// `naive-pay`: submits PAY (confidence 0.5).
    pub const NAIVE_PAY: Self = Self {
        name: "naive-pay",
        decision: "PAY",
        confidence: 0.5,
        reason_code: "naive_untrained_release",
    };
    /// `always-escalate`: submits ESCALATE_FRAUD (confidence 0.72).
    pub const ALWAYS_ESCALATE: Self = Self {
        name: "always-escalate",
        decision: "ESCALATE_FRAUD",
        confidence: 0.72,
        reason_code: "always_escalate_policy",
    };
}

impl Agent for FixedDecisionAgent {
    fn name(&self) -> String {
        self.name.into()
    }
    fn model(&self) -> String {
        format!("ledgershield/{}-baseline", self.name)
    }
    fn agent_type(&self) -> String {
        "deterministic-policy".into()
    }
    fn begin(&mut self, _reset: &StepEnvelope, _seed: u64) {}
    fn next_action(&mut self, _last: &StepEnvelope) -> Action {
        Action::new(
            "submit_decision",
            json!({"decision": self.decision, "confidence": self.confidence, "reason_codes": [self.reason_code]}),
        )
    }
}
