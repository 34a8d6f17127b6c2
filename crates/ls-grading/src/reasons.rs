//! The reasons stage of grading: does the submission carry the decision-relevant codes with
//! evidence the agent revealed itself, does it claim what it cannot support, did it investigate
//! at all, and did it take controls the case did not call for? Its caps and penalties are what
//! make a grade need the reasons rather than the label and a checklist.

use crate::boundary::observed_any;
use crate::certificate::Revealed;
use crate::evidence::{claim_allowance, single_evidence_score};
pub use crate::evidence::{claims_by_code, Claim, MAX_CITATION_TOKENS, MAX_CLAIM_ENTRIES};
use ls_core::enums::ReasonCode;
use ls_core::episode::TrajectoryEntry;
use ls_core::{ActionName, Decision, EvidenceEntry, TaskType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Cap of a submission made without any successful investigation tool call.
pub const NO_INVESTIGATION_CAP: f64 = 0.10;
// The evidence-blind caps sit at 0.15, below the 0.20 bound a blind policy's mean must keep:
// at 0.20 every capped case sat exactly on the bound, so one chance hit on a pool (a fixed
// position that happened to land on the gold line of one case in twelve) lifted the pool's
// mean over it. The margin absorbs such luck without grading luck differently from reading.

/// Cap of an ESCALATE_FRAUD on a benign case (the "at most 0.25", taken at 0.15: with
/// a 0.25 here escalate-everything policies averaged over 0.20 on balanced pools).
pub const BENIGN_ESCALATION_CAP: f64 = 0.15;
/// Cap of a HOLD or NEEDS_REVIEW on a benign case (outside Task A): a false positive too, and
/// without it a hold-everything policy kept the evidence and process credit (0.38 on a clean
/// Task B invoice).
pub const BENIGN_HOLD_CAP: f64 = 0.15;
/// Cap of a risky case whose decision names none of the gold's codes with grounded evidence.
pub const UNSUPPORTED_DECISION_CAP: f64 = 0.15;
/// Cap when three or more interventions the case did not call for were taken (a checklist).
pub const CHECKLIST_CAP: f64 = 0.15;
/// Cap of a risky case decided correctly with under half of its required controls (interventions).
pub const CONTROLS_SKIPPED_CAP: f64 = 0.35;
/// Cost of each intervention the case did not call for.
pub const OVERCONTROL_COST: f64 = 0.05;
/// Most the over-control cost takes.
pub const OVERCONTROL_COST_MAX: f64 = 0.25;
/// Cost of claims without support: this times the share of claimed codes that are neither gold
/// nor backed by evidence the agent revealed (and of claims beyond the allowance).
pub const UNSUPPORTED_CLAIM_COST: f64 = 0.15;
/// Least single-reference match with the gold's evidence target for an entry to support a code
/// (document 0.35 + page 0.15 alone are not enough: the region or the token must overlap).
pub const MIN_SUPPORT_MATCH: f64 = 0.6;
/// Share of the gold codes that must be named with grounded evidence for a control-satisfied
/// resolution.
pub const MIN_SUPPORTED_RECALL: f64 = 0.5;
/// Cap of a PAY (outside Task A) whose required verifications were not performed, did not pass,
/// or whose results it cites nothing of (it cites only document lines, or nothing it revealed).
pub const UNVERIFIED_PAY_CAP: f64 = 0.15;
/// What a PAY loses when its checks were performed and passed and it cites some of their records
/// but not every one the task names: this times the share of those records left uncited (a
/// missing citation loses in proportion; it is no cap).
pub const PAY_CITATION_COST: f64 = 0.10;
/// The keys of an evidence entry that cite a record a tool returned (a looked-up PO or receipt,
/// the vendor master record, a ledger row, a delivered artifact).
const RECORD_KEYS: [&str; 5] = [
    "po_id",
    "receipt_id",
    "vendor_key",
    "ledger_id",
    "artifact_id",
];

/// What the grade requires, in an analyst's words: `lookup_policy` returns it with the policies
/// (`submission_requirements`), so a reader of the documents and the policy can earn full marks.
/// Keys: `reason_codes`, `hold_or_escalate`, `pay` (per task type), `caps`.
pub fn submission_requirements() -> &'static Value {
    static REQUIREMENTS: std::sync::LazyLock<Value> = std::sync::LazyLock::new(requirements_text);
    &REQUIREMENTS
}

fn requirements_text() -> Value {
    serde_json::json!({
        "reason_codes": "Name each reason once, as its canonical code, and key one evidence_map entry by that code citing where the fact shows: at most three token ids of a line you read that shows it (any line in any document that shows the same fact counts; a line that merely sits near it, such as a table header, does not). For a fact no document shows (a callback result, a ledger hit) cite the record or artifact the tool returned (ledger_id, artifact_id). Several keys spelling one code are one claim; a code spread over more than three keys or more than three tokens cites nothing. Codes you cannot show lower the score, and claiming more than three times as many codes as the case shows leaves the decision unsupported.",
        "hold_or_escalate": "A HOLD, NEEDS_REVIEW or ESCALATE_FRAUD needs its reasons established by the evidence you cite. If none of the named reasons is shown, the score is 0.15 times what the submission would otherwise earn. A named reason you do not cite at all is a missing citation: once as many are uncited as shown, the score is scaled by the share shown (1 of 2 shown: 0.5). A reason cited at a line that does not show it is a wrong citation: if fewer are shown than not, the factor is 0.15 + 0.85 x share squared. Holding or escalating a clean invoice scores 0.15 times what it would otherwise earn.",
        "pay": {
            "task_a": "Extraction: no decision is graded; cite the lines you extracted.",
            "task_b": "Release only after the three-way match: look up the purchase order and the goods receipt (lookup_po, lookup_receipt) and cite both records (po_id and receipt_id) in the evidence_map.",
            "task_c": "Release only after comparing the invoice's bank account with the vendor master (compare_bank_account, which must match; cite the vendor master record as vendor_key) and searching the ledger for earlier payments of the bill (search_ledger).",
            "task_d": "Release only after comparing the invoice's bank account with the vendor master (compare_bank_account, which must match; cite the vendor master record as vendor_key), inspecting the e-mail thread (inspect_email_thread) and reading the vendor's history (lookup_vendor_history).",
            "task_e": "Release only after comparing the bank accounts with the vendor master (compare_bank_account, which must match; cite the vendor master record as vendor_key), searching the ledger (search_ledger) and reading the vendor's history (lookup_vendor_history).",
            "warnings": "A warning a check raises must be answered before release by the control it calls for: callback verification for a bank or account warning, security routing for a sender or policy-bypass warning, a duplicate-cluster review for a prior-payment or split-billing warning. A PAY without its checks performed and passing, or citing none of their records, scores 0.15 times what it would otherwise earn; citing the invoice's Total or Bank line is not a verification. A PAY whose checks passed and that cites some of the records named above but not all loses 0.10 times the share left uncited."
        },
        "caps": "These caps scale what a submission would otherwise earn: without any successful investigation it scores 0.10 times that; with three or more controls the case does not call for 0.15 times that (each one also costs 0.05); a PAY on a risky invoice is an unsafe release (at most 0.05)."
    })
}

/// The case's facts and every place that shows them, read from the case documents once per
/// case. A gold code's places are its evidence target's tokens, every token at the same place of
/// the same document (the noisy-OCR reading of the line) and every token of any case document
/// that shows the same value (the account of a `Bank:` line quoted in an email, the sender
/// address repeated in a thread, a sentence quoted in a reply). Citing any of them establishes
/// the fact; which one the gold happens to name does not matter. (The name is historical: the
/// type once held the invoice lines a PAY had to cite.)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanTargets {
    /// Canonical gold code -> token ids of every place showing its fact.
    pub places: BTreeMap<String, BTreeSet<String>>,
    /// Token id -> where its line sits and its label (`From`, `Bank`, `Total`, ...).
    pub lines: BTreeMap<String, LinePlace>,
}

/// Where a token's line sits, and the label of a `Label: value` line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinePlace {
    pub doc_id: String,
    pub page: u32,
    pub bbox: [f64; 4],
    pub label: Option<String>,
}

/// Most lines (in the gold line's height) between a citation and the gold's line on the same
/// page for it to be the same place's neighbourhood (the header row of the gold row's table).
const NEIGHBOUR_LINES: f64 = 3.0;

