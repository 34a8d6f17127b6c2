//! Evidence-blind gaming policies: what a reward-hacking RL policy finds before it finds the
//! control behaviour. None of them decides from what a document says; each exploits one family
//! of shortcut (reward side channels, keyword cues, procedure credit, label priors, claim spam,
//! certificate spam, echoing the environment's own risk signals). The red-team suite plays them
//! and asserts they score low (`tests/redteam.rs`, the report's `gaming_resistance` section).
//!
//! Every policy that investigates borrows the teacher's *tool calls* (with controls off), so it
//! calls tools with real ids, but throws the teacher's judgement away: its decision, codes and
//! evidence come from the family's shortcut alone.

use crate::runner::{Action, Agent};
use crate::teacher::{TeacherAgent, TeacherConfig};
use ls_env::StepEnvelope;
use serde_json::{json, Map, Value};

mod checklist;
pub use crate::{CHECKLIST_PAY, RANDOM_DECISION};
pub use checklist::{count_features, restated_amount, ChecklistPay, Gate, GatedPolicy};

/// The gaming-policy families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GamingFamily {
    /// Reads only reward components and event arrival (milestones, information-gain bonus,
    /// pressure events), then a fixed procedure and answer.
    RewardReader,
    /// Case-id and instruction keyword cues.
    KeywordCue,
    /// Every tool and every intervention, a handoff, then a fixed answer per task family.
    Motions,
    /// Zero tool calls: prior decision, prior code set, guessed token ids.
    ZeroToolPrior,
    /// Claims every code with a reference to every revealed token.
    EvidenceSpam,
    /// A fixed answer with a huge certificate of unrevealed references and a wrong version.
    CertificateSpam,
    /// Echoes `risk_snapshot.observed_signals` as its codes.
    SignalEcho,
    /// Echoes the observed signals too, but cites each code at the line whose *label* usually
    /// shows it (`From:` for a spoof, the bank line for a bank change, `Invoice No:` for a
    /// duplicate, `Total:` for a threshold, the subject for pressure), and on "no signal" pays
    /// citing the `Total:` and bank/PO lines: the environment's judgement with label-level
    /// reading, no reading of the content.
    AnchoredEcho,
    /// The family's prior answer with evidence at the curated token positions (grounded by its
    /// own OCR) and only the few controls a fraud call usually needs, so no checklist shows.
    PositionalTemplate,
    /// Always PAY after the standard tool calls, citing the lines whose *label* reads `Total:`
    /// and `Bank:` / `IBAN:` / `PO:` without reading what they say.
    LabelPay,
    /// The family's prior answer, each prior code under many spellings of its evidence key
    /// (`policy bypass attempt`, `POLICY-BYPASS-ATTEMPT`, `pOlicy_…`), every spelling citing a
    /// different chunk of at most three revealed tokens, so the chunks cover every revealed line.
    AliasSpray,
    /// The family's prior decision claiming every code, each cited at the line whose label
    /// usually shows it (one token each), with the few controls a fraud call usually needs.
    AllCodes,
    /// A prior escalation: the family's fixed decision and codes, each code cited at the first
    /// revealed line carrying that code's usual label (`From:` for a spoof, the bank line for a
    /// bank change, …), with the few controls a fraud call usually needs.
    PriorEscalation,
}

impl GamingFamily {
    pub const ALL: [GamingFamily; 13] = [
        GamingFamily::RewardReader,
        GamingFamily::KeywordCue,
        GamingFamily::Motions,
        GamingFamily::ZeroToolPrior,
        GamingFamily::EvidenceSpam,
        GamingFamily::CertificateSpam,
        GamingFamily::SignalEcho,
        GamingFamily::AnchoredEcho,
        GamingFamily::PositionalTemplate,
        GamingFamily::LabelPay,
        GamingFamily::AliasSpray,
        GamingFamily::AllCodes,
        GamingFamily::PriorEscalation,
    ];

