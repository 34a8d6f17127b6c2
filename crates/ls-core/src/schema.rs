//! The fixture schema: cases, documents, OCR tokens, gold labels and the AP master data the tools
//! read (vendors, vendor history, POs, receipts, ledger, email threads, policies).
//!
//! Field names follow the public documentation. Amounts are `Decimal`; in JSON they may be written
//! as strings (`"1201.90"`, preferred: exact) or numbers. `docs/fixtures.md` documents every field.

use crate::enums::{Decision, TaskType};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn default_budget() -> Decimal {
    Decimal::from(15)
}
fn default_max_steps() -> u32 {
    20
}
fn default_page() -> u32 {
    1
}
fn default_page_count() -> u32 {
    1
}
fn default_language() -> String {
    "en".to_owned()
}
fn default_split() -> String {
    "benchmark".to_owned()
}
fn is_false(b: &bool) -> bool {
    !*b
}

/// Decimal amounts: written as JSON **numbers** with their exact decimal text (`2478.00`, the
/// reference sends numbers), through `serde_json`'s raw-value protocol (which `ls-json` also
/// speaks); read from numbers or strings. A number read from JSON text keeps its exact text
/// (trailing zeros included), so a case written and read back is the same case.
pub mod money {
    use rust_decimal::Decimal;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use serde_json::value::RawValue;

    pub fn serialize<S: Serializer>(value: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        super::money_number::serialize(value, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        // The raw JSON text of the value: a number's own digits, not an f64's.
        let raw = Box::<RawValue>::deserialize(d)?;
        let text = raw.get().trim();
        let parsed = if text.starts_with('"') {
            serde_json::from_str::<String>(text)
                .ok()
                .and_then(|s| crate::text::parse_decimal(&s))
        } else {
            crate::text::parse_decimal(text)
        };
        parsed.ok_or_else(|| D::Error::custom(format!("expected a decimal amount, got {text:.64}")))
    }
}

/// A decimal amount written as a JSON **number** with its exact decimal text (`2478.00`), through
/// `serde_json`'s raw-value protocol (which `ls-json` also speaks): money on the wire where the
/// reference sends a number. Serialize-only; [`money`] reads numbers and strings.
pub mod money_number {
    use rust_decimal::Decimal;
    use serde::{ser::Error, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        serde_json::value::RawValue::from_string(value.to_string())
            .map_err(S::Error::custom)?
            .serialize(s)
    }

    /// An optional amount: a number, or `null`.
    pub fn serialize_opt<S: Serializer>(value: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => serialize(v, s),
            None => s.serialize_none(),
        }
    }
}

/// Optional decimal amounts (see [`money`]).
pub mod money_opt {
    use rust_decimal::Decimal;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => super::money::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        #[derive(Deserialize)]
        #[serde(transparent)]
        struct Amount(#[serde(with = "super::money")] Decimal);
        Ok(Option::<Amount>::deserialize(d)?.map(|a| a.0))
    }
}

/// Case difficulty.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Difficulty {
    Easy,
    #[default]
    Medium,
    Hard,
    Expert,
}

impl Difficulty {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Easy => "easy",
            Self::Medium => "medium",
            Self::Hard => "hard",
            Self::Expert => "expert",
        }
    }
    /// Default due-date horizon in days when a case does not set one.
    pub fn default_due_date_days(self) -> u32 {
        match self {
            Self::Easy => 3,
            Self::Hard | Self::Expert => 30,
            Self::Medium => 14,
        }
    }
}

