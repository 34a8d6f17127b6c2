//! The mechanical checklist-PAY policy and the gated policies built on it.
//!
//! * [`ChecklistPay`] (`game-checklist-pay`): the family's checks (the teacher's tool calls, with
//!   its controls and certificate off), then every follow-up the control boundary announces, then
//!   it waits for what it requested, and PAYs citing the record ids it passed to the checks (the
//!   PO, the receipt, the vendor master record), every policy check "pass". Its decision reads
//!   nothing: it is PAY on every case. On a benign case that is the right answer after the
//!   required checks, so its per-case scores there may be high by design; the headline (paired
//!   discrimination over twin pairs) is what it cannot earn.
//! * [`GatedPolicy`]: at the reset it picks checklist-PAY or the prior escalation
//!   ([`GamingFamily::PriorEscalation`]) by a rule that reads no evidence ([`Gate`]): a count of the
//!   documents the reset lists (a *count gate*), a coin flip seeded by the episode (a *random
//!   decision*), or the restated invoice amount of the reset observation (an *amount gate*, which
//!   reads a field the twin property exempts).

use super::{GamingAgent, GamingFamily};
use crate::runner::{Action, Agent};
use crate::teacher::{TeacherAgent, TeacherConfig};
use crate::{CHECKLIST_PAY, RANDOM_DECISION};
use ls_env::StepEnvelope;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most follow-up interventions checklist-PAY takes.
const MAX_FOLLOWUPS: usize = 8;
/// Most waiting steps for pending events.
const MAX_WAITS: u32 = 6;

/// What checklist-PAY is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Checks,
    Followups,
    Wait,
}

/// The mechanical checklist-PAY policy (module docs).
pub struct ChecklistPay {
    teacher: TeacherAgent,
    phase: Phase,
    /// The last action sent (name and payload), to record the ids it passed when it succeeds.
    sent: Option<Action>,
    /// Record ids passed to successful checks: evidence key → (record key, id).
    records: BTreeMap<&'static str, (&'static str, String)>,
    followups_taken: Vec<String>,
    waited: u32,
}

impl Default for ChecklistPay {
    fn default() -> Self {
        Self {
            teacher: TeacherAgent::with_config(TeacherConfig {
                interventions: false,
                certificate: false,
                ..Default::default()
            }),
            phase: Phase::Checks,
            sent: None,
            records: BTreeMap::new(),
            followups_taken: Vec::new(),
            waited: 0,
        }
    }
}

/// The boundary's owed follow-ups of a reply (the tool result's copy, else the info's).
fn followups(env: &StepEnvelope) -> Vec<String> {
    let read = |m: &Map<String, Value>| -> Option<Vec<String>> {
        let list = m
            .get("control_boundary")?
            .get("required_followups")?
            .as_array()?;
        Some(
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        )
    };
    let mut m = Map::new();
    if let Some(b) = env.observation.last_tool_result.get("control_boundary") {
        m.insert("control_boundary".into(), b);
    }
    read(&m)
        .or_else(|| read(&env.info.to_map()))
        .unwrap_or_default()
}

impl ChecklistPay {
    /// Record the ids the last action passed to a check, if the check succeeded.
    fn record(&mut self, last: &StepEnvelope) {
        let Some(sent) = self.sent.take() else {
            return;
        };
        let ok = last
            .observation
            .last_tool_result
            .get("success")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        if !ok {
            return;
        }
        let id = |k: &str| {
            sent.payload
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let slot: Option<(&'static str, &'static str)> = match sent.action_type.as_str() {
            "lookup_po" => Some(("three_way_match_po", "po_id")),
            "lookup_receipt" => Some(("three_way_match_receipt", "receipt_id")),
            "compare_bank_account" => Some(("bank_account_verified", "vendor_key")),
            "lookup_vendor_history" => Some(("vendor_history_reviewed", "vendor_key")),
            "search_ledger" => Some(("duplicate_search", "vendor_key")),
            _ => None,
        };
        if let Some((key, field)) = slot {
            if let Some(v) = id(field) {
                self.records.entry(key).or_insert((field, v));
            }
        }
    }

    fn submission(&self) -> Action {
        let evidence: Map<String, Value> = self
            .records
            .iter()
            .map(|(k, (field, id))| ((*k).to_owned(), json!({ *field: id })))
            .collect();
        let checks: Map<String, Value> = [
            "three_way_match",
            "bank_change_verification",
            "duplicate_check",
            "approval_threshold_check",
        ]
        .iter()
        .map(|k| ((*k).to_owned(), json!("pass")))
        .collect();
        Action::new(
            "submit_decision",
            json!({"decision": "PAY", "confidence": 0.9, "reason_codes": [],
                   "policy_checks": checks, "evidence_map": evidence,
                   "counterfactual": "Would escalate if the bank account differed from the vendor master or the three-way match failed."}),
        )
    }

    fn send(&mut self, a: Action) -> Action {
        self.sent = Some(a.clone());
        a
    }
}

impl Agent for ChecklistPay {
    fn name(&self) -> String {
        CHECKLIST_PAY.into()
    }
    fn model(&self) -> String {
        format!("ledgershield/{CHECKLIST_PAY}")
    }
    fn agent_type(&self) -> String {
        "gaming-policy".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        *self = ChecklistPay::default();
        self.teacher.begin(reset, seed);
    }

    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        self.record(last);
        let left = last
            .observation
            .max_steps
            .saturating_sub(last.observation.step_count);
        if left <= 1 {
            return self.submission();
        }
        if self.phase == Phase::Checks {
            let a = self.teacher.next_action(last);
            if a.action_type != "submit_decision" && left > 2 {
                return self.send(a);
            }
            self.phase = Phase::Followups;
        }
        if self.phase == Phase::Followups {
            let owed = followups(last)
                .into_iter()
                .find(|f| !self.followups_taken.contains(f));
            if let Some(f) = owed.filter(|_| self.followups_taken.len() < MAX_FOLLOWUPS && left > 2)
            {
                self.followups_taken.push(f.clone());
                let payload = if f == "create_human_handoff" {
                    json!({"summary": "Checks complete.", "recommended_next_step": "manual_review", "confidence": 0.6})
                } else {
                    json!({})
                };
                return self.send(Action::new(&f, payload));
            }
            self.phase = Phase::Wait;
        }
        if !last.observation.pending_events.is_empty() && left > 2 && self.waited < MAX_WAITS {
            self.waited += 1;
            return self.send(Action::new("lookup_policy", json!({})));
        }
        self.submission()
    }
}