impl LinePlace {
    /// The same kind of line (same label), or a neighbour of `gold` on its page.
    fn same_kind_as(&self, gold: &LinePlace) -> bool {
        if self.label.is_some() && self.label == gold.label {
            return true;
        }
        let height = (gold.bbox[3] - gold.bbox[1]).abs().max(1.0);
        let gap = (self.bbox[1] - gold.bbox[3])
            .max(gold.bbox[1] - self.bbox[3])
            .max(0.0);
        self.doc_id == gold.doc_id && self.page == gold.page && gap <= NEIGHBOUR_LINES * height
    }
}

/// The label of a `Label: value` line (letters and digits, lower-cased), if it has one.
fn line_label(text: &str) -> Option<String> {
    let (label, rest) = text.split_once(':')?;
    let label = compact(label);
    (label.len() <= 24 && !label.is_empty() && !rest.trim().is_empty()).then_some(label)
}

/// Least length of a value (letters and digits only) for a token showing it elsewhere to count
/// as showing the same fact (shorter values such as `INR` or `1` appear everywhere).
const MIN_FACT_VALUE_LEN: usize = 6;

/// Letters and digits of `text`, lower-cased.
fn compact(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The value a line shows: what follows its label (`Bank: X` -> `X`), else the whole line.
fn fact_value(text: &str) -> String {
    let v = match text.split_once(':') {
        Some((label, rest)) if label.len() <= 24 && !rest.trim().is_empty() => rest,
        _ => text,
    };
    compact(v)
}

impl CleanTargets {
    pub fn of(case: &ls_core::schema::Case) -> Self {
        let tokens: Vec<(&ls_core::schema::Document, &ls_core::schema::Token)> = case
            .documents
            .iter()
            .flat_map(|d| {
                d.accurate_ocr
                    .iter()
                    .chain(&d.noisy_ocr)
                    .map(move |t| (d, t))
            })
            .collect();
        // Every token's text as a fact value is compared (compacted once, not once per place).
        let compacted: Vec<String> = tokens.iter().map(|(_, t)| compact(&t.text)).collect();
        let mut places = BTreeMap::new();
        for (code, target) in &case.gold.evidence_targets {
            let Some(code) = ReasonCode::canonical(code) else {
                continue;
            };
            let (mut set, shown) = shown_at(target, &tokens, &compacted);
            set.extend(counterpart_places(case, code, target, &shown, &tokens));
            // The further places the case names for the fact (every line an attack wrote it on).
            let further = case
                .gold
                .fact_places
                .iter()
                .filter(|(k, _)| ReasonCode::canonical(k) == Some(code))
                .flat_map(|(_, evs)| evs);
            for place in further {
                set.extend(shown_at(place, &tokens, &compacted).0);
            }
            places.insert(code.as_str().to_owned(), set);
        }
        let lines = tokens
            .iter()
            .map(|(d, t)| {
                (
                    t.token_id.clone(),
                    LinePlace {
                        doc_id: d.doc_id.clone(),
                        page: t.page,
                        bbox: t.bbox,
                        label: line_label(&t.text),
                    },
                )
            })
            .collect();
        Self { places, lines }
    }
}

/// The tokens that show what `place` cites: its own tokens, every token on the same line of
/// its document (cells of one row, the noisy-OCR reading) and every token of any case document
/// showing the same value (at least [`MIN_FACT_VALUE_LEN`] letters and digits); with the cited
/// tokens themselves. `compacted` is every token's [`compact`] text, in `tokens`' order.
fn shown_at<'c>(
    place: &ls_core::EvidenceRef,
    tokens: &[Located<'c>],
    compacted: &[String],
) -> (BTreeSet<String>, Vec<&'c ls_core::schema::Token>) {
    let mut set: BTreeSet<String> = place.token_ids.iter().cloned().collect();
    let shown: Vec<&ls_core::schema::Token> = tokens
        .iter()
        .filter(|(d, t)| d.doc_id == place.doc_id && place.token_ids.contains(&t.token_id))
        .map(|(_, t)| *t)
        .collect();
    let values: Vec<String> = shown
        .iter()
        .map(|t| fact_value(&t.text))
        .filter(|v| v.len() >= MIN_FACT_VALUE_LEN)
        .collect();
    let same_line = |d: &ls_core::schema::Document, t: &ls_core::schema::Token| {
        d.doc_id == place.doc_id
            && shown.iter().any(|s| {
                s.page == t.page
                    && s.bbox[1] < t.bbox[3]
                    && t.bbox[1] < s.bbox[3]
                    && s.bbox[0] < t.bbox[2]
                    && t.bbox[0] < s.bbox[2]
            })
    };
    debug_assert_eq!(tokens.len(), compacted.len());
    for ((d, t), text) in tokens.iter().zip(compacted) {
        if same_line(d, t) || values.iter().any(|v| text.contains(v.as_str())) {
            set.insert(t.token_id.clone());
        }
    }
    (set, shown)
}

/// Places that show a fact the gold states between documents, beside the one the gold names:
///
/// * `approval_threshold_evasion` (a bill split under a limit): the line of the same label
///   (`Total:`) on every other invoice of the case that bills the same order (same `PO:` value):
///   each part's total shows the split;
/// * `duplicate_near_match`: the line of the same label (`Invoice No:`) on every other invoice
///   whose value nearly repeats the target's (one a prefix of the other): either number shows
///   the near-duplicate;
/// * `sender_domain_spoof`: every `From:` line of a case e-mail whose domain is neither one of
///   the vendor's approved domains (the case's own vendor record) nor the recipient's (a `To:`
///   domain): any spoofed sender shows the spoof. Without a vendor record in the case (curated
///   cases read it from the shared master data) only the gold's place and its value count.
fn counterpart_places(
    case: &ls_core::schema::Case,
    code: ReasonCode,
    target: &ls_core::EvidenceRef,
    shown: &[&ls_core::schema::Token],
    tokens: &[Located<'_>],
) -> BTreeSet<String> {
    use ReasonCode::*;
    let Some(target_label) = shown.iter().find_map(|t| line_label(&t.text)) else {
        return BTreeSet::new();
    };
    let related = RelatedInvoices {
        case,
        target,
        tokens,
        target_label: &target_label,
    };
    match code {
        // A split bill's other parts name the same purchase order.
        ApprovalThresholdEvasion => related.places("po", |own, other| other == own),
        // A duplicate's other copies nearly repeat the gold line's value.
        DuplicateNearMatch => related.places(&target_label, near_repeat),
        SenderDomainSpoof if target_label == "from" => spoofed_sender_places(case, tokens),
        // The other facts show at one place (and the places of the same value).
        SenderDomainSpoof
        | PriceMismatch
        | QuantityMismatch
        | MissingReceipt
        | DuplicatePoReference
        | InvalidInvoiceDate
        | TotalMismatch
        | TaxIdMismatch
        | PartialReceiptOnly
        | MissingPo
        | ReceiptDateMismatch
        | BankAccountMismatch
        | VendorMasterMismatch
        | BankOverrideAttempt
        | VendorNameSpoof
        | UrgentPaymentPressure
        | CallbackVerificationFailed
        | CallbackSuspiciousConfirm
        | CallbackDisputeConfirmed
        | VendorAccountTakeoverSuspected
        | PolicyBypassAttempt
        | InstructionOverrideAttempt
        | PromptInjectionAttempt
        | SharedBankAccount
        | CoordinatedTiming => BTreeSet::new(),
    }
}

/// A token with the document it sits in.
type Located<'c> = (&'c ls_core::schema::Document, &'c ls_core::schema::Token);

/// The other invoices of a case, looked at from the gold's evidence target.
struct RelatedInvoices<'a, 'c> {
    case: &'c ls_core::schema::Case,
    target: &'c ls_core::EvidenceRef,
    tokens: &'a [Located<'c>],
    target_label: &'a str,
}

impl RelatedInvoices<'_, '_> {
    /// The value of the line labelled `label` in document `doc`.
    fn label_value(&self, doc: &str, label: &str) -> Option<String> {
        self.tokens.iter().find_map(|(d, t)| {
            (d.doc_id == doc && line_label(&t.text).as_deref() == Some(label))
                .then(|| fact_value(&t.text))
        })
    }

    /// The target-labelled lines of every other invoice whose `key` line is `related` to the
    /// target invoice's.
    fn places(&self, key: &str, related: impl Fn(&str, &str) -> bool) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let Some(own) = self
            .label_value(&self.target.doc_id, key)
            .filter(|v| !v.is_empty())
        else {
            return out;
        };
        let invoices = self
            .case
            .documents
            .iter()
            .filter(|d| d.doc_type == "invoice" && d.doc_id != self.target.doc_id);
        for d in invoices {
            let Some(other) = self.label_value(&d.doc_id, key) else {
                continue;
            };
            if related(&own, &other) {
                out.extend(
                    self.tokens
                        .iter()
                        .filter(|(x, t)| {
                            x.doc_id == d.doc_id
                                && line_label(&t.text).as_deref() == Some(self.target_label)
                        })
                        .map(|(_, t)| t.token_id.clone()),
                );
            }
        }
        out
    }
}