/// One curated or generated case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub case_id: String,
    pub task_type: TaskType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_label: Option<String>,
    pub instruction: String,
    #[serde(default)]
    pub difficulty: Difficulty,
    /// Scenario theme (one line, shown in `cases list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
    #[serde(default = "default_budget", with = "money")]
    #[schemars(with = "f64")]
    pub budget_total: Decimal,
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_date_days: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_visible_doc_ids: Option<Vec<String>>,
    pub documents: Vec<Document>,
    pub gold: Gold,
    /// Fixed pressure-event key (`cfo_urgent_message`, `second_spoofed_email`, `it_system_alert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign_context: Option<CampaignContext>,
    #[serde(default = "default_split")]
    pub benchmark_split: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contrastive_pair_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contrastive_role: Option<String>,
    /// Per-case replacements for the shared AP master data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_overrides: Option<ContextOverrides>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_metadata: Option<GeneratorMetadata>,
    /// World facts the simulator needs that no document states (what the vendor says on a call).
    #[serde(default)]
    pub simulation: CaseSimulation,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub official_tracks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_track: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latent_mechanism: BTreeMap<String, String>,
    /// ControlBench sequence metadata (sequence index, sleeper phase, ...) of a generated
    /// quarter's case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlbench: Option<ControlbenchMeta>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub certificate_required: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub human_baseline_case: bool,
}

impl Case {
    /// Fill the official tracks and the primary track of a case that names none (the curated
    /// fixtures), by task family as the reference's contract does: Task D and E cases are on the
    /// case, portfolio and adversarial tracks, with primary track `portfolio` for Task E and
    /// `adversarial` for Task D; other tasks are on the case track. Nothing per label: the
    /// reference makes a Task D case `adversarial` only when it is unsafe to pay, which would
    /// announce the gold decision in the case metadata (decision 10), so every Task D case is.
    pub fn fill_default_tracks(&mut self) {
        if !self.official_tracks.is_empty() || self.primary_track.is_some() {
            return;
        }
        let (tracks, primary): (&[&str], &str) = match self.task_type {
            TaskType::TaskE => (&["case", "portfolio", "adversarial"], "portfolio"),
            TaskType::TaskD => (&["case", "portfolio", "adversarial"], "adversarial"),
            _ => (&["case"], "case"),
        };
        self.official_tracks = tracks.iter().map(|t| (*t).to_owned()).collect();
        if self.certificate_required {
            self.official_tracks.push("certificate_required".to_owned());
        }
        self.primary_track = Some(primary.to_owned());
    }

    pub fn task_label(&self) -> &str {
        self.task_label
            .as_deref()
            .unwrap_or(self.task_type.default_label())
    }

    pub fn due_date_days(&self) -> u32 {
        self.due_date_days
            .unwrap_or(self.difficulty.default_due_date_days())
    }

    pub fn document(&self, doc_id: &str) -> Option<&Document> {
        self.documents.iter().find(|d| d.doc_id == doc_id)
    }

    /// Invoice documents in case order.
    pub fn invoices(&self) -> impl Iterator<Item = &Document> {
        self.documents.iter().filter(|d| d.doc_type == "invoice")
    }

    /// Case seed: sum of the case id's character codes plus `max_steps`.
    pub fn case_seed(&self) -> u64 {
        let base: u64 = self.case_id.chars().map(|c| c as u64).sum();
        base + u64::from(self.max_steps)
    }

    /// Generator seed for OCR noise and phantom ledger hits (0 for curated cases).
    pub fn generator_seed(&self) -> u64 {
        self.generator_metadata.as_ref().map_or(0, |g| g.seed)
    }
}

/// A document shown to the agent as a catalogue entry; its text is only reachable through tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Document {
    pub doc_id: String,
    pub doc_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thumbnail: Option<String>,
    #[serde(default = "default_page_count")]
    pub page_count: u32,
    #[serde(default = "default_language")]
    pub language: String,
    #[serde(default)]
    pub visual_tokens: Vec<String>,
    pub accurate_ocr: Vec<Token>,
    #[serde(default)]
    pub noisy_ocr: Vec<Token>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_data: Option<EmailThread>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crop_text_hint: Vec<String>,
}

impl Document {
    pub fn thumbnail(&self) -> String {
        self.thumbnail
            .clone()
            .unwrap_or_else(|| format!("thumbnail::{}", self.doc_id))
    }

    /// First accurate token whose text starts with `prefix` (case-insensitive), e.g. `"Total:"`.
    pub fn line_with_prefix(&self, prefix: &str) -> Option<&Token> {
        // ASCII case-insensitive prefix test without lowercasing a copy of every token.
        let p = prefix.as_bytes();
        self.accurate_ocr.iter().find(|t| {
            t.text
                .trim_start()
                .as_bytes()
                .get(..p.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(p))
        })
    }