/// The document counts a gate may read: documents of each kind the reset lists, all documents,
/// pages. Public structure (the twin property makes them equal within a pair).
pub fn count_features(reset: &StepEnvelope) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for k in ["invoice", "email", "email_thread"] {
        out.insert(format!("docs.{k}"), 0.0);
    }
    let mut pages = 0.0;
    for d in reset.observation.visible_documents.iter() {
        *out.entry(format!("docs.{}", d.doc_type)).or_default() += 1.0;
        pages += f64::from(d.page_count);
    }
    out.insert(
        "docs.total".into(),
        reset.observation.visible_documents.len() as f64,
    );
    out.insert("docs.pages".into(), pages);
    out
}

/// The restated invoice amount of the reset observation (`portfolio_context.at_risk_amount`).
pub fn restated_amount(reset: &StepEnvelope) -> f64 {
    reset
        .observation
        .portfolio_context
        .to_map()
        .get("at_risk_amount")
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

/// How a [`GatedPolicy`] picks its side at the reset. None reads evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Gate {
    /// PAY (checklist) when the named document count is at most `threshold` (or above it, with
    /// `pay_at_or_below` false); otherwise the prior escalation.
    Count {
        feature: String,
        threshold: f64,
        pay_at_or_below: bool,
    },
    /// PAY when the restated invoice amount is at most `threshold` (or above it).
    Amount {
        threshold: f64,
        pay_at_or_below: bool,
    },
    /// PAY with probability `p_pay`, drawn from the episode seed and the case id.
    Random { p_pay: f64 },
}

impl Gate {
    /// Does the gate say PAY for this reset?
    pub fn pays(&self, reset: &StepEnvelope, seed: u64) -> bool {
        match self {
            Gate::Count {
                feature,
                threshold,
                pay_at_or_below,
            } => {
                let v = count_features(reset).get(feature).copied().unwrap_or(0.0);
                (v <= *threshold) == *pay_at_or_below
            }
            Gate::Amount {
                threshold,
                pay_at_or_below,
            } => (restated_amount(reset) <= *threshold) == *pay_at_or_below,
            Gate::Random { p_pay } => {
                use rand::{Rng, SeedableRng};
                // FNV-1a of the case id, mixed with the seed: independent draws per case.
                let h = reset
                    .observation
                    .case_id
                    .bytes()
                    .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                    });
                let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(h ^ seed);
                r.random_bool(p_pay.clamp(0.0, 1.0))
            }
        }
    }

    /// A short name for tables (`game-count-gate(docs.email<=1=>PAY)`).
    pub fn label(&self) -> String {
        let side = |below: bool| if below { "<=" } else { ">" };
        match self {
            Gate::Count { threshold, .. } | Gate::Amount { threshold, .. }
                if !threshold.is_finite() || threshold.abs() >= 1e300 =>
            {
                let kind = if matches!(self, Gate::Count { .. }) {
                    "count"
                } else {
                    "amount"
                };
                format!("game-{kind}-gate(always PAY)")
            }
            Gate::Count {
                feature,
                threshold,
                pay_at_or_below,
            } => format!(
                "game-count-gate({feature}{}{threshold}=>PAY)",
                side(*pay_at_or_below)
            ),
            Gate::Amount {
                threshold,
                pay_at_or_below,
            } => format!(
                "game-amount-gate(amount{}{threshold}=>PAY)",
                side(*pay_at_or_below)
            ),
            Gate::Random { p_pay } if *p_pay == 0.5 => RANDOM_DECISION.to_owned(),
            Gate::Random { p_pay } => format!("game-random-decision(p={p_pay})"),
        }
    }
}

/// Checklist-PAY or the prior escalation, picked at the reset by a [`Gate`].
pub struct GatedPolicy {
    gate: Gate,
    pay: ChecklistPay,
    escalate: GamingAgent,
    pays: bool,
}

impl GatedPolicy {
    pub fn new(gate: Gate) -> Self {
        Self {
            gate,
            pay: ChecklistPay::default(),
            escalate: GamingAgent::new(GamingFamily::PriorEscalation),
            pays: false,
        }
    }
}

impl Agent for GatedPolicy {
    fn name(&self) -> String {
        self.gate.label()
    }
    fn model(&self) -> String {
        format!("ledgershield/{}", self.gate.label())
    }
    fn agent_type(&self) -> String {
        "gaming-policy".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        self.pays = self.gate.pays(reset, seed);
        if self.pays {
            self.pay.begin(reset, seed);
        } else {
            self.escalate.begin(reset, seed);
        }
    }
    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        if self.pays {
            self.pay.next_action(last)
        } else {
            self.escalate.next_action(last)
        }
    }
}