/// Every `From:` line of an e-mail whose domain is neither the vendor's approved domains nor a
/// recipient's.
fn spoofed_sender_places(case: &ls_core::schema::Case, tokens: &[Located<'_>]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let vendor = case
        .context_overrides
        .as_ref()
        .and_then(|o| o.vendors.as_deref())
        .zip(case.vendor_key.as_deref())
        .and_then(|(vs, key)| vs.iter().find(|v| ls_core::text::id_eq(&v.vendor_key, key)));
    let Some(vendor) = vendor.filter(|v| !v.approved_domains.is_empty()) else {
        return BTreeSet::new();
    };
    let domain = |text: &str| {
        text.rsplit_once('@').map(|(_, d)| {
            d.trim()
                .trim_end_matches(['>', '.', ','])
                .to_ascii_lowercase()
        })
    };
    let recipients: BTreeSet<String> = tokens
        .iter()
        .filter(|(_, t)| line_label(&t.text).as_deref() == Some("to"))
        .filter_map(|(_, t)| domain(&t.text))
        .collect();
    for (d, t) in tokens {
        if d.doc_type != "email" || line_label(&t.text).as_deref() != Some("from") {
            continue;
        }
        let Some(dom) = domain(&t.text) else { continue };
        let approved = vendor
            .approved_domains
            .iter()
            .any(|a| a.trim().eq_ignore_ascii_case(&dom));
        if !approved && !recipients.contains(&dom) {
            out.insert(t.token_id.clone());
        }
    }
    out
}

/// Does `b` nearly repeat `a` (both at least [`MIN_FACT_VALUE_LEN`] long, different, one a
/// prefix of the other: `INV-9336` and its re-issue `INV-9336-B`)?
fn near_repeat(a: &str, b: &str) -> bool {
    a.len() >= MIN_FACT_VALUE_LEN
        && b.len() >= MIN_FACT_VALUE_LEN
        && a != b
        && (a.starts_with(b) || b.starts_with(a))
}

/// The verifications a PAY needs per task (outside Task A): the checks the case's policies
/// require before release, as the tools that perform them.
pub fn pay_verifications(task: TaskType) -> &'static [ActionName] {
    use ActionName as A;
    match task {
        TaskType::TaskA => &[],
        TaskType::TaskB => &[A::LookupPo, A::LookupReceipt],
        TaskType::TaskC => &[A::CompareBankAccount, A::SearchLedger],
        TaskType::TaskD => &[
            A::CompareBankAccount,
            A::InspectEmailThread,
            A::LookupVendorHistory,
        ],
        TaskType::TaskE => &[
            A::CompareBankAccount,
            A::SearchLedger,
            A::LookupVendorHistory,
        ],
    }
}

/// The record keys whose results a PAY must cite per task: the PO and the goods receipt of the
/// three-way match (B), the vendor master record the bank account was compared with (C–E).
pub fn pay_record_keys(task: TaskType) -> &'static [&'static str] {
    match task {
        TaskType::TaskA => &[],
        TaskType::TaskB => &["po_id", "receipt_id"],
        TaskType::TaskC | TaskType::TaskD | TaskType::TaskE => &["vendor_key"],
    }
}

/// Why a PAY is not established (empty when it is): a required verification not performed, a
/// check whose result raised a warning left unanswered, or a verification result not cited.
pub fn pay_shortfalls(i: &ReasonsInput<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for a in pay_verifications(i.task) {
        if !i.successful.contains(a) {
            out.push(format!("not_performed:{}", a.as_str()));
        }
    }
    let observed = |group: &[ReasonCode]| observed_any(i.observed_signals, group);
    if observed(&[ReasonCode::BankAccountMismatch]) {
        out.push("failed:compare_bank_account".to_owned());
    }
    let done = |a: ActionName| i.successful.contains(&a);
    for (control, _) in crate::boundary::unanswered_warnings(i.observed_signals, done) {
        out.push(format!("unanswered_warning:{}", control.as_str()));
    }
    for key in pay_record_keys(i.task) {
        if !cites_record(i, &[key]) {
            out.push(format!("result_not_cited:{key}"));
        }
    }
    out
}

/// Does an evidence entry cite, under one of `keys`, a record id the agent revealed?
fn cites_record(i: &ReasonsInput<'_>, keys: &[&str]) -> bool {
    i.evidence_map.values().any(|v| {
        keys.iter().any(|key| {
            v.record(key)
                .is_some_and(|id| i.revealed.contains(id.trim()))
        })
    })
}

/// Share of the task's required PAY records left uncited, when that is all a PAY lacks and it
/// cites at least one record a tool returned (a partial citation of its verifications); `None`
/// otherwise. A PAY citing no record at all (only invoice lines, which a blind policy can pick by
/// their label, or nothing it revealed) establishes nothing and keeps [`UNVERIFIED_PAY_CAP`].
fn uncited_record_share(i: &ReasonsInput<'_>, shortfalls: &[String]) -> Option<f64> {
    let only_citations = shortfalls
        .iter()
        .all(|s| s.starts_with("result_not_cited:"));
    let required = pay_record_keys(i.task).len();
    (!shortfalls.is_empty() && only_citations && required > 0 && cites_record(i, &RECORD_KEYS))
        .then(|| shortfalls.len() as f64 / required as f64)
}

/// What the reasons stage found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReasonsReport {
    /// Gold decision-relevant codes (reason, fraud, discrepancy, campaign; canonical).
    pub gold_codes: usize,
    /// Gold codes the agent named.
    pub named_gold: usize,
    /// Gold codes the agent named with an evidence entry grounded in what it revealed.
    pub supported_gold: usize,
    /// Gold codes the agent named and cited with a grounded entry that points away from the
    /// gold's evidence for them (a revealed token picked by position, not by reading).
    pub misdirected_gold: usize,
    /// Named gold codes not supported but cited at another line of the same kind (label) as
    /// the gold's evidence for them: the second valid places a tie allows (see [`support_cap`]).
    pub second_places: usize,
    /// Named gold codes the evidence map does not cite at all (no entry under any spelling of
    /// the code): missing citations, as opposed to citations of a place that does not show the
    /// fact.
    pub uncited_gold: usize,
    /// Codes the agent claimed.
    pub claimed: usize,
    /// Claims beyond the allowance (the gold's count plus twice as many again, at least two):
    /// a claim of every code is spray, and counts against the decision's support.
    pub excess_claims: usize,
    /// Claimed codes that are not gold.
    pub unsupported_claims: usize,
    /// Did at least one investigation tool succeed?
    pub investigated: bool,
    /// Interventions taken that the case did not call for.
    pub uncalled_interventions: Vec<ActionName>,
    /// A PAY outside Task A whose required verifications were performed, passed and are cited
    /// (true for other decisions).
    pub pay_verified: bool,
    /// What a PAY lacks (see [`pay_shortfalls`]).
    pub pay_shortfalls: Vec<String>,
    /// A verified PAY's share of required records it did not cite (see
    /// [`PAY_CITATION_COST`]); 0 otherwise.
    pub pay_uncited_share: f64,
}

impl ReasonsReport {
    /// Share of gold codes named with grounded evidence (1 when the gold names none).
    pub fn supported_recall(&self) -> f64 {
        if self.gold_codes == 0 {
            1.0
        } else {
            self.supported_gold as f64 / self.gold_codes as f64
        }
    }