    /// Value after the first colon of the line starting with `prefix`.
    pub fn field_value(&self, prefix: &str) -> Option<String> {
        let tok = self.line_with_prefix(prefix)?;
        tok.text.split_once(':').map(|(_, v)| v.trim().to_owned())
    }
}

/// One OCR line with its box. `bbox` is `[x1, y1, x2, y2]`, origin top-left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Token {
    pub token_id: String,
    pub text: String,
    pub bbox: [f64; 4],
    #[serde(default = "default_page")]
    pub page: u32,
}

/// Evidence reference: where in which document a claim is supported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceRef {
    pub doc_id: String,
    #[serde(default = "default_page")]
    pub page: u32,
    pub bbox: [f64; 4],
    #[serde(default)]
    pub token_ids: Vec<String>,
}

/// An invoice or PO line. Money is decimal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineItem {
    pub description: String,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub qty: Decimal,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub unit_price: Decimal,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub line_total: Decimal,
}

/// Hidden labels. Never shown to the agent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gold {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(default)]
    pub unsafe_if_pay: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fraud_flags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discrepancies: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub campaign_signals: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_checks: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicate_links: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_invoice_links: Vec<String>,
    /// Task A extraction targets: the ten field keys, values as printed (strings).
    #[serde(
        default,
        alias = "extracted_fields",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub fields: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub line_items: Vec<LineItem>,
    #[serde(default)]
    pub evidence_targets: BTreeMap<String, EvidenceRef>,
    /// Other places that show a code's fact, beside its evidence target (generated cases: every
    /// line an attack wrote the fact on, such as the bypass paragraph of each of two e-mails).
    /// Grading accepts a citation of any of them (decision 12).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fact_places: BTreeMap<String, Vec<EvidenceRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_key: Option<String>,
}

impl Gold {
    /// Canonical hidden risk signals (reason codes, fraud flags, discrepancies, campaign signals).
    pub fn canonical_signals(&self) -> Vec<&'static str> {
        let all = self
            .reason_codes
            .iter()
            .chain(&self.fraud_flags)
            .chain(&self.discrepancies)
            .chain(&self.campaign_signals)
            .map(String::as_str);
        let mut v = crate::text::canonical_codes(all);
        v.sort_unstable();
        v
    }
}

/// Per-case campaign / portfolio context.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_invoice_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "money_opt")]
    #[schemars(with = "Option<f64>")]
    pub at_risk_amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_review_capacity: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_criticality: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_pressure: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked_case_ids: Vec<String>,
}

/// What a vendor callback reaches: the legitimate vendor, the attacker, or nobody.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CallbackOutcome {
    /// The real vendor confirms nothing changed.
    #[default]
    ConfirmsLegitimate,
    /// Someone confirms the change, but the number/voice does not match the vendor master.
    AdversarialConfirm,
    /// The real vendor denies any change and asks for a freeze.
    DisputesChange,
}

wire_enum! {
    /// What a vendor callback came back with: the case's [`CallbackOutcome`], or no answer (the
    /// verification artifact's `outcome`).
    pub enum CallbackResult {
        NoAnswer = "no_answer",
        ConfirmsLegitimate = "confirms_legitimate",
        AdversarialConfirm = "adversarial_confirm",
        DisputesChange = "disputes_change",
    }
}

impl CallbackResult {
    pub fn of(outcome: CallbackOutcome) -> Self {
        match outcome {
            CallbackOutcome::ConfirmsLegitimate => Self::ConfirmsLegitimate,
            CallbackOutcome::AdversarialConfirm => Self::AdversarialConfirm,
            CallbackOutcome::DisputesChange => Self::DisputesChange,
        }
    }

    /// The verification artifact's `risk_signal` for this result.
    pub fn risk_signal(self) -> &'static str {
        match self {
            Self::NoAnswer => "callback_no_answer",
            Self::ConfirmsLegitimate => "callback_clean",
            Self::AdversarialConfirm => "callback_suspicious_confirm",
            Self::DisputesChange => "callback_dispute_confirmed",
        }
    }

    /// The result named by its risk signal or by its outcome word.
    pub fn from_signal(value: &str) -> Option<Self> {
        Self::from_wire(value).or_else(|| Self::ALL.into_iter().find(|r| r.risk_signal() == value))
    }

    /// The callback contradicts the vendor (a spoofed confirmation or a disputed change).
    pub fn suspicious(self) -> bool {
        matches!(self, Self::AdversarialConfirm | Self::DisputesChange)
    }
}