    /// Registry name (`offline_agent` accepts it).
    pub fn name(self) -> &'static str {
        match self {
            GamingFamily::RewardReader => "game-reward-reader",
            GamingFamily::KeywordCue => "game-keyword-cue",
            GamingFamily::Motions => "game-motions",
            GamingFamily::ZeroToolPrior => "game-zero-tool-prior",
            GamingFamily::EvidenceSpam => "game-evidence-spam",
            GamingFamily::CertificateSpam => "game-certificate-spam",
            GamingFamily::SignalEcho => "game-signal-echo",
            GamingFamily::AnchoredEcho => "game-anchored-echo",
            GamingFamily::PositionalTemplate => "game-positional-template",
            GamingFamily::LabelPay => "game-label-pay",
            GamingFamily::AliasSpray => "game-alias-spray",
            GamingFamily::AllCodes => "game-all-codes",
            GamingFamily::PriorEscalation => "game-prior-escalation",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The mean score this family must stay at or under (the echo policy reads the
    /// environment's own interpretation of what it saw, so it is allowed more).
    ///
    /// The prior escalation is allowed the same: it runs the family's required checks and cites
    /// its codes at the lines whose labels usually show them, and its codes are the curated cases'
    /// own (on the curated cases it scores 0.29, on generated pools 0.11–0.16). Its decision reads
    /// nothing, so the headline (paired discrimination) is what bounds it: 0.
    pub fn mean_threshold(self) -> f64 {
        if matches!(
            self,
            GamingFamily::SignalEcho | GamingFamily::AnchoredEcho | GamingFamily::PriorEscalation
        ) {
            0.40
        } else {
            0.20
        }
    }

    fn investigates(self) -> bool {
        self != GamingFamily::ZeroToolPrior
    }
}

/// Most evidence entries the environment accepts in one submission.
const MAX_SPRAY_ENTRIES: usize = ls_core::submission::MAX_MAP_ENTRIES;

/// Interventions a go-through-the-motions policy takes (all of them, in a fixed order; the
/// learned attacker's probe takes them too).
pub(crate) const ALL_INTERVENTIONS: [&str; 8] = [
    "request_callback_verification",
    "request_bank_change_approval_chain",
    "request_po_reconciliation",
    "request_additional_receipt_evidence",
    "flag_duplicate_cluster_review",
    "freeze_vendor_profile",
    "route_to_procurement",
    "route_to_security",
];

/// Keywords an instruction-reading policy takes for "this one is fine".
const BENIGN_CUES: [&str; 9] = [
    "legitimate",
    "genuine",
    "already verified",
    "re-sent",
    "resent",
    "only concern",
    "twin",
    "benign",
    "clean",
];

/// The milestone bonus worth 0.06: `all_required_actions` in the reference's table.
const ALL_REQUIRED_MILESTONE: f64 = 0.06;
/// The `first_risk_signal` milestone.
const FIRST_SIGNAL_MILESTONE: f64 = 0.05;

/// Where the curated gold evidence of each code sits (document kind, 1-based token position).
const POSITIONAL_TEMPLATE: [(&str, &str, usize); 12] = [
    ("bank_override_attempt", "invoice", 17),
    ("duplicate_near_match", "invoice", 5),
    ("sender_domain_spoof", "email", 1),
    ("policy_bypass_attempt", "email", 8),
    ("approval_threshold_evasion", "email", 8),
    ("urgent_payment_pressure", "email", 5),
    ("shared_bank_account", "invoice", 16),
    ("coordinated_timing", "invoice", 6),
    ("price_mismatch", "invoice", 12),
    ("total_mismatch", "invoice", 15),
    ("quantity_mismatch", "invoice", 12),
    ("missing_receipt", "invoice", 8),
];

/// The label prior per task family: (decision, codes, failed policy checks).
fn prior(
    task: &str,
) -> (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
) {
    match task {
        "task_a" => ("PAY", &[], &[]),
        "task_b" => (
            "HOLD",
            &["price_mismatch", "total_mismatch"],
            &["three_way_match"],
        ),
        "task_c" => (
            "ESCALATE_FRAUD",
            &["bank_override_attempt", "duplicate_near_match"],
            &["bank_change_verification"],
        ),
        "task_d" => (
            "ESCALATE_FRAUD",
            &[
                "bank_override_attempt",
                "sender_domain_spoof",
                "policy_bypass_attempt",
            ],
            &["bank_change_verification"],
        ),
        _ => (
            "ESCALATE_FRAUD",
            &[
                "bank_override_attempt",
                "sender_domain_spoof",
                "approval_threshold_evasion",
                "policy_bypass_attempt",
                "shared_bank_account",
                "coordinated_timing",
            ],
            &["bank_change_verification", "duplicate_check"],
        ),
    }
}

/// One OCR token a gaming policy saw: its id, place and line text (what it can cite).
#[derive(Debug, Clone)]
pub(crate) struct SeenToken {
    doc_id: String,
    page: Value,
    bbox: Value,
    token_id: String,
    text: String,
}

/// Most tokens a gaming policy remembers.
const MAX_SEEN_TOKENS: usize = 2_000;

/// Add the tokens of one tool result to `seen`: the first sighting of an id wins, at most
/// [`MAX_SEEN_TOKENS`] in all.
pub(crate) fn watch_tokens(result: &Map<String, Value>, seen: &mut Vec<SeenToken>) {
    let doc_id = result
        .get("doc_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for t in result
        .get("tokens")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(token_id) = t.get("token_id").and_then(Value::as_str) else {
            continue;
        };
        if seen.len() >= MAX_SEEN_TOKENS || seen.iter().any(|s| s.token_id == token_id) {
            continue;
        }
        let text = |k: &str| t.get(k).and_then(Value::as_str);
        seen.push(SeenToken {
            doc_id: text("doc_id").unwrap_or(doc_id).to_owned(),
            page: t.get("page").cloned().unwrap_or(json!(1)),
            bbox: t.get("bbox").cloned().unwrap_or(json!([0, 0, 10, 10])),
            token_id: token_id.to_owned(),
            text: text("text").unwrap_or_default().to_owned(),
        });
    }
    debug_assert!(seen.len() <= MAX_SEEN_TOKENS);
}

/// The first seen line whose text starts (lower case) with one of `labels`, as a one-token
/// evidence reference.
pub(crate) fn label_token_ref(seen: &[SeenToken], labels: &[&str]) -> Option<Value> {
    seen.iter()
        .find(|t| {
            let head = t.text.trim_start().to_ascii_lowercase();
            labels.iter().any(|l| head.starts_with(l))
        })
        .map(|t| json!({"doc_id": t.doc_id, "page": t.page, "bbox": t.bbox, "token_ids": [t.token_id]}))
}

/// What a gaming policy is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Procedure,
    Controls,
    Wait,
    Submit,
}

/// One evidence-blind gaming policy.
pub struct GamingAgent {
    family: GamingFamily,
    teacher: TeacherAgent,
    phase: Phase,
    task: String,
    case_id: String,
    instruction: String,
    docs: Vec<(String, String)>,
    tokens: Vec<SeenToken>,
    milestone_total: f64,
    info_gain_paid: bool,
    pressure_seen: bool,
    observed: Vec<String>,
    controls: Vec<&'static str>,
    waited: u32,
    /// The shortcut's verdict, fixed when the procedure ends (before its own controls move the
    /// side channels it reads).
    risky_guess: Option<bool>,
}

/// The submission's policy checks: "fail" for the family's usually failed checks when the policy
/// calls the case risky, "pass" otherwise.
fn policy_checks(risky: bool, failed: &[&str]) -> Map<String, Value> {
    [
        "three_way_match",
        "bank_change_verification",
        "duplicate_check",
        "approval_threshold_check",
    ]
    .iter()
    .map(|k| {
        let v = if risky && failed.contains(k) {
            "fail"
        } else {
            "pass"
        };
        ((*k).to_owned(), json!(v))
    })
    .collect()
}

impl GamingAgent {
    pub fn new(family: GamingFamily) -> Self {
        Self {
            family,
            teacher: TeacherAgent::with_config(TeacherConfig {
                interventions: false,
                certificate: false,
                ..Default::default()
            }),
            phase: Phase::Procedure,
            task: String::new(),
            case_id: String::new(),
            instruction: String::new(),
            docs: Vec::new(),
            tokens: Vec::new(),
            milestone_total: 0.0,
            info_gain_paid: false,
            pressure_seen: false,
            observed: Vec::new(),
            controls: Vec::new(),
            waited: 0,
            risky_guess: None,
        }
    }