    /// Share of claims that are gold (1 when nothing is claimed).
    pub fn precision(&self) -> f64 {
        if self.claimed == 0 {
            1.0
        } else {
            1.0 - self.unsupported_claims as f64 / self.claimed as f64
        }
    }
}

pub struct ReasonsInput<'a> {
    pub task: TaskType,
    pub agent_codes: &'a [ReasonCode],
    pub gold_codes: &'a BTreeSet<ReasonCode>,
    pub evidence_map: &'a BTreeMap<String, EvidenceEntry>,
    /// The gold's evidence target per code (where it has one).
    pub gold_targets: &'a BTreeMap<String, ls_core::EvidenceRef>,
    pub revealed: Revealed<'a>,
    pub trajectory: &'a [TrajectoryEntry],
    pub successful: &'a BTreeSet<ActionName>,
    /// The controls the case calls for (the hidden world's required actions) ...
    pub required_actions: &'a [ActionName],
    /// ... and the artifacts it needs (the request that delivers one is called for too).
    pub required_artifacts: &'a [ls_core::ArtifactId],
    /// Is the gold decision ESCALATE_FRAUD? Escalating fraud calls for routing it to security
    /// and freezing the vendor profile.
    pub fraud_case: bool,
    /// What the agent's tools observed: the controls the control boundary requires for them
    /// (callback, security route, duplicate review) are called for on any case, benign ones
    /// included, since they are owed to the observation, not to the label.
    pub observed_signals: &'a [String],
    /// The agent's decision and the case's fact places (see [`CleanTargets`]).
    pub decision: Option<Decision>,
    pub clean_targets: &'a CleanTargets,
}

/// Did the case call for intervention `a`?
fn called_for(i: &ReasonsInput<'_>, a: ActionName) -> bool {
    let observed = |group: &[ReasonCode]| observed_any(i.observed_signals, group);
    let owed_to_observation = crate::boundary::WARNING_CONTROLS
        .iter()
        .any(|(signals, control, _)| *control == a && observed(signals));
    owed_to_observation
        || a == ActionName::CreateHumanHandoff
        || i.required_actions.contains(&a)
        || a.scheduled_artifact()
            .is_some_and(|x| i.required_artifacts.contains(&x))
        || (i.fraud_case
            && matches!(
                a,
                ActionName::RouteToSecurity | ActionName::FreezeVendorProfile
            ))
}

/// A named gold code cited, grounded, at another line of the same kind as the gold's evidence
/// for it (the other spoofed mail's `From:` line, the other split invoice's `Total:`) or at a
/// neighbour of it (the header row of its table): a second valid place the fact table may
/// not list, a misreading of which line shows the fact, not a guess.
fn cited_at_second_place(
    i: &ReasonsInput<'_>,
    claims: &BTreeMap<ReasonCode, Claim<'_>>,
    code: ReasonCode,
) -> bool {
    let Some(t) = i.gold_targets.get(code.as_str()) else {
        return false;
    };
    let gold: Vec<&LinePlace> = t
        .token_ids
        .iter()
        .filter_map(|tok| i.clean_targets.lines.get(tok))
        .collect();
    claims.get(&code).is_some_and(|c| {
        c.grounded(i.revealed)
            && c.specific()
            && c.tokens
                .iter()
                .filter_map(|tok| i.clean_targets.lines.get(*tok))
                .any(|l| gold.iter().any(|g| l.same_kind_as(g)))
    })
}

pub fn evaluate(i: &ReasonsInput<'_>) -> ReasonsReport {
    // One claim per canonical code: alias spellings and duplicate keys are one claim, their
    // citations pooled, so extra keys never add support.
    let claims = claims_by_code(i.evidence_map);
    let grounded_codes: BTreeSet<ReasonCode> = claims
        .iter()
        .filter(|(_, c)| c.grounded(i.revealed) && c.specific())
        .map(|(k, _)| *k)
        .collect();
    // A gold code is supported by a grounded, specific claim that cites a place showing its
    // fact: any place in the case documents showing the same fact (`CleanTargets`), or a match
    // with the gold's evidence target (same document and page, overlapping region or token). A
    // revealed but unrelated token (a positional guess) supports nothing.
    let supports = |code: ReasonCode| {
        claims.get(&code).is_some_and(|c| {
            c.grounded(i.revealed)
                && c.specific()
                && i.gold_targets.get(code.as_str()).is_none_or(|t| {
                    c.entries
                        .iter()
                        .any(|v| single_evidence_score(v, t) >= MIN_SUPPORT_MATCH)
                        || i.clean_targets
                            .places
                            .get(code.as_str())
                            .is_some_and(|p| c.tokens.iter().any(|tok| p.contains(*tok)))
                })
        })
    };
    let misdirected = |code: ReasonCode| {
        !supports(code)
            && i.gold_targets.contains_key(code.as_str())
            && claims.get(&code).is_some_and(|c| c.grounded(i.revealed))
    };
    let second_place = |code: ReasonCode| cited_at_second_place(i, &claims, code);
    let named: BTreeSet<ReasonCode> = i.agent_codes.iter().copied().collect();
    let task_a = i.task == TaskType::TaskA;
    let pay_shortfalls = if i.decision == Some(Decision::Pay) {
        pay_shortfalls(i)
    } else {
        Vec::new()
    };
    let pay_uncited_share = uncited_record_share(i, &pay_shortfalls);
    ReasonsReport {
        gold_codes: if task_a { 0 } else { i.gold_codes.len() },
        named_gold: i.gold_codes.intersection(&named).count(),
        supported_gold: i
            .gold_codes
            .iter()
            .filter(|&&c| named.contains(&c) && supports(c))
            .count(),
        misdirected_gold: i
            .gold_codes
            .iter()
            .filter(|&&c| named.contains(&c) && misdirected(c))
            .count(),
        second_places: i
            .gold_codes
            .iter()
            .filter(|&&c| named.contains(&c) && !supports(c) && second_place(c))
            .count(),
        uncited_gold: i
            .gold_codes
            .iter()
            .filter(|c| named.contains(*c) && !claims.contains_key(*c))
            .count(),
        claimed: named.len(),
        excess_claims: named
            .len()
            .saturating_sub(claim_allowance(i.gold_codes.len())),
        // A claim beyond the gold is unsupported unless the agent cited evidence it revealed for
        // it; claims beyond the allowance are spam whatever they cite.
        unsupported_claims: (named
            .difference(i.gold_codes)
            .filter(|c| !grounded_codes.contains(*c))
            .count()
            + named
                .len()
                .saturating_sub(claim_allowance(i.gold_codes.len())))
        .min(named.len()),
        investigated: i.trajectory.iter().any(|t| {
            t.success && !t.is_intervention && t.action_type != ActionName::SubmitDecision
        }),
        uncalled_interventions: i
            .successful
            .iter()
            .copied()
            .filter(|a| a.is_intervention() && !called_for(i, *a))
            .collect(),
        pay_verified: task_a || pay_shortfalls.is_empty() || pay_uncited_share.is_some(),
        pay_shortfalls,
        pay_uncited_share: pay_uncited_share.unwrap_or(0.0),
    }
}

/// Cap of a decision by what it established: [`UNSUPPORTED_DECISION_CAP`] when no gold code is
/// established; none when at least as many named gold codes are established as are not
/// (`unestablished`: named gold codes cited away from their facts or not cited with a grounded,
/// specific claim, plus claims beyond the allowance; an equal count leaves room for a second
/// valid place the case's fact table does not list); below that the cap rises continuously with
/// the square of the established share `s / (s + u)`, so one lucky hit among several guesses
/// stays low while each further established code lifts it.
///
/// `stray`: the unestablished count less the codes cited at a second place of the same kind
/// (see [`ReasonsReport::second_places`]). The equal count's allowance is for an agent that read
/// and cited the other place showing the fact; a tie whose other half is cited at an unrelated
/// line is a guess that happened to land (a blind template citing fixed positions hits one of two
/// named codes about as often as not), so at a tie the stray citations join the unestablished
/// count and the cap follows the same curve.
pub fn support_cap(supported: usize, unestablished: usize, stray: usize) -> Option<f64> {
    if supported == 0 {
        return Some(UNSUPPORTED_DECISION_CAP);
    }
    if supported > unestablished || (supported == unestablished && stray == 0) {
        return None;
    }
    let misdirected = unestablished + if supported == unestablished { stray } else { 0 };
    let share = supported as f64 / (supported + misdirected) as f64;
    Some(UNSUPPORTED_DECISION_CAP + (1.0 - UNSUPPORTED_DECISION_CAP) * share * share)
}