wire_enum! {
    /// A quarter case's place in its sleeper vendor's story (`none` outside sleeper slots).
    pub enum SleeperPhase {
        None = "none",
        Warmup = "warmup",
        TrustBuilding = "trust_building",
        Activation = "activation",
    }
}

impl SleeperPhase {
    /// Part of a sleeper's story (what the sleeper-vigilance track selects).
    pub fn is_sleeper(self) -> bool {
        self != Self::None
    }
}

/// A generated quarter case's ControlBench metadata: its place in the sequence, the mechanics
/// the quarter enables and its sleeper slot. Fields in spelling order, the order the case file
/// has always written them in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlbenchMeta {
    pub calibration_gate_enabled: bool,
    /// The sleeper's attack (`bank_shift`, `bec_shift`; empty outside sleeper slots).
    pub fraud_vector: String,
    pub is_sleeper_case: bool,
    pub loss_surface_enabled: bool,
    pub sequence_id: String,
    /// 1-based position in the quarter.
    pub sequence_index: usize,
    pub sequence_seed: u64,
    pub sleeper_phase: SleeperPhase,
    /// The sleeper vendor (empty outside sleeper slots).
    pub sleeper_vendor_id: String,
    pub sleeper_vigilance_enabled: bool,
    pub sleeper_warmup_target: usize,
    /// The curated case the slot's case was built from.
    pub source_case_id: String,
    pub standard_case_count: usize,
    pub vendor_key: String,
}

/// Simulation facts that no document states.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseSimulation {
    #[serde(default)]
    pub callback_outcome: CallbackOutcome,
    /// Case clocks at which a callback reveal finds nobody answering ("retry later").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callback_no_answer_clocks: Vec<u32>,
}

/// Per-case replacements for the shared master data.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendors: Option<Vec<Vendor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_history: Option<Vec<VendorHistoryRow>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub po_records: Option<Vec<PoRecord>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipts: Option<Vec<Receipt>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_index: Option<Vec<LedgerRow>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_threads: Option<Vec<EmailThread>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_rules: Option<Vec<PolicyRule>>,
}

/// Provenance of generated cases.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeneratorMetadata {
    #[serde(default)]
    pub seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_case_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_attacks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack_category: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mechanism_hints: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraudgen: Option<FraudGenMeta>,
    /// Benign look-alikes the generator applied (they add no gold code).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub benign_lookalikes: Vec<String>,
    /// Generated suite the case belongs to (`challenge`, `holdout`, `twins`, `controlbench`,
    /// `fraudgen`). Report-only metadata: case and document ids are opaque, so suite membership
    /// and pairing live here and must not be shown to an agent in blind mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    /// Opaque id shared by the two members of a contrastive pair (twin and counterpart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_id: Option<String>,
    /// Label plan the generator drew for the case (`benign`, `review`, `escalate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_plan: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FraudGenMeta {
    pub scenario_type: String,
    #[serde(default)]
    pub required_tools: Vec<String>,
    #[serde(default)]
    pub recommended_interventions: Vec<String>,
    #[serde(default)]
    pub revealable_artifacts: Vec<String>,
}

/// Vendor master record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Vendor {
    pub vendor_key: String,
    pub vendor_name: String,
    pub canonical_name: String,
    pub bank_account: String,
    #[serde(default)]
    pub allowed_bank_accounts: Vec<String>,
    #[serde(default)]
    pub tax_id: String,
    #[serde(default)]
    pub approved_domains: Vec<String>,
    #[serde(default)]
    pub country: String,
    #[serde(default)]
    pub currency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_bank_account: Option<String>,
    /// Phone number on file, used by callback verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
}