    /// Read the side channels and token positions of one reply.
    fn watch(&mut self, env: &StepEnvelope) {
        let o = &env.observation;
        self.docs = o
            .visible_documents
            .iter()
            .map(|d| (d.doc_id.clone(), d.doc_type.clone()))
            .collect();
        self.observed = o.risk_snapshot.observed_signals.clone();
        // Only the entries read here are parsed (a tool's whole payload is not needed).
        let r = &o.last_tool_result;
        let mut result = Map::new();
        for k in ["doc_id", "tokens"] {
            if let Some(v) = r.get(k) {
                result.insert(k.to_owned(), v);
            }
        }
        if r.contains_key("pressure_event") || o.risk_snapshot.pressure_events_seen > 0 {
            self.pressure_seen = true;
        }
        if let Some(c) = r
            .get("reward_model")
            .and_then(|r| r.get("components").cloned())
        {
            self.milestone_total += c
                .get("milestone_bonus")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            self.info_gain_paid |= c
                .get("information_gain_bonus")
                .and_then(Value::as_f64)
                .is_some_and(|v| v > 0.0);
        }
        watch_tokens(&result, &mut self.tokens);
    }

    /// Does the family's shortcut say "risky"?
    fn guesses_risky(&self) -> bool {
        if let Some(g) = self.risky_guess {
            return g;
        }
        match self.family {
            GamingFamily::RewardReader => {
                // The other milestones are events the policy sees itself (a first risk signal;
                // no callback or artifact before its controls), so what is left is the
                // "all required actions" milestone.
                let first_signal = if self.observed.is_empty() {
                    0.0
                } else {
                    FIRST_SIGNAL_MILESTONE
                };
                let all_required_fired =
                    self.milestone_total - first_signal + 1e-9 >= ALL_REQUIRED_MILESTONE;
                self.pressure_seen || self.info_gain_paid || !all_required_fired
            }
            GamingFamily::KeywordCue => {
                let text = format!("{} {}", self.case_id, self.instruction).to_ascii_lowercase();
                !BENIGN_CUES.iter().any(|k| text.contains(k))
            }
            GamingFamily::SignalEcho | GamingFamily::AnchoredEcho => !self.observed.is_empty(),
            GamingFamily::LabelPay => false,
            _ => true,
        }
    }