/// Cap of a decision whose only shortfall is missing citations (every code it cites is
/// established, `uncited` named gold codes are cited nowhere): in proportion to the established
/// share, `s / (s + uncited)`, once as many named gold codes are uncited as established (none
/// while more are established, as in [`support_cap`]); [`UNSUPPORTED_DECISION_CAP`] when nothing
/// is established. Linear, with no floor: a missing citation is not a wrong one, so it is not
/// read as a guess the way [`support_cap`] reads a tie with a stray citation (1 of 2: 0.5 here,
/// 0.24 there), and a blind policy that cites one code at a fixed place and names the others
/// without citing them still keeps only the share its lucky hit establishes.
pub fn uncited_cap(supported: usize, uncited: usize) -> Option<f64> {
    if supported == 0 {
        return Some(UNSUPPORTED_DECISION_CAP);
    }
    (supported <= uncited).then(|| supported as f64 / (supported + uncited) as f64)
}

/// The stage's caps, each with its breakdown key.
pub fn caps(
    r: &ReasonsReport,
    task: TaskType,
    risky: bool,
    decision: Option<Decision>,
    decision_correct: bool,
    control_coverage: f64,
) -> Vec<(&'static str, f64)> {
    let mut caps = Vec::new();
    if !r.investigated {
        caps.push(("no_investigation_cap", NO_INVESTIGATION_CAP));
    }
    if !risky && task != TaskType::TaskA {
        match decision {
            Some(Decision::EscalateFraud) => {
                caps.push(("benign_escalation_cap", BENIGN_ESCALATION_CAP));
            }
            Some(Decision::Hold | Decision::NeedsReview) => {
                caps.push(("benign_hold_cap", BENIGN_HOLD_CAP));
            }
            _ => {}
        }
    }
    // Named gold codes cited more often away from their evidence than at it: the hits are luck
    // (an equal count is allowed: a careful agent may cite a second valid place, e.g. the other
    // spoofed mail or the other invoice of a split, which the gold target does not name).
    if risky && r.gold_codes > 0 {
        let unestablished = r.named_gold.saturating_sub(r.supported_gold) + r.excess_claims;
        let stray = unestablished.saturating_sub(r.second_places);
        let cap = if unestablished > 0 && unestablished == r.uncited_gold {
            uncited_cap(r.supported_gold, r.uncited_gold)
        } else {
            support_cap(r.supported_gold, unestablished, stray)
        };
        if let Some(cap) = cap {
            caps.push(("unsupported_decision_cap", cap));
        }
    }
    if r.uncalled_interventions.len() >= 3 {
        caps.push(("checklist_cap", CHECKLIST_CAP));
    }
    if risky && decision_correct && control_coverage < 0.5 {
        caps.push(("controls_skipped_cap", CONTROLS_SKIPPED_CAP));
    }
    if !r.pay_verified {
        caps.push(("unverified_pay_cap", UNVERIFIED_PAY_CAP));
    }
    caps
}

/// The stage's additive penalties (≤ 0): over-control and unsupported claims.
pub fn penalties(r: &ReasonsReport) -> (f64, f64) {
    let overcontrol =
        -(OVERCONTROL_COST * r.uncalled_interventions.len() as f64).min(OVERCONTROL_COST_MAX);
    let claims = -UNSUPPORTED_CLAIM_COST * (1.0 - r.precision());
    (overcontrol, claims)
}