/// A vendor master change or event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VendorHistoryRow {
    pub vendor_key: String,
    pub change_id: String,
    pub change_type: String,
    pub requested_at: String,
    pub status: String,
    #[serde(default)]
    pub old_value: String,
    #[serde(default)]
    pub new_value: String,
    #[serde(default)]
    pub requested_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_name: Option<String>,
    /// Invoice this change request was attached to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_invoice_number: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoRecord {
    pub po_id: String,
    pub vendor_key: String,
    pub currency: String,
    pub line_items: Vec<LineItem>,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub subtotal: Decimal,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub tax: Decimal,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub total: Decimal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceivedLine {
    pub description: String,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub qty: Decimal,
}

/// Goods receipt note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub receipt_id: String,
    pub po_id: String,
    pub received_line_items: Vec<ReceivedLine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_date: Option<String>,
}

/// A paid (or scheduled) invoice in the AP ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LedgerRow {
    pub ledger_id: String,
    pub vendor_key: String,
    pub vendor_name: String,
    pub invoice_number: String,
    #[serde(default)]
    pub fingerprint: String,
    pub currency: String,
    #[serde(with = "money")]
    #[schemars(with = "f64")]
    pub amount: Decimal,
    #[serde(default)]
    pub po_id: String,
    pub payment_status: String,
    pub payment_date: String,
    /// Account the payment went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bank_account: Option<String>,
}

/// An email thread record (master data, or embedded in a document as `thread_data`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmailThread {
    pub thread_id: String,
    #[serde(default)]
    pub vendor_key: String,
    #[serde(default)]
    pub sender: String,
    #[serde(default, rename = "from", skip_serializing_if = "String::is_empty")]
    pub from_address: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub body: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sender_domain: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expected_domain: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vendor_domain: String,
    /// Author notes; never surfaced to agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// AP policy rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    pub rule_id: String,
    pub title: String,
    pub description: String,
    pub failure_route: String,
    /// Amount threshold the rule refers to, when it has one (approval thresholds).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "money_opt")]
    #[schemars(with = "Option<f64>")]
    pub threshold: Option<Decimal>,
}

#[cfg(test)]
mod money_number_tests {
    use rust_decimal::Decimal;
    use std::str::FromStr;

    #[derive(serde::Serialize)]
    struct Amount {
        #[serde(serialize_with = "super::money_number::serialize")]
        at_risk_amount: Decimal,
    }

    #[test]
    fn money_is_a_json_number_with_its_exact_text() {
        let a = Amount {
            at_risk_amount: Decimal::from_str("2478.00").unwrap(),
        };
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"at_risk_amount":2478.00}"#
        );
        assert!(serde_json::to_value(&a).unwrap()["at_risk_amount"].is_number());
        let big = Amount {
            at_risk_amount: Decimal::from_str("123456789012.35").unwrap(),
        };
        assert_eq!(
            serde_json::to_string(&big).unwrap(),
            r#"{"at_risk_amount":123456789012.35}"#
        );
    }
}

#[cfg(test)]
mod money_round_trip_tests {
    use super::LedgerRow;

    /// Written as numbers with their exact text and read back the same, from text and from a
    /// `Value`; strings are still read.
    #[test]
    fn amounts_are_numbers_and_round_trip_exactly() {
        let text = r#"{"ledger_id":"L1","vendor_key":"v","vendor_name":"V","invoice_number":"I","currency":"INR","amount":"2478.00","payment_status":"paid","payment_date":"2026-01-01"}"#;
        let row: LedgerRow = serde_json::from_str(text).unwrap();
        assert_eq!(row.amount.to_string(), "2478.00");
        let out = serde_json::to_string(&row).unwrap();
        assert!(out.contains(r#""amount":2478.00"#), "{out}");
        let back: LedgerRow = serde_json::from_str(&out).unwrap();
        assert_eq!(back.amount.to_string(), "2478.00");
        let v = serde_json::to_value(&row).unwrap();
        assert!(v["amount"].is_number());
        let from_value: LedgerRow = serde_json::from_value(v).unwrap();
        assert_eq!(from_value.amount, row.amount);
        let bad = text.replace(r#""2478.00""#, r#""abc""#);
        assert!(serde_json::from_str::<LedgerRow>(&bad).is_err());
    }
}