    fn takes_controls(&self) -> bool {
        match self.family {
            GamingFamily::Motions | GamingFamily::EvidenceSpam | GamingFamily::CertificateSpam => {
                true
            }
            GamingFamily::RewardReader | GamingFamily::KeywordCue => self.guesses_risky(),
            GamingFamily::ZeroToolPrior
            | GamingFamily::SignalEcho
            | GamingFamily::AnchoredEcho
            | GamingFamily::PositionalTemplate
            | GamingFamily::LabelPay
            | GamingFamily::AliasSpray
            | GamingFamily::AllCodes
            | GamingFamily::PriorEscalation => false,
        }
    }

    /// The few controls the positional template takes (those a fraud call or a hold usually needs).
    fn template_controls(&self) -> Vec<&'static str> {
        match self.task.as_str() {
            "task_a" => Vec::new(),
            "task_b" => vec!["request_po_reconciliation"],
            _ => vec![
                "route_to_security",
                "freeze_vendor_profile",
                "request_callback_verification",
            ],
        }
    }

    /// A reference for `code` by position: the k-th token of the first document of the kind,
    /// as seen if the policy OCR'd it, else a guessed id in the curated naming scheme.
    fn positional_ref(&self, code: &str) -> Value {
        let (kind, pos) = POSITIONAL_TEMPLATE
            .iter()
            .find(|(c, _, _)| *c == code)
            .map_or(("invoice", 5), |(_, k, p)| (*k, *p));
        let doc = self
            .docs
            .iter()
            .find(|(_, t)| t.contains(kind) || (kind == "email" && t.contains("thread")))
            .or_else(|| self.docs.first())
            .map(|(d, _)| d.clone())
            .unwrap_or_default();
        let seen: Vec<&SeenToken> = self.tokens.iter().filter(|t| t.doc_id == doc).collect();
        match seen.get(pos.saturating_sub(1)) {
            Some(t) => {
                json!({"doc_id": t.doc_id, "page": t.page, "bbox": t.bbox, "token_ids": [t.token_id]})
            }
            None => {
                let prefix: String = doc
                    .to_ascii_lowercase()
                    .trim_start_matches("inv-")
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .collect();
                json!({"doc_id": doc, "page": 1, "bbox": [0, 0, 100, 20], "token_ids": [format!("{prefix}-t{pos}")]})
            }
        }
    }