/// What a verified PAY loses for the required records it did not cite (≤ 0; 0 for a PAY that
/// cites them all, and for every other decision).
pub fn pay_citation_penalty(r: &ReasonsReport) -> f64 {
    -PAY_CITATION_COST * r.pay_uncited_share
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use ReasonCode::*;

    /// An evidence map as the payload parser types it.
    fn typed(ev: &BTreeMap<String, Value>) -> BTreeMap<String, EvidenceEntry> {
        ev.iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect()
    }

    /// CASE-D-003 (two invoices, a spoofed e-mail) with the texts of some lines replaced.
    fn d003_with(lines: &[(&str, &str)]) -> ls_core::schema::Case {
        let set = ls_core::FixtureSet::embedded().expect("fixtures");
        let mut case = set
            .cases
            .iter()
            .find(|c| c.case_id == "CASE-D-003")
            .expect("CASE-D-003")
            .clone();
        for d in &mut case.documents {
            for t in d.accurate_ocr.iter_mut().chain(d.noisy_ocr.iter_mut()) {
                if let Some((_, text)) = lines.iter().find(|(id, _)| t.token_id == *id) {
                    t.text = (*text).to_owned();
                }
            }
        }
        case
    }

    fn target(doc: &str, token: &str) -> ls_core::EvidenceRef {
        ls_core::EvidenceRef {
            doc_id: doc.into(),
            page: 1,
            bbox: [0.0, 0.0, 1.0, 1.0],
            token_ids: vec![token.into()],
        }
    }

    #[test]
    fn a_split_is_shown_by_every_part_of_the_order() {
        // INV-D-003A and B bill different orders: B's total does not show A's split.
        let mut case = d003_with(&[]);
        case.gold.evidence_targets.insert(
            "approval_threshold_evasion".into(),
            target("INV-D-003A", "d003a-t96"),
        );
        let apart = CleanTargets::of(&case);
        assert!(!apart.places["approval_threshold_evasion"].contains("d003b-t4"));
        // Parts of one order: either part's `Total:` line shows the split.
        let mut case = d003_with(&[("d003b-t22", "PO: PO-2050")]);
        case.gold.evidence_targets.insert(
            "approval_threshold_evasion".into(),
            target("INV-D-003A", "d003a-t96"),
        );
        let parts = CleanTargets::of(&case);
        let places = &parts.places["approval_threshold_evasion"];
        assert!(places.contains("d003a-t96") && places.contains("d003b-t4"));
        // Not the other invoice's unrelated lines.
        assert!(!places.contains("d003b-t8"));
    }

    #[test]
    fn a_near_duplicate_is_shown_by_both_numbers() {
        let case = d003_with(&[("d003b-t8", "Invoice No: INV-2050-A-R")]);
        let places = &CleanTargets::of(&case).places["duplicate_near_match"];
        assert!(places.contains("d003a-t163") && places.contains("d003b-t8"));
        // A different number (INV-2050-B) is another bill, not the near-duplicate.
        let case = d003_with(&[]);
        assert!(!CleanTargets::of(&case).places["duplicate_near_match"].contains("d003b-t8"));
        assert!(near_repeat("inv9336149c52", "inv9336149c52b"));
        assert!(!near_repeat("inv9336149c52", "inv9336149c52"));
        assert!(!near_repeat("inv2050a", "inv2050b"));
    }

    #[test]
    fn any_spoofed_sender_shows_the_spoof_where_the_case_carries_its_vendor() {
        let set = ls_core::FixtureSet::embedded().expect("fixtures");
        let mut case = d003_with(&[]);
        let from = case
            .documents
            .iter()
            .flat_map(|d| d.accurate_ocr.iter().map(move |t| (d, t)))
            .filter(|(d, t)| d.doc_type == "email" && t.text.starts_with("From:"))
            .map(|(_, t)| t.token_id.clone())
            .collect::<Vec<_>>();
        assert_eq!(from, ["thr140-t5"], "one From line in the fixture");
        // A second e-mail line from the vendor's own domain and one from a look-alike.
        let thread = case
            .documents
            .iter_mut()
            .find(|d| d.doc_id == "THR-140")
            .expect("thread");
        let mut genuine = thread.accurate_ocr[0].clone();
        genuine.token_id = "x-genuine".into();
        genuine.text = "From: billing@northwind.example.in".into();
        genuine.bbox = [40.0, 900.0, 300.0, 916.0];
        let mut other = genuine.clone();
        other.token_id = "x-spoof".into();
        other.text = "From: billing@northwindd.example.in".into();
        other.bbox = [40.0, 930.0, 300.0, 946.0];
        thread.accurate_ocr.extend([genuine, other]);
        // Without the vendor record in the case, only the gold's place counts.
        let without = CleanTargets::of(&case);
        assert!(!without.places["sender_domain_spoof"].contains("x-spoof"));
        let mut vendor = set
            .master
            .vendors
            .iter()
            .find(|v| Some(v.vendor_key.as_str()) == case.vendor_key.as_deref())
            .expect("vendor")
            .clone();
        vendor.approved_domains = vec!["northwind.example.in".into()];
        case.context_overrides = Some(ls_core::schema::ContextOverrides {
            vendors: Some(vec![vendor]),
            ..Default::default()
        });
        let with = CleanTargets::of(&case);
        let places = &with.places["sender_domain_spoof"];
        assert!(places.contains("thr140-t5") && places.contains("x-spoof"));
        assert!(
            !places.contains("x-genuine"),
            "the vendor's own domain is no spoof"
        );
    }

    fn entry(action: &str, success: bool, intervention: bool) -> TrajectoryEntry {
        TrajectoryEntry {
            step: 1,
            case_clock: 1,
            action_type: ls_core::ActionName::parse(action).expect("an action name"),
            payload: Default::default(),
            cost: 0.0,
            success,
            message: String::new(),
            is_intervention: intervention,
            control_boundary_phase: ls_core::BoundaryPhase::Intake,
            control_boundary_warnings: Vec::new(),
        }
    }

    #[test]
    fn codes_need_grounded_evidence_and_claims_need_support() {
        let gold = BTreeSet::from([BankOverrideAttempt, SenderDomainSpoof]);
        let revealed_refs = crate::RefSet::from(["INV-1".into(), "t17".into()]);
        let ev = BTreeMap::from([
            (
                "bank_override_attempt".to_owned(),
                json!({"doc_id": "INV-1", "token_ids": ["t17"]}),
            ),
            (
                "sender_domain_spoof".to_owned(),
                json!({"doc_id": "THR-1", "token_ids": ["thr-t1"]}),
            ),
        ]);
        let traj = [
            entry("ocr", true, false),
            entry("route_to_security", true, true),
            entry("freeze_vendor_profile", true, true),
        ];
        let successful = BTreeSet::from([
            ActionName::Ocr,
            ActionName::RouteToSecurity,
            ActionName::FreezeVendorProfile,
        ]);
        let codes = [BankOverrideAttempt, SenderDomainSpoof, DuplicateNearMatch];
        let r = evaluate(&ReasonsInput {
            task: TaskType::TaskD,
            agent_codes: &codes,
            gold_codes: &gold,
            evidence_map: &typed(&ev),
            gold_targets: &BTreeMap::new(),
            revealed: Revealed::refs(&revealed_refs),
            trajectory: &traj,
            successful: &successful,
            required_actions: &[ActionName::RouteToSecurity],
            required_artifacts: &[],
            fraud_case: false,
            observed_signals: &[],
            decision: Some(Decision::EscalateFraud),
            clean_targets: &CleanTargets::default(),
        });
        assert_eq!(
            (r.named_gold, r.supported_gold, r.unsupported_claims),
            (2, 1, 1),
            "the spoof entry cites an unrevealed thread; the duplicate claim cites nothing"
        );
        assert_eq!(r.supported_recall(), 0.5);
        assert_eq!(
            r.uncalled_interventions,
            vec![ActionName::FreezeVendorProfile]
        );
        let (over, claims) = penalties(&r);
        assert_eq!(over, -0.05);
        assert!((claims + 0.05).abs() < 1e-9, "{claims}");
        // One of two named gold codes shown, the other cited at nothing it revealed: a tie
        // without a second place, so the tie's allowance does not apply.
        assert_eq!(r.second_places, 0);
        assert_eq!(
            escalation_caps(&r),
            vec![("unsupported_decision_cap", support_cap(1, 2, 0).unwrap())]
        );
    }

    /// The caps of a correct ESCALATE_FRAUD on a risky Task D case with its controls taken.
    fn escalation_caps(r: &ReasonsReport) -> Vec<(&'static str, f64)> {
        caps(
            r,
            TaskType::TaskD,
            true,
            Some(Decision::EscalateFraud),
            true,
            1.0,
        )
    }

    #[test]
    fn caps_for_no_investigation_benign_escalation_and_checklists() {
        let r = ReasonsReport {
            investigated: false,
            gold_codes: 2,
            uncalled_interventions: vec![ActionName::FreezeVendorProfile; 3],
            pay_verified: true,
            ..Default::default()
        };
        let keys: Vec<&str> = caps(
            &r,
            TaskType::TaskD,
            true,
            Some(Decision::EscalateFraud),
            true,
            0.2,
        )
        .into_iter()
        .map(|c| c.0)
        .collect();
        assert_eq!(
            keys,
            [
                "no_investigation_cap",
                "unsupported_decision_cap",
                "checklist_cap",
                "controls_skipped_cap"
            ]
        );
        let benign = ReasonsReport {
            investigated: true,
            pay_verified: true,
            ..Default::default()
        };
        assert_eq!(
            caps(
                &benign,
                TaskType::TaskB,
                false,
                Some(Decision::EscalateFraud),
                false,
                1.0
            ),
            vec![("benign_escalation_cap", BENIGN_ESCALATION_CAP)]
        );
        assert!(
            caps(
                &benign,
                TaskType::TaskA,
                false,
                Some(Decision::EscalateFraud),
                false,
                1.0
            )
            .is_empty(),
            "Task A grades no decision"
        );
        assert!(caps(
            &benign,
            TaskType::TaskB,
            false,
            Some(Decision::Pay),
            true,
            1.0
        )
        .is_empty());
    }

    #[test]
    fn the_stated_requirements_name_every_check_the_grade_needs() {
        let req = submission_requirements();
        for (task, key) in [
            (TaskType::TaskB, "task_b"),
            (TaskType::TaskC, "task_c"),
            (TaskType::TaskD, "task_d"),
            (TaskType::TaskE, "task_e"),
        ] {
            let text = req["pay"][key].as_str().expect(key);
            for a in pay_verifications(task) {
                assert!(
                    text.contains(a.as_str()),
                    "{key} does not state {}",
                    a.as_str()
                );
            }
            for k in pay_record_keys(task) {
                assert!(text.contains(k), "{key} does not state the {k} citation");
            }
        }
        let codes = req["reason_codes"].as_str().unwrap();
        assert!(codes.contains("three token") && codes.contains("three keys"));
        let warn = req["pay"]["warnings"].as_str().unwrap();
        for control in ["callback", "security", "duplicate-cluster"] {
            assert!(warn.contains(control), "{control}");
        }
    }

    fn pay_input<'a>(
        task: TaskType,
        ev: &'a BTreeMap<String, Value>,
        revealed: &'a crate::RefSet,
        successful: &'a BTreeSet<ActionName>,
        observed: &'a [String],
    ) -> ReasonsInput<'a> {
        ReasonsInput {
            task,
            agent_codes: &[],
            gold_codes: Box::leak(Box::new(BTreeSet::new())),
            evidence_map: Box::leak(Box::new(typed(ev))),
            gold_targets: Box::leak(Box::new(BTreeMap::new())),
            revealed: Revealed::refs(revealed),
            trajectory: &[],
            successful,
            required_actions: &[],
            required_artifacts: &[],
            fraud_case: false,
            observed_signals: observed,
            decision: Some(Decision::Pay),
            clean_targets: Box::leak(Box::new(CleanTargets::default())),
        }
    }

    #[test]
    fn a_pay_needs_its_verifications_performed_passing_and_cited() {
        let revealed: crate::RefSet = ["INV-1", "i-t9", "i-t4", "V-1", "PO-1", "GRN-1"]
            .into_iter()
            .map(Into::into)
            .collect();
        let checked = BTreeSet::from([
            ActionName::CompareBankAccount,
            ActionName::SearchLedger,
            ActionName::LookupPo,
            ActionName::LookupReceipt,
        ]);
        let careful = BTreeMap::from([(
            "bank_account_verified".to_owned(),
            json!({"vendor_key": "V-1"}),
        )]);
        assert!(pay_shortfalls(&pay_input(
            TaskType::TaskC,
            &careful,
            &revealed,
            &checked,
            &[]
        ))
        .is_empty());
        // Citing the invoice's `Total:` and `Bank:` lines is not a verification.
        let labels = BTreeMap::from([
            (
                "total".to_owned(),
                json!({"doc_id": "INV-1", "token_ids": ["i-t9"]}),
            ),
            (
                "bank".to_owned(),
                json!({"doc_id": "INV-1", "token_ids": ["i-t4"]}),
            ),
        ]);
        assert_eq!(
            pay_shortfalls(&pay_input(
                TaskType::TaskC,
                &labels,
                &revealed,
                &checked,
                &[]
            )),
            vec!["result_not_cited:vendor_key"]
        );
        // A check not performed, or one whose result warned without the control it calls for.
        let only_bank = BTreeSet::from([ActionName::CompareBankAccount]);
        assert_eq!(
            pay_shortfalls(&pay_input(
                TaskType::TaskC,
                &careful,
                &revealed,
                &only_bank,
                &[]
            )),
            vec!["not_performed:search_ledger"]
        );
        let dup = vec!["duplicate_near_match".to_owned()];
        assert_eq!(
            pay_shortfalls(&pay_input(
                TaskType::TaskC,
                &careful,
                &revealed,
                &checked,
                &dup
            )),
            vec!["unanswered_warning:flag_duplicate_cluster_review"]
        );
        let mismatch = vec!["bank_account_mismatch".to_owned()];
        assert!(pay_shortfalls(&pay_input(
            TaskType::TaskC,
            &careful,
            &revealed,
            &checked,
            &mismatch
        ))
        .contains(&"failed:compare_bank_account".to_owned()));
        // Task B: the PO and the goods receipt of the three-way match, both cited.
        let b = BTreeMap::from([
            ("three_way_match_po".to_owned(), json!({"po_id": "PO-1"})),
            (
                "three_way_match_receipt".to_owned(),
                json!({"receipt_id": "GRN-1"}),
            ),
        ]);
        assert!(
            pay_shortfalls(&pay_input(TaskType::TaskB, &b, &revealed, &checked, &[])).is_empty()
        );
        let guessed = BTreeMap::from([
            ("po".to_owned(), json!({"po_id": "PO-9"})),
            ("grn".to_owned(), json!({"receipt_id": "GRN-1"})),
        ]);
        assert_eq!(
            pay_shortfalls(&pay_input(
                TaskType::TaskB,
                &guessed,
                &revealed,
                &checked,
                &[]
            )),
            vec!["result_not_cited:po_id"],
            "a record the agent never looked up verifies nothing"
        );
        let r = ReasonsReport {
            investigated: true,
            pay_verified: false,
            ..Default::default()
        };
        assert_eq!(
            caps(&r, TaskType::TaskD, false, Some(Decision::Pay), true, 1.0),
            vec![("unverified_pay_cap", UNVERIFIED_PAY_CAP)]
        );
        // Checks performed and passing, the PO cited but not the goods receipt: a missing
        // citation loses in proportion (half the records, 0.05) and is no cap.
        let po_only = BTreeMap::from([("three_way_match_po".to_owned(), json!({"po_id": "PO-1"}))]);
        let r = evaluate(&pay_input(
            TaskType::TaskB,
            &po_only,
            &revealed,
            &checked,
            &[],
        ));
        assert!(r.pay_verified);
        assert_eq!(r.pay_shortfalls, vec!["result_not_cited:receipt_id"]);
        assert_eq!(r.pay_uncited_share, 0.5);
        assert!((pay_citation_penalty(&r) + 0.05).abs() < 1e-12);
        assert!(
            !caps(&r, TaskType::TaskB, false, Some(Decision::Pay), true, 1.0)
                .iter()
                .any(|(k, _)| *k == "unverified_pay_cap")
        );
        // Citing only the invoice's lines cites nothing of the verifications: still capped.
        let r = evaluate(&pay_input(
            TaskType::TaskC,
            &labels,
            &revealed,
            &checked,
            &[],
        ));
        assert!(!r.pay_verified && r.pay_uncited_share == 0.0);
        assert!(
            caps(&r, TaskType::TaskC, false, Some(Decision::Pay), true, 1.0)
                .contains(&("unverified_pay_cap", UNVERIFIED_PAY_CAP))
        );
        // A check not performed keeps the cap whatever is cited.
        let r = evaluate(&pay_input(
            TaskType::TaskB,
            &po_only,
            &revealed,
            &only_bank,
            &[],
        ));
        assert!(!r.pay_verified);
    }

    #[test]
    fn missing_citations_cost_in_proportion_and_wrong_ones_keep_the_cap() {
        assert_eq!(uncited_cap(0, 2), Some(UNSUPPORTED_DECISION_CAP));
        assert_eq!(uncited_cap(2, 1), None);
        assert_eq!(uncited_cap(1, 1), Some(0.5));
        assert!((uncited_cap(1, 2).unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!((uncited_cap(2, 3).unwrap() - 0.4).abs() < 1e-12);
        // Two named gold codes, one established: the other uncited (a missing citation) is
        // scaled by the established share; the other cited at an unrevealed place (a wrong
        // citation) is the tie with a stray citation.
        let gold = BTreeSet::from([BankOverrideAttempt, SenderDomainSpoof]);
        let revealed = crate::RefSet::from(["INV-1".into(), "t17".into()]);
        let shown = json!({"doc_id": "INV-1", "token_ids": ["t17"]});
        let codes = [BankOverrideAttempt, SenderDomainSpoof];
        let (targets, clean) = (BTreeMap::new(), CleanTargets::default());
        let successful = BTreeSet::from([ActionName::Ocr]);
        let cap_with = |ev: &BTreeMap<String, Value>| {
            let r = evaluate(&ReasonsInput {
                agent_codes: &codes,
                evidence_map: &typed(ev),
                ..input_for(&targets, &gold, &revealed, &successful, &clean)
            });
            escalation_caps(&r)
        };
        let uncited = BTreeMap::from([("bank_override_attempt".to_owned(), shown.clone())]);
        assert_eq!(cap_with(&uncited), vec![("unsupported_decision_cap", 0.5)]);
        let wrong = BTreeMap::from([
            ("bank_override_attempt".to_owned(), shown),
            (
                "sender_domain_spoof".to_owned(),
                json!({"doc_id": "THR-1", "token_ids": ["thr-t1"]}),
            ),
        ]);
        assert_eq!(
            cap_with(&wrong),
            vec![("unsupported_decision_cap", support_cap(1, 1, 1).unwrap())]
        );
        assert!(support_cap(1, 1, 1).unwrap() < 0.5);
    }

    fn case_with_bank_fact() -> ls_core::schema::Case {
        let mut case = ls_core::FixtureSet::embedded()
            .expect("fixtures")
            .cases
            .into_iter()
            .find(|c| c.case_id == "CASE-D-001")
            .expect("CASE-D-001");
        // A second place showing the same account: the thread quotes it.
        let thread = case
            .documents
            .iter_mut()
            .find(|d| d.doc_id == "THR-100")
            .expect("thread");
        let mut t = thread.accurate_ocr[0].clone();
        t.token_id = "thr100-quote".into();
        t.text = "Please remit to IN31 NW00 0884 120 from now on".into();
        thread.accurate_ocr.push(t.clone());
        // A line of the same kind as the gold's bank line, showing another account.
        t.token_id = "thr100-other-bank".into();
        t.text = "Bank: GB29 NWBK 6016 1331 9268 19".into();
        thread.accurate_ocr.push(t);
        case
    }

    #[test]
    fn any_place_showing_the_fact_supports_it_and_aliases_are_one_claim() {
        let case = case_with_bank_fact();
        let facts = CleanTargets::of(&case);
        let bank = &facts.places["bank_override_attempt"];
        assert!(
            bank.contains("d001-t198") && bank.contains("thr100-quote"),
            "{bank:?}"
        );
        assert!(
            !bank.contains("d001-t125"),
            "the Total: line does not show the account"
        );
        let gold = BTreeSet::from([BankOverrideAttempt]);
        let revealed: crate::RefSet = case
            .documents
            .iter()
            .flat_map(|d| {
                std::iter::once(d.doc_id.clone())
                    .chain(d.accurate_ocr.iter().map(|t| t.token_id.clone()))
            })
            .map(Into::into)
            .collect();
        let successful = BTreeSet::from([ActionName::Ocr]);
        let targets = &case.gold.evidence_targets;
        let grade = |ev: &BTreeMap<String, Value>| {
            evaluate(&ReasonsInput {
                agent_codes: &[BankOverrideAttempt],
                evidence_map: &typed(ev),
                ..input_for(targets, &gold, &revealed, &successful, &facts)
            })
        };
        let at = |doc: &str, tok: &str| json!({"doc_id": doc, "page": 1, "token_ids": [tok]});
        let quoted = BTreeMap::from([(
            "bank_override_attempt".to_owned(),
            at("THR-100", "thr100-quote"),
        )]);
        let r = grade(&quoted);
        assert_eq!(
            (r.supported_gold, r.misdirected_gold),
            (1, 0),
            "the quoted account is the same fact"
        );
        let wrong = BTreeMap::from([(
            "bank_override_attempt".to_owned(),
            at("INV-D-001", "d001-t125"),
        )]);
        assert_eq!(grade(&wrong).supported_gold, 0);
        // Spray: many spellings of the code, each citing a chunk of revealed tokens; one of
        // them covers the fact, but the claim is one claim citing every token, so nothing.
        let toks: Vec<String> = case.documents[0]
            .accurate_ocr
            .iter()
            .map(|t| t.token_id.clone())
            .collect();
        let mut spray = BTreeMap::new();
        for (j, chunk) in toks.chunks(3).enumerate() {
            let key = [
                "bank override attempt",
                "BANK-OVERRIDE-ATTEMPT",
                "bank_Override_attempt",
                "Bank Override Attempt",
                "bANK_override_ATTEMPT",
                "bank-override-attempt",
                "BANK override attempt",
            ][j % 7];
            spray.insert(
                format!("{key}{}", " ".repeat(j / 7)),
                json!({"doc_id": "INV-D-001", "page": 1, "token_ids": chunk}),
            );
        }
        assert!(spray.len() > 3);
        let typed_spray = typed(&spray);
        let claims = claims_by_code(&typed_spray);
        assert_eq!(claims.len(), 1, "every spelling is one claim");
        assert!(claims.contains_key(&BankOverrideAttempt));
        let r = grade(&spray);
        assert_eq!(r.supported_gold, 0, "a spray supports nothing");
        assert_eq!(
            support_cap(r.supported_gold, r.misdirected_gold, 0),
            Some(UNSUPPORTED_DECISION_CAP)
        );
        // Another line of the same kind as the gold's (`Bank:`), showing another account: a
        // second place; the `Total:` line is not.
        let kind = |doc: &str, tok: &str| {
            let ev = BTreeMap::from([("bank_override_attempt".to_owned(), at(doc, tok))]);
            evaluate(&ReasonsInput {
                agent_codes: &[BankOverrideAttempt],
                evidence_map: &typed(&ev),
                ..input_for(targets, &gold, &revealed, &successful, &facts)
            })
        };
        let other = kind("THR-100", "thr100-other-bank");
        assert_eq!((other.supported_gold, other.second_places), (0, 1));
        let total = kind("INV-D-001", "d001-t125");
        assert_eq!((total.supported_gold, total.second_places), (0, 0));
    }

    fn input_for<'a>(
        targets: &'a BTreeMap<String, ls_core::EvidenceRef>,
        gold: &'a BTreeSet<ReasonCode>,
        revealed: &'a crate::RefSet,
        successful: &'a BTreeSet<ActionName>,
        facts: &'a CleanTargets,
    ) -> ReasonsInput<'a> {
        static EMPTY: std::sync::LazyLock<BTreeMap<String, EvidenceEntry>> =
            std::sync::LazyLock::new(BTreeMap::new);
        static TRAJ: std::sync::LazyLock<Vec<TrajectoryEntry>> =
            std::sync::LazyLock::new(|| vec![entry("ocr", true, false)]);
        ReasonsInput {
            task: TaskType::TaskD,
            agent_codes: &[],
            gold_codes: gold,
            evidence_map: &EMPTY,
            gold_targets: targets,
            revealed: Revealed::refs(revealed),
            trajectory: &TRAJ,
            successful,
            required_actions: &[],
            required_artifacts: &[],
            fraud_case: true,
            observed_signals: &[],
            decision: Some(Decision::EscalateFraud),
            clean_targets: facts,
        }
    }

    #[test]
    fn misplaced_citations_cost_in_proportion() {
        assert_eq!(support_cap(0, 0, 0), Some(UNSUPPORTED_DECISION_CAP));
        assert_eq!(support_cap(0, 3, 0), Some(UNSUPPORTED_DECISION_CAP));
        assert_eq!(support_cap(2, 1, 0), None);
        assert_eq!(support_cap(1, 1, 0), None);
        let one_of_three = support_cap(1, 2, 0).unwrap();
        assert!(
            (one_of_three - (0.15 + 0.85 / 9.0)).abs() < 1e-9,
            "{one_of_three}"
        );
        assert!(
            support_cap(2, 3, 0).unwrap() > one_of_three,
            "more established, higher cap"
        );
        // A tie beside a claim that cites nothing showing a fact: the guess counts against it.
        assert_eq!(support_cap(1, 1, 1), support_cap(1, 2, 0));
        assert_eq!(support_cap(2, 2, 1), support_cap(2, 3, 0));
        // Baseless claims do not touch a clear majority (that is the precision penalty's job).
        assert_eq!(support_cap(2, 1, 3), None);
    }

    #[test]
    fn lucky_positional_hits_do_not_lift_the_unsupported_decision_cap() {
        let r = ReasonsReport {
            investigated: true,
            gold_codes: 7,
            named_gold: 3,
            supported_gold: 1,
            misdirected_gold: 2,
            pay_verified: true,
            ..Default::default()
        };
        let lucky = caps(
            &r,
            TaskType::TaskC,
            true,
            Some(Decision::EscalateFraud),
            true,
            1.0,
        );
        assert_eq!(
            lucky,
            vec![("unsupported_decision_cap", support_cap(1, 2, 0).unwrap())],
            "one lucky hit of three cited: the cap rises only in proportion"
        );
        let second_place = ReasonsReport {
            named_gold: 2,
            supported_gold: 1,
            misdirected_gold: 1,
            second_places: 1,
            ..r.clone()
        };
        assert!(
            caps(
                &second_place,
                TaskType::TaskC,
                true,
                Some(Decision::EscalateFraud),
                true,
                1.0
            )
            .is_empty(),
            "an equal count leaves room for a second valid place the fact table does not list"
        );
        let guessed = ReasonsReport {
            second_places: 0,
            ..second_place
        };
        assert_eq!(
            caps(
                &guessed,
                TaskType::TaskC,
                true,
                Some(Decision::EscalateFraud),
                true,
                1.0
            ),
            vec![("unsupported_decision_cap", support_cap(1, 2, 0).unwrap())],
            "one hit of two, the other cited at an unrelated line: the tie is a guess"
        );
    }

    #[test]
    fn controls_owed_to_an_observation_are_called_for_on_benign_cases() {
        let traj = vec![
            entry("search_ledger", true, false),
            entry("flag_duplicate_cluster_review", true, true),
            entry("request_callback_verification", true, true),
            entry("route_to_security", true, true),
        ];
        let successful = BTreeSet::from([
            ActionName::SearchLedger,
            ActionName::FlagDuplicateClusterReview,
            ActionName::RequestCallbackVerification,
            ActionName::RouteToSecurity,
        ]);
        let observed = vec![
            "duplicate_near_match".to_owned(),
            "urgent_payment_pressure".to_owned(),
        ];
        let r = evaluate(&ReasonsInput {
            task: TaskType::TaskC,
            agent_codes: &[],
            gold_codes: &BTreeSet::new(),
            evidence_map: &BTreeMap::new(),
            gold_targets: &BTreeMap::new(),
            revealed: Revealed::refs(&BTreeSet::new()),
            trajectory: &traj,
            successful: &successful,
            required_actions: &[],
            required_artifacts: &[],
            fraud_case: false,
            observed_signals: &observed,
            decision: Some(Decision::Pay),
            clean_targets: &CleanTargets::default(),
        });
        // The duplicate review is owed to the observed ledger hit; urgency alone owes no
        // callback or security route, so those two are over-control.
        assert_eq!(
            r.uncalled_interventions,
            vec![
                ActionName::RequestCallbackVerification,
                ActionName::RouteToSecurity
            ]
        );
    }
}