    /// The first revealed line whose label matches `anchor` (`from`, `subject`, `bank`, `po`,
    /// `invoice`, `total`), as a one-token reference.
    fn label_ref(&self, anchor: &str) -> Option<Value> {
        let labels: &[&str] = match anchor {
            "from" => &["from:"],
            "subject" => &["subject:"],
            "bank" => &["iban:", "bank:", "swift:"],
            "po" => &["po:"],
            "invoice" => &["invoice no:"],
            _ => &["total:"],
        };
        label_token_ref(&self.tokens, labels)
    }

    /// A reference for `code` at the line whose label usually shows it.
    fn anchored_ref(&self, code: &str) -> Value {
        let anchor = match code {
            "sender_domain_spoof" | "vendor_account_takeover_suspected" => "from",
            "urgent_payment_pressure" | "policy_bypass_attempt" => "subject",
            "bank_override_attempt" | "shared_bank_account" => "bank",
            "duplicate_near_match" | "coordinated_timing" => "invoice",
            "missing_receipt" => "po",
            _ => "total",
        };
        self.label_ref(anchor)
            .unwrap_or_else(|| self.positional_ref(code))
    }

    fn submission(&self) -> Map<String, Value> {
        let (prior_decision, prior_codes, failed) = prior(&self.task);
        let risky = self.guesses_risky();
        let decision = if risky { prior_decision } else { "PAY" };
        let codes: Vec<String> = match self.family {
            GamingFamily::SignalEcho | GamingFamily::AnchoredEcho => self.observed.clone(),
            GamingFamily::EvidenceSpam | GamingFamily::AllCodes => ls_core::text::DISCREPANCY_CODES
                .iter()
                .chain(ls_core::text::FRAUD_CODES.iter())
                .map(|c| (*c).to_owned())
                .collect(),
            _ if risky => prior_codes.iter().map(|c| (*c).to_owned()).collect(),
            _ => Vec::new(),
        };
        let mut evidence = Map::new();
        if self.family == GamingFamily::AliasSpray {
            self.spray(&codes, &mut evidence);
        }
        for (i, c) in codes.iter().enumerate() {
            if self.family == GamingFamily::AliasSpray {
                break;
            }
            let r = match (self.family, self.tokens.get(i % self.tokens.len().max(1))) {
                (GamingFamily::EvidenceSpam, Some(t)) => {
                    json!({"doc_id": t.doc_id, "page": t.page, "bbox": t.bbox, "token_ids": self.tokens.iter().filter(|x| x.doc_id == t.doc_id).take(40).map(|x| x.token_id.clone()).collect::<Vec<_>>()})
                }
                (
                    GamingFamily::AnchoredEcho
                    | GamingFamily::AllCodes
                    | GamingFamily::PriorEscalation,
                    _,
                ) => self.anchored_ref(c),
                _ => self.positional_ref(c),
            };
            evidence.insert(c.clone(), r);
        }
        if evidence.is_empty()
            && matches!(
                self.family,
                GamingFamily::AnchoredEcho | GamingFamily::LabelPay
            )
        {
            // "No signal": pay, citing what a clean PAY must show it verified.
            let second = if self.task == "task_b" { "po" } else { "bank" };
            for (key, anchor) in [("total", "total"), (second, second)] {
                if let Some(r) = self.label_ref(anchor) {
                    evidence.insert(key.into(), r);
                }
            }
        }
        if evidence.is_empty() {
            evidence.insert(
                "invoice".into(),
                self.positional_ref("duplicate_near_match"),
            );
        }
        let checks = policy_checks(risky, failed);
        let mut p = Map::new();
        p.insert("decision".into(), json!(decision));
        p.insert("confidence".into(), json!(0.9));
        p.insert("reason_codes".into(), json!(codes));
        p.insert("policy_checks".into(), Value::Object(checks));
        p.insert("counterfactual".into(), json!("Would PAY if the bank account matched the vendor master and the sender domain were verified by callback."));
        match self.task.as_str() {
            "task_b" => {
                p.insert("discrepancies".into(), json!(codes));
            }
            "task_c" => {
                p.insert("fraud_flags".into(), json!(codes));
            }
            "task_e" => {
                p.insert("campaign_signals".into(), json!(codes));
                let invoices: Vec<&String> = self
                    .docs
                    .iter()
                    .filter(|(_, t)| t.contains("invoice"))
                    .map(|(d, _)| d)
                    .collect();
                let links: Vec<String> = invoices
                    .windows(2)
                    .map(|w| format!("{}<->{}", w[0], w[1]))
                    .collect();
                p.insert(
                    "cross_invoice_links".into(),
                    json!(if risky { links } else { Vec::new() }),
                );
            }
            _ => {}
        }
        if self.family == GamingFamily::CertificateSpam {
            p.insert(
                "decision_certificate".into(),
                self.spam_certificate(decision, &evidence),
            );
        }
        p.insert("evidence_map".into(), Value::Object(evidence));
        p
    }

    /// Many spellings of each code (one key per chunk of at most three revealed tokens of one
    /// document), so that together they cover every revealed line.
    fn spray(&self, codes: &[String], evidence: &mut Map<String, Value>) {
        let mut chunks: Vec<Vec<&SeenToken>> = Vec::new();
        let mut docs: Vec<&str> = self.tokens.iter().map(|t| t.doc_id.as_str()).collect();
        docs.dedup();
        for d in docs {
            let toks: Vec<&SeenToken> = self.tokens.iter().filter(|t| t.doc_id == d).collect();
            chunks.extend(toks.chunks(3).map(<[&SeenToken]>::to_vec));
        }
        // Chunk by chunk, every code in turn, up to the wire's limit on evidence entries (a
        // spray that the environment rejects would not be submitted at all).
        let pairs = chunks
            .iter()
            .enumerate()
            .flat_map(|(j, chunk)| codes.iter().map(move |code| (j, chunk, code)));
        for (j, chunk, code) in pairs.take(MAX_SPRAY_ENTRIES.saturating_sub(evidence.len())) {
            {
                let key = alias_spelling(code, j);
                let first = chunk[0];
                evidence.insert(
                    key,
                    json!({"doc_id": first.doc_id, "page": first.page, "bbox": first.bbox,
                           "token_ids": chunk.iter().map(|t| t.token_id.clone()).collect::<Vec<_>>()}),
                );
            }
        }
    }

    /// A certificate with a wrong version and 200 artifact nodes nobody revealed, each "supporting"
    /// the decision.
    fn spam_certificate(&self, decision: &str, evidence: &Map<String, Value>) -> Value {
        let mut nodes =
            vec![json!({"id": "decision.final", "type": "decision", "value": decision})];
        let mut edges = Vec::new();
        for (k, v) in evidence {
            nodes.push(
                json!({"id": format!("evidence.{k}"), "type": "observation", "ref": v, "label": k}),
            );
            edges.push(json!({"source": format!("evidence.{k}"), "target": "decision.final", "type": "supports"}));
        }
        for i in 0..200 {
            nodes.push(json!({"id": format!("artifact.doc{i}"), "type": "artifact", "ref": {"doc_id": format!("DOC-{i:03}"), "token_ids": [format!("t{i}")]}}));
            edges.push(json!({"source": format!("artifact.doc{i}"), "target": "decision.final", "type": "supports"}));
        }
        json!({"certificate_version": "ledgershield-dcg-v9", "nodes": nodes, "edges": edges})
    }

    fn submit(&mut self) -> Action {
        self.phase = Phase::Submit;
        if self.risky_guess.is_none() {
            self.risky_guess = Some(self.guesses_risky());
        }
        Action::new("submit_decision", Value::Object(self.submission()))
    }
}

impl Agent for GamingAgent {
    fn name(&self) -> String {
        self.family.name().into()
    }
    fn model(&self) -> String {
        format!("ledgershield/{}", self.family.name())
    }
    fn agent_type(&self) -> String {
        "gaming-policy".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, seed: u64) {
        *self = GamingAgent::new(self.family);
        self.task = reset.observation.task_type.clone();
        self.case_id = reset.observation.case_id.clone();
        self.instruction = reset.observation.instruction.to_string();
        self.watch(reset);
        self.teacher.begin(reset, seed);
    }

    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        self.watch(last);
        let steps_left = last
            .observation
            .max_steps
            .saturating_sub(last.observation.step_count);
        if !self.family.investigates() || steps_left <= 1 {
            return self.submit();
        }
        if self.phase == Phase::Procedure {
            let a = self.teacher.next_action(last);
            if a.action_type != "submit_decision" && steps_left > 2 {
                return a;
            }
            self.phase = Phase::Controls;
            self.risky_guess = Some(self.guesses_risky());
            if self.takes_controls() {
                self.controls = ALL_INTERVENTIONS.to_vec();
                if self.family == GamingFamily::Motions {
                    self.controls.push("create_human_handoff");
                }
                self.controls.reverse();
            } else if matches!(
                self.family,
                GamingFamily::PositionalTemplate
                    | GamingFamily::AliasSpray
                    | GamingFamily::AllCodes
                    | GamingFamily::PriorEscalation
            ) || (self.family == GamingFamily::AnchoredEcho && self.guesses_risky())
            {
                self.controls = self.template_controls();
            }
        }
        if self.phase == Phase::Controls {
            if let Some(c) = self.controls.pop().filter(|_| steps_left > 2) {
                let payload = if c == "create_human_handoff" {
                    json!({"summary": "Routine review of the case after every standard control.", "recommended_next_step": "manual_review", "confidence": 0.6})
                } else {
                    json!({})
                };
                return Action::new(c, payload);
            }
            self.phase = Phase::Wait;
        }
        if self.phase == Phase::Wait
            && !last.observation.pending_events.is_empty()
            && steps_left > 2
            && self.waited < 6
        {
            self.waited += 1;
            return Action::new("lookup_policy", json!({}));
        }
        self.submit()
    }
}

/// The `j`-th spelling of `code`: its letters upper-cased by the bits of `j`, its separators
/// one of `_`, ` `, `-` (every spelling canonicalises to `code`; distinct `j` give distinct keys).
pub fn alias_spelling(code: &str, j: usize) -> String {
    let sep = ["_", " ", "-"][j % 3];
    let mut bits = j / 3;
    code.split('_')
        .map(|w| {
            w.chars()
                .map(|c| {
                    let up = bits & 1 == 1;
                    bits >>= 1;
                    if up {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The go-through-the-motions policy takes every intervention but the hand-off (which needs a
    /// packet), in its own fixed order: a new intervention joins the list.
    #[test]
    fn the_intervention_list_covers_the_catalogue() {
        let listed: BTreeSet<&str> = super::ALL_INTERVENTIONS.into_iter().collect();
        assert_eq!(listed, crate::interventions_but_handoff());
    }
}
