//! The deterministic teacher: investigates like a careful AP analyst using only what the
//! environment shows it (documents it OCRs, tool results, delivered artifacts, the AP policies it
//! looks up), applies the controls the policies call for, waits for artifacts, and submits a
//! grounded decision with an evidence map, policy checks, a counterfactual and an agent-authored
//! `ledgershield-dcg-v1` certificate. It never reads gold labels or the hidden world.

use crate::client::{outbound_payload, tool_reply};
use crate::facts::{
    lines_from_ocr, Email, Invoice, Line, BYPASS, TAKEOVER, THRESHOLD_WORDS, URGENCY,
};
use crate::runner::{Action, Agent};
use ls_core::certificate::{EdgeKind, NodeKind};
use ls_core::draft::RecordKey::{ArtifactId, PoId, ReceiptId, VendorKey};
use ls_core::draft::{CertificateDraft, Cite, LineItemDraft, NodeDraft, Ordered, SubmissionDraft};
use ls_core::replies::DomainAlignment;
use ls_core::replies::{
    BankReply, HistoryReply, LedgerReply, PoReply, PolicyReply, ReceiptReply, ThreadReply,
    ThreadView, VendorReply,
};
use ls_core::text::{compact_account, normalize_id, normalize_text};
use ls_core::TaskType::{self, TaskA, TaskB, TaskC, TaskD, TaskE};
use ls_core::{Decision, PoRecord, PolicyRule, Receipt, Vendor, VendorHistoryRow};
use ls_env::StepEnvelope;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Why an action was taken, so its result is read the right way.
#[derive(Debug, Clone, PartialEq)]
enum Purpose {
    OcrInvoice(String),
    OcrEmail(String),
    Zoom,
    InspectEmail(String),
    Vendor,
    History(String),
    Policy,
    Po(String),
    Receipt(String),
    Bank(String),
    Ledger(String),
    Intervention(String),
    Filler,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Documents,
    Investigation,
    Interventions,
    Drain,
    Submit,
}

/// Wording of a bank-account change notice (the line a takeover is cited at).
const CHANGE_NOTICE: [&str; 6] = [
    "account details",
    "bank details",
    "beneficiary account",
    "remittance account",
    "new bank",
    "remit invoice",
];

#[derive(Debug, Clone, Default)]
struct EmailFlags {
    domain_mismatch: bool,
    urgency: bool,
    bank_change: bool,
    callback_discouraged: bool,
    policy_override: bool,
    prompt_injection: bool,
}

#[derive(Debug, Clone)]
struct LedgerHit {
    ledger_id: String,
    vendor_key: String,
    invoice_number: String,
    amount: Option<Decimal>,
    po_id: String,
    payment_date: String,
    query_doc: String,
}

/// The teacher's conclusions at decision time.
#[derive(Debug, Clone, Default)]
pub struct Assessment {
    /// `None` until judged.
    pub decision: Option<Decision>,
    pub confidence: f64,
    pub codes: BTreeSet<&'static str>,
    pub discrepancies: BTreeSet<&'static str>,
    pub campaign: BTreeSet<&'static str>,
    pub duplicate_links: BTreeSet<String>,
    pub cross_links: Vec<String>,
    pub policy_checks: BTreeMap<&'static str, &'static str>,
    pub evidence: BTreeMap<String, Cite>,
    pub bank_issue: bool,
    pub security_issue: bool,
    pub duplicate_issue: bool,
    /// The cross-invoice links are the parts of one split order (not a shared account).
    pub split_links: bool,
}

/// Limits of the teacher's own plan.
const MAX_DRAIN_STEPS: u32 = 4;

/// Components of the teacher that ablations switch off (each really changes what it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeacherConfig {
    /// Apply controls (callbacks, approval chains, duplicate review, security, freeze, handoff).
    pub interventions: bool,
    /// Attach an agent-authored decision certificate.
    pub certificate: bool,
    /// Wait for pending artifacts before submitting.
    pub wait_for_artifacts: bool,
    /// The checklist-PAY red-team policy: run the same checks, cite the records they return,
    /// and PAY whatever they show (off for the teacher).
    pub always_pay: bool,
}

impl Default for TeacherConfig {
    fn default() -> Self {
        Self {
            interventions: true,
            certificate: true,
            wait_for_artifacts: true,
            always_pay: false,
        }
    }
}

/// The signal groups after which the control boundary holds a PAY until the callback
/// (`HIGH_RISK_PAYMENT_SIGNALS`) or the duplicate-cluster review (`DUPLICATE_SIGNALS`) is done:
/// the public rule of `docs/grading.md` (the teacher reads no grading crate).
const HIGH_RISK_PAYMENT_SIGNALS: [&str; 4] = [
    "bank_override_attempt",
    "bank_account_mismatch",
    "vendor_account_takeover_suspected",
    "callback_verification_failed",
];
const DUPLICATE_SIGNALS: [&str; 4] = [
    "duplicate_near_match",
    "approval_threshold_evasion",
    "shared_bank_account",
    "coordinated_timing",
];

#[derive(Default)]
pub struct TeacherAgent {
    cfg: TeacherConfig,
    /// The case's task family (`None` for a family this agent does not know).
    task: Option<TaskType>,
    instruction: String,
    stage: Option<Stage>,
    queue: VecDeque<(Action, Purpose)>,
    last_purpose: Option<Purpose>,
    done_signatures: BTreeSet<String>,
    invoice_ids: Vec<String>,
    email_ids: Vec<String>,
    invoices: BTreeMap<String, Invoice>,
    emails: BTreeMap<String, Email>,
    email_flags: BTreeMap<String, EmailFlags>,
    email_text: BTreeMap<String, String>,
    thread_vendor: Option<String>,
    vendor_key: Option<String>,
    /// The vendor master's name for the vendor (from `lookup_vendor`).
    master_name: Option<String>,
    vendor_found: bool,
    bank_results: BTreeMap<String, bool>,
    history: Vec<VendorHistoryRow>,
    other_history: BTreeMap<String, Vec<VendorHistoryRow>>,
    policies: Vec<PolicyRule>,
    pos: BTreeMap<String, PoRecord>,
    po_missing: BTreeSet<String>,
    receipts: BTreeMap<String, Receipt>,
    receipt_missing: BTreeSet<String>,
    ledger_hits: Vec<LedgerHit>,
    ledger_searched: bool,
    artifacts: BTreeMap<String, Map<String, Value>>,
    signals: BTreeSet<String>,
    interventions: Vec<String>,
    drained: u32,
    followups_planned: bool,
    draft: Option<Assessment>,
}

/// Bank accounts against the vendor master ([`TeacherAgent::bank_findings`]).
struct BankFindings<'a> {
    mismatched: Vec<&'a Invoice>,
    mismatch: bool,
    verified_change: bool,
}

/// What the email threads (and split bills) show ([`TeacherAgent::mail_findings`]).
#[derive(Default)]
struct MailFindings {
    spoof: Option<Line>,
    bank_override: bool,
    urgency: Option<Line>,
    bypass: Option<Line>,
    injection: bool,
    takeover: Option<Line>,
    evasion_line: Option<Line>,
}

/// What the batch, the duplicate-cluster report and the ledger show.
#[derive(Default)]
struct BatchFindings {
    shared: Option<Line>,
    timing: Option<Line>,
    /// The same bill twice in the batch.
    duplicate: bool,
    dup_line: Option<Line>,
}

/// Everything [`TeacherAgent::judge`] concludes from before citing reasons.
struct Findings<'a> {
    bank: BankFindings<'a>,
    mail: MailFindings,
    batch: BatchFindings,
    callback_bad: bool,
    chain_bad: bool,
}

/// A PO record's line items: (description, quantity, unit price).
fn order_items(po: &PoRecord) -> Vec<(String, Decimal, Decimal)> {
    po.line_items
        .iter()
        .map(|l| (l.description.clone(), l.qty, l.unit_price))
        .collect()
}

/// Reasons that rest on a message's wording alone (no account, sender or record shows them).
const WORDING_CODES: [&str; 2] = ["policy_bypass_attempt", "urgent_payment_pressure"];

/// Record a reason code and the line it rests on.
fn cite(a: &mut Assessment, code: &'static str, line: Option<&Line>) {
    a.codes.insert(code);
    if let Some(l) = line {
        a.evidence.insert(code.to_owned(), l.cite());
    }
}

/// Two bills in the batch for the same items, within seven days, on the same order and total.
fn same_bill_twice(invoices: &[&Invoice]) -> bool {
    let mut batch_duplicate = false;
    for (i, x) in invoices.iter().enumerate() {
        for y in invoices.iter().skip(i + 1) {
            let same_items = !x.items.is_empty()
                && x.items.len() == y.items.len()
                && x.items.iter().zip(&y.items).all(|(p, q)| {
                    normalize_text(&p.description) == normalize_text(&q.description)
                        && p.qty == q.qty
                        && p.unit_price == q.unit_price
                });
            let close = match (&x.date, &y.date) {
                (Some(d1), Some(d2)) => {
                    ls_core::text::days_between(&d1.0, &d2.0).is_some_and(|g| g <= 7)
                }
                _ => false,
            };
            // A vendor's recurring deliveries bill the same items on their own orders; the
            // same bill twice is the same order billed again.
            let same_order = match (&x.po, &y.po) {
                (Some(p), Some(q)) => normalize_id(&p.0) == normalize_id(&q.0),
                _ => true,
            };
            if same_items && close && same_order && x.total_value() == y.total_value() {
                batch_duplicate = true;
            }
        }
    }
    batch_duplicate
}

fn sig(a: &Action) -> String {
    let mut keys: Vec<_> = a.payload.iter().map(|(k, v)| format!("{k}={v}")).collect();
    keys.sort();
    format!("{}({})", a.action_type, keys.join(","))
}

fn dstr(d: Decimal) -> String {
    format!("{:.2}", d.round_dp(2))
}

impl TeacherAgent {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_config(cfg: TeacherConfig) -> Self {
        Self {
            cfg,
            ..Self::default()
        }
    }

    pub fn config(&self) -> TeacherConfig {
        self.cfg
    }

    /// Queues the intervention `name` (once per payload).
    fn intervene(&mut self, name: &str, payload: Value) {
        self.push(name, payload, Purpose::Intervention(name.into()));
    }

    /// Queues the intervention `name` on the case's vendor.
    fn intervene_on_vendor(&mut self, name: &str) {
        self.intervene(name, json!({"vendor_key": self.vendor()}));
    }

    fn push(&mut self, action_type: &str, payload: Value, purpose: Purpose) {
        let a = Action::new(action_type, payload);
        let s = sig(&a);
        if self.done_signatures.insert(s) {
            self.queue.push_back((a, purpose));
        }
    }

    /// The vendor the instruction names (`Review ... from NAME. ...`): the payee the case is
    /// about, which a look-alike sender name on an invoice or e-mail is not.
    fn instruction_vendor(&self) -> Option<String> {
        let rest = self.instruction.strip_prefix("Review ")?;
        let (_, after) = rest.split_once(" from ")?;
        let name = after.split_once(". ").map_or(after, |(n, _)| n).trim();
        let name = name.strip_suffix('.').unwrap_or(name);
        (!name.is_empty() && name.len() <= 120).then(|| name.to_owned())
    }

    fn vendor(&self) -> String {
        self.vendor_key
            .clone()
            .or_else(|| self.instruction_vendor())
            .or_else(|| {
                self.invoices
                    .values()
                    .next()
                    .map(Invoice::vendor_name)
                    .filter(|s| !s.is_empty())
            })
            .or_else(|| self.thread_vendor.clone())
            .unwrap_or_default()
    }

    fn ordered_invoices(&self) -> Vec<&Invoice> {
        self.invoice_ids
            .iter()
            .filter_map(|id| self.invoices.get(id))
            .collect()
    }

    // ----- reading results -----

    fn absorb(&mut self, purpose: &Purpose, env: &StepEnvelope) {
        let r = &env.observation.last_tool_result.to_map();
        let ok = r.get("success").and_then(Value::as_bool).unwrap_or(false);
        match purpose {
            Purpose::OcrInvoice(id) if ok => {
                let lines = lines_from_ocr(id, r);
                self.invoices.insert(id.clone(), Invoice::parse(id, &lines));
            }
            Purpose::OcrEmail(id) if ok => {
                let lines = lines_from_ocr(id, r);
                self.emails.insert(
                    id.clone(),
                    Email {
                        doc_id: id.clone(),
                        lines,
                    },
                );
            }
            Purpose::InspectEmail(id) if ok => {
                if let Some(t) = tool_reply::<ThreadReply>(env) {
                    self.absorb_thread(id, &t.thread);
                }
            }
            Purpose::Vendor if ok => {
                if let Some(v) = tool_reply::<VendorReply>(env) {
                    self.absorb_vendor(&v.vendor);
                }
            }
            Purpose::History(v) if ok => {
                if let Some(h) = tool_reply::<HistoryReply>(env) {
                    self.absorb_history(v, h);
                }
            }
            Purpose::Policy if ok => {
                if let Some(list) = tool_reply::<PolicyReply>(env).and_then(|p| p.policies) {
                    self.policies = list.into_iter().take(64).collect();
                }
            }
            Purpose::Po(id) => match tool_reply::<PoReply>(env) {
                Some(reply) if ok => {
                    self.pos.insert(id.clone(), reply.po);
                }
                _ => {
                    self.po_missing.insert(id.clone());
                }
            },
            Purpose::Receipt(id) => match tool_reply::<ReceiptReply>(env) {
                Some(reply) if ok => {
                    self.receipts.insert(id.clone(), reply.receipt);
                }
                _ => {
                    self.receipt_missing.insert(id.clone());
                }
            },
            Purpose::Bank(acc) if ok => {
                if let Some(b) = tool_reply::<BankReply>(env) {
                    self.absorb_bank(acc, &b);
                }
            }
            Purpose::Ledger(doc) if ok => {
                self.ledger_searched = true;
                if let Some(l) = tool_reply::<LedgerReply>(env) {
                    self.absorb_ledger(doc, &l);
                }
            }
            Purpose::Intervention(name) if ok && !self.interventions.contains(name) => {
                self.interventions.push(name.clone());
            }
            _ => {}
        }
    }
    /// A vendor-master lookup: the vendor's key and master name.
    fn absorb_vendor(&mut self, vendor: &Vendor) {
        self.vendor_key = Some(vendor.vendor_key.clone());
        self.vendor_found = true;
        self.master_name = Some(vendor.vendor_name.clone());
    }
    /// A bank-account check: whether `acc` matched the master, and the vendor it names.
    fn absorb_bank(&mut self, acc: &str, r: &BankReply) {
        self.bank_results.insert(acc.to_owned(), r.matched);
        if self.vendor_key.is_none() {
            self.vendor_key = Some(r.vendor_key.to_string());
        }
    }
    /// An email thread's sender alignment, request signals, text and vendor.
    fn absorb_thread(&mut self, id: &str, t: &ThreadView) {
        let rs = &t.request_signals;
        self.email_flags.insert(
            id.to_owned(),
            EmailFlags {
                domain_mismatch: t.sender_profile.domain_alignment == DomainAlignment::Mismatch,
                urgency: rs.urgency_language,
                bank_change: rs.bank_change_language,
                callback_discouraged: rs.callback_discouraged,
                policy_override: rs.policy_override_language,
                prompt_injection: rs.prompt_injection_language,
            },
        );
        let body = format!("{} {}", t.subject, t.body);
        self.email_text.insert(
            id.to_owned(),
            normalize_text(&body).chars().take(8_000).collect(),
        );
        if !t.vendor_key.is_empty() {
            self.thread_vendor = Some(t.vendor_key.to_string());
        }
    }

    /// A vendor history: the vendor's own or another vendor's.
    fn absorb_history(&mut self, v: &str, reply: HistoryReply) {
        let rows: Vec<VendorHistoryRow> = reply.history.into_iter().take(64).collect();
        let own = self
            .vendor_key
            .as_deref()
            .is_none_or(|k| normalize_id(k) == normalize_id(v));
        if own {
            self.history = rows;
        } else {
            self.other_history.insert(v.to_owned(), rows);
        }
    }

    /// Ledger hits for the invoice `doc` (each hit once).
    fn absorb_ledger(&mut self, doc: &str, r: &LedgerReply) {
        for h in r.hits.iter().take(20) {
            let id = &h.ledger_id;
            if id.is_empty()
                || self
                    .ledger_hits
                    .iter()
                    .any(|x| x.ledger_id == *id && x.query_doc == doc)
            {
                continue;
            }
            self.ledger_hits.push(LedgerHit {
                ledger_id: id.to_string(),
                vendor_key: h.vendor_key.to_string(),
                invoice_number: h.invoice_number.to_string(),
                amount: Some(h.amount),
                po_id: h.po_id.to_string(),
                payment_date: h.payment_date.to_string(),
                query_doc: doc.to_owned(),
            });
        }
    }

    fn refresh(&mut self, env: &StepEnvelope) {
        let o = &env.observation;
        for a in &o.revealed_artifacts {
            let mut d = a.details.clone();
            d.insert("summary".into(), json!(a.summary));
            self.artifacts.insert(a.artifact_id.as_str().to_owned(), d);
        }
        self.signals = o.risk_snapshot.observed_signals.iter().cloned().collect();
    }

    // ----- planning -----

    fn plan_documents(&mut self, env: &StepEnvelope) {
        let o = &env.observation;
        for d in o.visible_documents.iter() {
            match d.doc_type.as_str() {
                "invoice" => self.invoice_ids.push(d.doc_id.clone()),
                "email" => self.email_ids.push(d.doc_id.clone()),
                _ => {}
            }
        }
        for id in self.invoice_ids.clone() {
            self.push(
                "ocr",
                json!({"doc_id": id, "mode": "accurate"}),
                Purpose::OcrInvoice(id.clone()),
            );
        }
        if self.full_review() {
            for id in self.email_ids.clone() {
                self.push(
                    "ocr",
                    json!({"doc_id": id, "mode": "accurate"}),
                    Purpose::OcrEmail(id.clone()),
                );
            }
        }
    }

    fn plan_investigation(&mut self) {
        let invoices: Vec<Invoice> = self.ordered_invoices().into_iter().cloned().collect();
        match self.task {
            Some(TaskA) => {
                if let Some(id) = self.invoice_ids.first().cloned() {
                    self.push(
                        "zoom",
                        json!({"doc_id": id, "page": 1, "bbox": [0, 0, 600, 800]}),
                        Purpose::Zoom,
                    );
                }
            }
            Some(TaskB) => {
                self.push("lookup_policy", json!({}), Purpose::Policy);
                for inv in &invoices {
                    if let Some((po, _)) = &inv.po {
                        self.push("lookup_po", json!({"po_id": po}), Purpose::Po(po.clone()));
                    }
                    let receipt = inv
                        .receipt
                        .as_ref()
                        .map(|r| r.0.clone())
                        .or_else(|| inv.po.as_ref().map(|p| p.0.replacen("PO-", "GRN-", 1)));
                    if let Some(r) = receipt {
                        self.push(
                            "lookup_receipt",
                            json!({"receipt_id": r}),
                            Purpose::Receipt(r.clone()),
                        );
                    }
                }
                if self.full_review() {
                    self.plan_mail_and_vendor();
                }
            }
            _ => self.plan_mail_and_vendor(),
        }
    }

    /// Whether the case gets the fraud review (threads, vendor master, history, bank, ledger):
    /// Tasks C–E always, and a three-way match (Task B) that came with e-mail — mail beside a
    /// bill is where a bank change, a spoofed sender or pressure shows.
    fn full_review(&self) -> bool {
        matches!(self.task, Some(TaskC | TaskD | TaskE))
            || (self.task == Some(TaskB) && !self.email_ids.is_empty())
    }

    /// Read every e-mail thread and look the vendor up in the master.
    fn plan_mail_and_vendor(&mut self) {
        for id in self.email_ids.clone() {
            self.push(
                "inspect_email_thread",
                json!({"thread_id": id}),
                Purpose::InspectEmail(id.clone()),
            );
        }
        let vendor = self.vendor();
        if !vendor.is_empty() {
            self.push(
                "lookup_vendor",
                json!({"vendor_key": vendor}),
                Purpose::Vendor,
            );
        }
    }

    /// Second wave (needs the canonical vendor key).
    fn plan_corroboration(&mut self) {
        if !self.full_review() {
            return;
        }
        // A three-way match has read the policies and looked up its POs already.
        let three_way = self.task == Some(TaskB);
        let vendor = self.vendor();
        let invoices: Vec<Invoice> = self.ordered_invoices().into_iter().cloned().collect();
        self.push(
            "lookup_vendor_history",
            json!({"vendor_key": vendor}),
            Purpose::History(vendor.clone()),
        );
        if !three_way {
            self.push("lookup_policy", json!({}), Purpose::Policy);
        }
        let mut seen = BTreeSet::new();
        for inv in &invoices {
            if let Some((bank, _)) = &inv.bank {
                if seen.insert(compact_account(bank)) {
                    self.push(
                        "compare_bank_account",
                        json!({"vendor_key": vendor, "proposed_bank_account": bank}),
                        Purpose::Bank(compact_account(bank)),
                    );
                }
            }
        }
        for inv in &invoices {
            let mut p = Map::new();
            p.insert("vendor_key".into(), json!(vendor));
            if let Some((n, _)) = &inv.number {
                p.insert("invoice_number".into(), json!(n));
            }
            if let Some(t) = inv.total_value() {
                p.insert("amount".into(), json!(t.to_f64().unwrap_or(0.0)));
            }
            self.push(
                "search_ledger",
                Value::Object(p),
                Purpose::Ledger(inv.doc_id.clone()),
            );
        }
        if self.task != Some(TaskC) && !three_way {
            for inv in &invoices {
                if let Some((po, _)) = &inv.po {
                    self.push("lookup_po", json!({"po_id": po}), Purpose::Po(po.clone()));
                }
            }
        }
    }

    // ----- assessment -----

    fn threshold_rules(&self) -> Vec<Decimal> {
        let mut t: Vec<Decimal> = self.policies.iter().filter_map(|p| p.threshold).collect();
        t.sort();
        t
    }

    fn just_under_threshold(&self, amount: Decimal) -> bool {
        self.threshold_rules()
            .into_iter()
            .any(|th| amount < th && amount >= th * Decimal::new(95, 2))
    }

    fn is_duplicate_hit(&self, h: &LedgerHit, inv: &Invoice) -> bool {
        let own = self.vendor_key.as_deref().map(normalize_id);
        if own.is_some_and(|v| v != normalize_id(&h.vendor_key)) {
            return false;
        }
        let num = inv
            .number
            .as_ref()
            .map(|n| normalize_id(&n.0))
            .unwrap_or_default();
        let hn = normalize_id(&h.invoice_number);
        if !num.is_empty()
            && !hn.is_empty()
            && (num == hn || hn.starts_with(&num) || num.starts_with(&hn))
        {
            return true;
        }
        // Same goods for the same amount within seven days (same purchase order).
        let same_amount = match (h.amount, inv.total_value()) {
            (Some(a), Some(b)) => (a - b).abs() <= Decimal::new(1, 2),
            _ => false,
        };
        let same_po = inv
            .po
            .as_ref()
            .is_some_and(|p| !h.po_id.is_empty() && normalize_id(&p.0) == normalize_id(&h.po_id));
        let close = inv
            .date
            .as_ref()
            .and_then(|d| ls_core::text::days_between(&d.0, &h.payment_date))
            .is_some_and(|g| g <= 7);
        same_amount && same_po && close
    }

    /// Has any tool shown one of `group`?
    fn observed_any(&self, group: &[&str]) -> bool {
        self.signals.iter().any(|s| group.contains(&s.as_str()))
    }

    /// Does the vendor's own history show an approved bank change to `account`?
    fn approved_change_to(&self, account: &str) -> bool {
        let want = ls_core::text::compact_account(account);
        self.history.iter().any(|r| {
            normalize_text(&r.change_type).contains("bank")
                && normalize_text(&r.status).starts_with("approved")
                && ls_core::text::compact_account(&r.new_value) == want
        })
    }

    /// The conclusions at decision time ([`Self::judge`]); the checklist-PAY policy turns every
    /// one into a PAY citing the verifications it ran, with every check reported as passing.
    fn assess(&self) -> Assessment {
        let a = self.judge();
        if !self.cfg.always_pay || a.decision == Some(Decision::Pay) {
            return a;
        }
        let mut pay = Assessment {
            decision: Some(Decision::Pay),
            confidence: 0.9,
            policy_checks: a.policy_checks.keys().map(|k| (*k, "pass")).collect(),
            ..Default::default()
        };
        let invoices = self.ordered_invoices();
        self.cite_verifications(&mut pay, invoices.first().copied());
        pay
    }

    fn judge(&self) -> Assessment {
        let mut a = Assessment {
            policy_checks: BTreeMap::new(),
            ..Default::default()
        };
        let invoices = self.ordered_invoices();
        let first = invoices.first().copied();
        match self.task {
            Some(TaskA) => {
                a.decision = Some(Decision::Pay);
                a.confidence = 0.9;
                return a;
            }
            // A three-way match decides on the match, unless the mail that came with it (the
            // fraud review) finds a reason to stop the payment in an account, a sender or a
            // record (a duplicate) — not wording alone (a bypass request or urgency beside a
            // short receipt is the hold's pressure).
            Some(TaskB) => {
                self.judge_three_way(&mut a, &invoices, first);
                if self.full_review() {
                    let review = self.review(&invoices, first);
                    // Fraud overrides the match; any other stop (a duplicate) overrides a PAY.
                    let stops = match review.decision {
                        Some(Decision::EscalateFraud) => true,
                        Some(Decision::Pay) | None => false,
                        Some(_) => a.decision == Some(Decision::Pay),
                    };
                    let fraud = stops && review.codes.iter().any(|c| !WORDING_CODES.contains(c));
                    if fraud {
                        return review;
                    }
                    for c in review.codes.iter().filter(|c| WORDING_CODES.contains(*c)) {
                        a.codes.insert(c);
                        if let Some(e) = review.evidence.get(*c) {
                            a.evidence.insert((*c).to_owned(), e.clone());
                        }
                    }
                }
                return a;
            }
            _ => {}
        }
        self.review(&invoices, first)
    }

    /// The fraud review's judgement (Tasks C–E, and a three-way match that came with mail):
    /// bank, mail, batch and cluster findings, their reasons and the decision they support.
    fn review(&self, invoices: &[&Invoice], first: Option<&Invoice>) -> Assessment {
        let mut a = Assessment {
            policy_checks: BTreeMap::new(),
            ..Default::default()
        };
        let invoices = invoices.to_vec();
        let bank = self.bank_findings(&invoices);
        let mail = self.mail_findings(&invoices, &bank);
        let mut batch = self.batch_findings(&mut a, &invoices);
        self.cluster_findings(&mut a, &invoices, first, &mut batch);
        self.prior_payments(&mut a, &invoices, &mut batch);
        let f = Findings {
            bank,
            mail,
            batch,
            callback_bad: self.callback_bad(),
            chain_bad: self.chain_bad(),
        };
        self.cite_reasons(&mut a, first, &f);
        // A Task E batch whose order is billed in parts under the limit: the parts are the
        // invoices of one scheme (the instruction's `cross_invoice_links`).
        if self.task == Some(TaskE)
            && a.cross_links.is_empty()
            && a.codes.contains("approval_threshold_evasion")
        {
            a.cross_links = Self::split_parts(&invoices);
            a.split_links = !a.cross_links.is_empty();
        }
        if self.task != Some(TaskC) {
            self.check_policies(&mut a, &invoices, &f);
        }
        self.decide(&mut a, &f);
        if a.decision == Some(Decision::Pay)
            && self.task != Some(TaskC)
            && self.cite_po_mismatch(&mut a, &invoices)
        {
            self.decide(&mut a, &f);
        }
        if a.decision == Some(Decision::Pay) {
            self.cite_verifications(&mut a, first);
        }
        a
    }

    /// Task B: the three-way match alone decides.
    fn judge_three_way(&self, a: &mut Assessment, invoices: &[&Invoice], first: Option<&Invoice>) {
        self.assess_three_way(a, invoices);
        for k in [
            "bank_change_verification",
            "duplicate_check",
            "approval_threshold_check",
        ] {
            a.policy_checks.insert(k, "pass");
        }
        if a.discrepancies.is_empty() {
            a.decision = Some(Decision::Pay);
            a.confidence = 0.9;
            self.cite_verifications(a, first);
        } else {
            a.decision = Some(Decision::Hold);
            a.confidence = 0.93;
        }
    }

    /// Bank accounts against the vendor master.
    fn bank_findings<'a>(&self, invoices: &[&'a Invoice]) -> BankFindings<'a> {
        let mismatched: Vec<&Invoice> = invoices
            .iter()
            .copied()
            .filter(|i| {
                i.account()
                    .is_some_and(|acc| self.bank_results.get(&acc) == Some(&false))
            })
            .collect();
        // Every invoice pays the vendor-master account, and the vendor history shows that account
        // arriving through an approved (callback-verified) change: a completed, verified change.
        let verified_change = !invoices.is_empty()
            && invoices.iter().all(|i| {
                i.account().is_some_and(|acc| {
                    self.bank_results.get(&acc) == Some(&true) && self.approved_change_to(&acc)
                })
            });
        BankFindings {
            mismatch: !mismatched.is_empty(),
            mismatched,
            verified_change,
        }
    }

    /// Email detectors, and split bills just under an approval limit.
    fn mail_findings(&self, invoices: &[&Invoice], bank: &BankFindings) -> MailFindings {
        let mut m = MailFindings::default();
        for id in &self.email_ids {
            let Some(fl) = self.email_flags.get(id) else {
                continue;
            };
            let email = self.emails.get(id);
            let text = self.email_text.get(id).cloned().unwrap_or_default();
            let from = email.and_then(Email::from_line).cloned();
            if fl.domain_mismatch {
                m.spoof = from.clone().or(m.spoof);
            }
            // A deadline alone does not make a bank-change notice an override when the change is
            // the completed, verified one the vendor master and history show.
            let other_lever = fl.domain_mismatch
                || fl.callback_discouraged
                || fl.policy_override
                || fl.prompt_injection;
            if fl.bank_change && (other_lever || (fl.urgency && !bank.verified_change)) {
                m.bank_override = true;
            }
            if fl.urgency {
                m.urgency = email
                    .and_then(|e| e.line_with(&URGENCY))
                    .cloned()
                    .or(m.urgency);
            }
            if fl.callback_discouraged || fl.policy_override {
                m.bypass = email
                    .and_then(|e| e.line_with(&BYPASS))
                    .cloned()
                    .or(m.bypass)
                    .or(from.clone());
            }
            m.injection |= fl.prompt_injection;
            if TAKEOVER.iter().any(|p| text.contains(p)) && (fl.bank_change || bank.mismatch) {
                m.takeover = email
                    .and_then(|e| e.line_with(&TAKEOVER))
                    .cloned()
                    .or(m.takeover);
            }
            // A change notice from a look-alike domain that asks for nothing else (no skipped
            // callback, no bypass): someone posing as the vendor, an account takeover. An
            // override is a change that also asks to skip the verification.
            let verification_lever =
                fl.callback_discouraged || fl.policy_override || fl.prompt_injection;
            if m.takeover.is_none() && fl.bank_change && fl.domain_mismatch && !verification_lever {
                m.takeover = email.and_then(|e| e.line_with(&CHANGE_NOTICE)).cloned();
            }
            if let Some(l) = email.and_then(Email::threshold_evasion_line) {
                m.evasion_line = Some(l.clone());
            }
        }
        // Split bills just under an approval limit, or whose split note names the limit itself
        // (whatever the total has become since).
        if m.evasion_line.is_none() {
            for inv in invoices {
                if let (Some((t, tl)), Some(note)) = (&inv.total, inv.split_marker()) {
                    let note = normalize_text(&note.text);
                    let names_limit = THRESHOLD_WORDS.iter().any(|w| note.contains(w));
                    if names_limit || self.just_under_threshold(*t) {
                        m.evasion_line = Some(tl.clone());
                        break;
                    }
                }
            }
        }
        if m.evasion_line.is_none() {
            m.evasion_line = self.split_order_over_limit(invoices);
        }
        m
    }

    /// One order billed in parts (a split note on each, the same PO) whose parts together reach
    /// an approval limit: the original part's total line (the part whose number the others
    /// extend), whatever each part's own total.
    fn split_order_over_limit(&self, invoices: &[&Invoice]) -> Option<Line> {
        let parts: Vec<&Invoice> = invoices
            .iter()
            .copied()
            .filter(|i| i.split_marker().is_some())
            .collect();
        let order = |i: &Invoice| i.po.as_ref().map(|p| normalize_id(&p.0));
        let one_order = parts.len() >= 2
            && order(parts[0]).is_some()
            && parts.iter().all(|i| order(i) == order(parts[0]));
        let combined: Decimal = parts.iter().filter_map(|i| i.total_value()).sum();
        let limit = self.threshold_rules().first().copied()?;
        if !one_order || combined < limit {
            return None;
        }
        let number = |i: &Invoice| i.number.as_ref().map(|n| normalize_id(&n.0));
        let original = parts
            .iter()
            .min_by_key(|i| number(i).map_or(usize::MAX, |n| n.len()))?;
        original.total.as_ref().map(|(_, l)| l.clone())
    }

    /// Does an invoice bill under a variant of the vendor master's name (the master's name with
    /// more after it, such as "… Intl")?
    fn billed_under_a_name_variant(&self) -> bool {
        let Some(master) = self.master_name.as_deref().map(normalize_text) else {
            return false;
        };
        self.invoices.values().any(|i| {
            let name = normalize_text(&i.vendor_name());
            name != master && name.starts_with(&master)
        })
    }

    /// The invoices billing one order in parts (a split note on each, the same PO), when there
    /// are two or more.
    fn split_parts(invoices: &[&Invoice]) -> Vec<String> {
        let order = |i: &Invoice| i.po.as_ref().map(|p| normalize_id(&p.0));
        let mut by_order: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for inv in invoices.iter().filter(|i| i.split_marker().is_some()) {
            if let Some(po) = order(inv) {
                by_order.entry(po).or_default().push(inv.doc_id.clone());
            }
        }
        by_order
            .into_values()
            .find(|parts| parts.len() >= 2)
            .unwrap_or_default()
    }

    /// Batch analysis: shared accounts, timing, identical bills.
    fn batch_findings(&self, a: &mut Assessment, invoices: &[&Invoice]) -> BatchFindings {
        let mut b = BatchFindings::default();
        let mut by_account: BTreeMap<String, Vec<&Invoice>> = BTreeMap::new();
        for inv in invoices {
            if let Some(acc) = inv.account() {
                by_account.entry(acc).or_default().push(inv);
            }
        }
        // Several bills paying one account is a campaign signal only when that account is not the
        // vendor-master account (a vendor's normal batch pays its own verified account).
        for (_, group) in by_account
            .iter()
            .filter(|(acc, g)| g.len() >= 2 && self.bank_results.get(*acc) != Some(&true))
        {
            a.cross_links = group.iter().map(|i| i.doc_id.clone()).collect();
            b.shared = group
                .get(1)
                .and_then(|i| i.bank.as_ref())
                .map(|b| b.1.clone());
            let mut dated: Vec<(&str, &Line)> = group
                .iter()
                .filter_map(|i| i.date.as_ref().map(|d| (d.0.as_str(), &d.1)))
                .collect();
            dated.sort_by(|x, y| x.0.cmp(y.0));
            if dated.len() >= 2
                && dated
                    .windows(2)
                    .all(|w| ls_core::text::days_between(w[0].0, w[1].0).is_some_and(|g| g <= 3))
            {
                b.timing = dated.last().map(|d| d.1.clone());
            }
        }
        b.duplicate = same_bill_twice(invoices);
        b
    }

    /// Cross-vendor account sharing from the duplicate-cluster report.
    fn cluster_findings(
        &self,
        a: &mut Assessment,
        invoices: &[&Invoice],
        first: Option<&Invoice>,
        b: &mut BatchFindings,
    ) {
        let Some(cluster) = self.artifacts.get("duplicate_cluster_report") else {
            return;
        };
        for ev in cluster
            .get("evidence")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(64)
        {
            let Some(o) = ev.as_object() else { continue };
            if o.get("kind").and_then(Value::as_str) != Some("shared_bank_account") {
                continue;
            }
            let doc = o.get("doc_id").and_then(Value::as_str).unwrap_or("");
            let inv = invoices.iter().find(|i| i.doc_id == doc).or(first.as_ref());
            let Some(inv) = inv else { continue };
            if b.shared.is_none() {
                b.shared = inv.bank.as_ref().map(|b| b.1.clone());
            }
            if let Some(l) = o.get("ledger_id").and_then(Value::as_str) {
                a.duplicate_links.insert(l.to_owned());
            }
            for l in o
                .get("linked_ledger_ids")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                a.duplicate_links.insert(l.to_owned());
            }
            // Timing: the other vendor's change request filed within three days of this bill.
            if let (Some(change), Some(vendor)) = (
                o.get("change_id").and_then(Value::as_str),
                o.get("vendor_key").and_then(Value::as_str),
            ) {
                let rows = self.other_history.get(vendor);
                let requested = rows
                    .into_iter()
                    .flatten()
                    .find(|r| r.change_id == change)
                    .map(|r| r.requested_at.as_str());
                if let (Some(req), Some((d, dl))) = (requested, &inv.date) {
                    if ls_core::text::days_between(req, d).is_some_and(|g| g <= 3) {
                        b.timing = Some(dl.clone());
                    }
                }
            }
        }
    }

    /// Prior payments of the same bill.
    fn prior_payments(&self, a: &mut Assessment, invoices: &[&Invoice], b: &mut BatchFindings) {
        for inv in invoices {
            for h in self
                .ledger_hits
                .iter()
                .filter(|h| h.query_doc == inv.doc_id)
            {
                if self.is_duplicate_hit(h, inv) {
                    a.duplicate_links.insert(h.ledger_id.clone());
                    if b.dup_line.is_none() {
                        b.dup_line = inv.number.as_ref().map(|n| n.1.clone());
                    }
                }
            }
        }
    }

    /// The callback artifact reports a suspicious or disputed confirmation.
    fn callback_bad(&self) -> bool {
        self.artifacts
            .get("callback_verification_result")
            .and_then(|c| c.get("risk_signal"))
            .and_then(Value::as_str)
            .is_some_and(|s| {
                s == "callback_suspicious_confirm" || s == "callback_dispute_confirmed"
            })
    }

    /// The approval-chain artifact found a mismatch.
    fn chain_bad(&self) -> bool {
        self.artifacts
            .get("bank_change_approval_chain")
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("mismatch_found")
    }

    /// The reasons an email shows (a spoofed sender, bypass wording, an injection, a takeover
    /// request) and urgency where it is the lever of one of them.
    fn cite_mail_reasons(&self, a: &mut Assessment, f: &Findings) {
        let (bank, mail) = (&f.bank, &f.mail);
        if let Some(l) = &mail.spoof {
            cite(a, "sender_domain_spoof", Some(l));
        }
        if let Some(l) = &mail.bypass {
            cite(a, "policy_bypass_attempt", Some(l));
        }
        if mail.injection {
            let l = self
                .email_ids
                .iter()
                .filter_map(|id| self.emails.get(id))
                .find_map(|e| {
                    e.line_with(&["ignore previous", "ignore prior", "as an ai", "disregard"])
                })
                .cloned();
            cite(a, "prompt_injection_attempt", l.as_ref());
        }
        if let Some(l) = &mail.takeover {
            cite(a, "vendor_account_takeover_suspected", Some(l));
        }
        // Urgency is a reason only as the lever of something else (a spoofed sender, bypass
        // wording, an unverified account): a vendor's own deadline reminder from its approved
        // domain, paying the master account, is ordinary mail. And not beside a bank-change
        // request, where the override is the reason.
        let urgency_is_lever = mail.spoof.is_some()
            || mail.bypass.is_some()
            || mail.injection
            || mail.takeover.is_some()
            || bank.mismatch
            || f.callback_bad
            || f.chain_bad;
        if let Some(l) = &mail.urgency {
            if urgency_is_lever && !a.codes.contains("bank_override_attempt") {
                cite(a, "urgent_payment_pressure", Some(l));
            }
        }
    }
    /// The reason codes (with the lines they rest on), campaign signals and issue flags.
    fn cite_reasons(&self, a: &mut Assessment, first: Option<&Invoice>, f: &Findings) {
        let (bank, mail, batch) = (&f.bank, &f.mail, &f.batch);
        let cross_vendor_shared = batch.shared.is_some() && a.cross_links.is_empty();
        let bank_line = bank
            .mismatched
            .first()
            .and_then(|i| i.bank.as_ref())
            .map(|b| b.1.clone());
        // A bill that bills under a variant of the vendor's name (the master's name with more
        // after it) and pays an account the master does not know: someone billing as the vendor.
        let impostor = bank.mismatch && self.billed_under_a_name_variant();
        if self.task == Some(TaskC) {
            if bank.mismatch && !impostor && !cross_vendor_shared && a.cross_links.is_empty() {
                cite(a, "bank_override_attempt", bank_line.as_ref());
            }
        } else if mail.bank_override || (bank.mismatch && mail.takeover.is_some()) {
            cite(
                a,
                "bank_override_attempt",
                bank_line
                    .as_ref()
                    .or(first.and_then(|i| i.bank.as_ref()).map(|b| &b.1)),
            );
        }
        self.cite_mail_reasons(a, f);
        if let Some(l) = &mail.evasion_line {
            cite(a, "approval_threshold_evasion", Some(l));
            a.campaign.insert("approval_threshold_evasion");
        }
        if !a.duplicate_links.is_empty() && batch.dup_line.is_some() {
            cite(a, "duplicate_near_match", batch.dup_line.as_ref());
        }
        if let Some(l) = &batch.shared {
            cite(a, "shared_bank_account", Some(l));
            a.campaign.insert("shared_bank_account");
        }
        if let Some(l) = &batch.timing {
            cite(a, "coordinated_timing", Some(l));
            a.campaign.insert("coordinated_timing");
        }
        if self.task == Some(TaskD) {
            a.campaign.clear();
        }

        // An unknown account on a bill under a variant of the vendor's name, or one nothing else
        // explains (no reason found at all; not a batch of this vendor's bills sharing it): the
        // vendor account is taken over, shown by the bank line itself. Without it such an
        // escalation named no reason (phantom vendors, layering seen without the cluster report).
        if bank.mismatch
            && (impostor || a.codes.is_empty())
            && a.cross_links.is_empty()
            && !a.codes.contains("bank_override_attempt")
            && !a.codes.contains("vendor_account_takeover_suspected")
        {
            cite(a, "vendor_account_takeover_suspected", bank_line.as_ref());
        }

        a.bank_issue =
            bank.mismatch || mail.bank_override || mail.takeover.is_some() || f.chain_bad;
        a.security_issue = mail.spoof.is_some() || mail.bypass.is_some() || mail.injection;
        a.duplicate_issue = !a.duplicate_links.is_empty()
            || batch.duplicate
            || mail.evasion_line.is_some()
            || batch.shared.is_some();
    }

    /// The four policy checks (Tasks D and E; Task C reports none).
    fn check_policies(&self, a: &mut Assessment, invoices: &[&Invoice], f: &Findings) {
        let three_way_ok = invoices.iter().all(|inv| match &inv.po {
            Some((po, _)) => {
                if self.po_missing.contains(po) {
                    return false;
                }
                match self.pos.get(po).map(|p| p.total) {
                    Some(t) => inv
                        .total_value()
                        .is_some_and(|x| (x - t).abs() <= Decimal::new(1, 2)),
                    None => inv.receipt.is_some(),
                }
            }
            None => false,
        });
        a.policy_checks.insert(
            "three_way_match",
            if three_way_ok { "pass" } else { "fail" },
        );
        a.policy_checks.insert(
            "bank_change_verification",
            if a.bank_issue || f.callback_bad {
                "fail"
            } else {
                "pass"
            },
        );
        a.policy_checks.insert(
            "duplicate_check",
            if !a.duplicate_links.is_empty() || f.batch.duplicate {
                "fail"
            } else {
                "pass"
            },
        );
        let approval_needed = self
            .threshold_rules()
            .first()
            .copied()
            .unwrap_or(Decimal::from(5000));
        let big = invoices
            .iter()
            .any(|i| i.total_value().is_some_and(|t| t >= approval_needed));
        let verbal_override = f.mail.bypass.is_some() && big;
        a.policy_checks.insert(
            "approval_threshold_check",
            if f.mail.evasion_line.is_some() || verbal_override {
                "fail"
            } else {
                "pass"
            },
        );
    }

    /// Tasks D and E, a payment about to be released: an invoice whose looked-up PO total differs
    /// from its own is a billing discrepancy, cited with the lines the Task B pass finds (price,
    /// quantity, total), so that [`Self::decide`] routes it to HOLD instead. (Cited on a case
    /// already held or escalated for other reasons, these codes cost more precision on the
    /// generated holdouts than they add recall, measured.) A PO that is missing
    /// or was not looked up adds nothing: it stays a pass-through for benign cases. Whether a
    /// code was added.
    fn cite_po_mismatch(&self, a: &mut Assessment, invoices: &[&Invoice]) -> bool {
        let total_differs = invoices.iter().any(|inv| {
            let Some((po, _)) = &inv.po else { return false };
            let po_total = self.pos.get(po).map(|p| p.total);
            match (po_total, inv.total_value()) {
                (Some(pt), Some(t)) => (pt - t).abs() > Decimal::new(1, 2),
                _ => false,
            }
        });
        if !total_differs {
            return false;
        }
        let mut found = Assessment::default();
        self.assess_three_way(&mut found, invoices);
        let before = a.codes.len();
        for code in found.discrepancies {
            if matches!(
                code,
                "price_mismatch" | "quantity_mismatch" | "total_mismatch"
            ) {
                a.codes.insert(code);
                if let Some(ev) = found.evidence.remove(code) {
                    a.evidence.insert(code.to_owned(), ev);
                }
            }
        }
        a.codes.len() > before
    }

    /// The decision and its confidence from the reasons found.
    fn decide(&self, a: &mut Assessment, f: &Findings) {
        // In a Task C batch, identical bills are a reason only when the analyst can name one (a
        // ledger hit, a split under a limit, a shared account): a vendor's recurring bills look
        // the same, and an escalation must name what it rests on.
        let risky = !a.codes.is_empty()
            || f.bank.mismatch
            || f.callback_bad
            || f.chain_bad
            || (f.batch.duplicate && self.task != Some(TaskC));
        if !risky {
            a.decision = Some(Decision::Pay);
            a.confidence = 0.9;
        } else if self.task == Some(TaskC)
            && a.codes.len() == 1
            && a.codes.contains("approval_threshold_evasion")
        {
            a.decision = Some(Decision::NeedsReview);
            a.confidence = 0.88;
        } else if !a.codes.is_empty()
            && a.codes.iter().all(|c| {
                matches!(
                    *c,
                    "duplicate_near_match"
                        | "approval_threshold_evasion"
                        | "price_mismatch"
                        | "quantity_mismatch"
                        | "total_mismatch"
                )
            })
            && !a.bank_issue
            && !a.security_issue
            && !f.callback_bad
        {
            // Only billing-control failures, whose policies route to HOLD: no fraud indicator.
            a.decision = Some(Decision::Hold);
            a.confidence = 0.9;
        } else {
            a.decision = Some(Decision::EscalateFraud);
            a.confidence = 0.95;
        }
    }

    /// A PAY cites the results of the checks the policy requires before release, as the tools
    /// returned them: the PO and goods receipt records of the three-way match (Task B), the
    /// vendor master record the invoice's account was compared with and matched (Tasks C–E).
    fn cite_verifications(&self, a: &mut Assessment, first: Option<&Invoice>) {
        match self.task {
            Some(TaskB) => {
                if let Some((po, _)) = first.and_then(|inv| inv.po.as_ref()) {
                    if self.pos.contains_key(po) {
                        a.evidence
                            .insert("three_way_match_po".into(), Cite::record(PoId, po));
                    }
                    // The receipt the three-way match looked up (named on the invoice, else the
                    // PO's goods receipt note).
                    let rc = first
                        .and_then(|inv| inv.receipt.as_ref())
                        .map(|r| r.0.clone())
                        .unwrap_or_else(|| po.replacen("PO-", "GRN-", 1));
                    if self.receipts.contains_key(&rc) {
                        a.evidence.insert(
                            "three_way_match_receipt".into(),
                            Cite::record(ReceiptId, rc),
                        );
                    }
                }
            }
            Some(TaskA) => {}
            _ => {
                let matched = self.bank_results.values().any(|m| *m);
                if let (true, Some(v)) = (matched, &self.vendor_key) {
                    a.evidence
                        .insert("bank_account_verified".into(), Cite::record(VendorKey, v));
                }
            }
        }
        if let Some((_, l)) = first.and_then(|inv| inv.total.as_ref()) {
            a.evidence.insert("invoice_total".into(), l.cite());
        }
    }

    /// A goods receipt's received line items: (description, quantity).
    fn received_items(&self, receipt_id: &str) -> Vec<(String, Decimal)> {
        self.receipts
            .get(receipt_id)
            .into_iter()
            .flat_map(|r| &r.received_line_items)
            .map(|l| (l.description.clone(), l.qty))
            .collect()
    }

    fn assess_three_way(&self, a: &mut Assessment, invoices: &[&Invoice]) {
        for inv in invoices {
            let Some((po_id, po_line)) = &inv.po else {
                a.discrepancies.insert("missing_po");
                if let Some(l) = inv.number.as_ref().map(|n| &n.1) {
                    a.evidence.insert("missing_po".into(), l.cite());
                }
                continue;
            };
            let receipt_id = inv
                .receipt
                .as_ref()
                .map(|r| r.0.clone())
                .unwrap_or_else(|| po_id.replacen("PO-", "GRN-", 1));
            if inv.receipt.is_none() || self.receipt_missing.contains(&receipt_id) {
                a.discrepancies.insert("missing_receipt");
                a.evidence.insert("missing_receipt".into(), po_line.cite());
            }
            let Some(po) = self.pos.get(po_id) else {
                if self.po_missing.contains(po_id) {
                    a.discrepancies.insert("missing_po");
                    a.evidence.insert("missing_po".into(), po_line.cite());
                }
                continue;
            };
            let po_items = order_items(po);
            let received = self.received_items(&receipt_id);
            for item in &inv.items {
                let d = normalize_text(&item.description);
                match po_items.iter().find(|p| normalize_text(&p.0) == d) {
                    Some(p) => {
                        if p.2 != item.unit_price {
                            a.discrepancies.insert("price_mismatch");
                            a.evidence
                                .entry("price_mismatch".into())
                                .or_insert_with(|| item.line.cite());
                        }
                        let received_qty = received
                            .iter()
                            .find(|r| normalize_text(&r.0) == d)
                            .map(|r| r.1);
                        // Billed over the order is a quantity mismatch; billed over what arrived
                        // of a complete order is one too (a short receipt is named below).
                        let over_po = item.qty > p.1;
                        let receipt_complete = received_qty.is_some_and(|q| q >= p.1);
                        let over_receipt = self.receipts.contains_key(&receipt_id)
                            && receipt_complete
                            && received_qty.is_none_or(|q| item.qty > q);
                        if over_po || over_receipt {
                            a.discrepancies.insert("quantity_mismatch");
                            a.evidence
                                .entry("quantity_mismatch".into())
                                .or_insert_with(|| item.line.cite());
                        }
                    }
                    None => {
                        a.discrepancies.insert("price_mismatch");
                        a.evidence
                            .entry("price_mismatch".into())
                            .or_insert_with(|| item.line.cite());
                    }
                }
            }
            // The goods receipt short of the order (a line received in part or not at all): the
            // match fails on the receipt, shown by the invoice's receipt reference.
            let short = self.receipts.contains_key(&receipt_id)
                && po_items.iter().any(|(d, q, _)| {
                    let d = normalize_text(d);
                    received
                        .iter()
                        .find(|r| normalize_text(&r.0) == d)
                        .is_none_or(|r| r.1 < *q)
                });
            if short {
                a.discrepancies.insert("partial_receipt_only");
                if let Some((_, l)) = &inv.receipt {
                    a.evidence
                        .entry("partial_receipt_only".into())
                        .or_insert_with(|| l.cite());
                }
            }
            let po_total = Some(po.total);
            if let (Some(pt), Some((t, tl))) = (po_total, &inv.total) {
                if (pt - *t).abs() > Decimal::new(1, 2) {
                    a.discrepancies.insert("total_mismatch");
                    a.evidence.insert("total_mismatch".into(), tl.cite());
                }
            }
        }
        // Delivered reconciliation reports confirm what was computed.
        a.policy_checks.insert(
            "three_way_match",
            if a.discrepancies.is_empty() {
                "pass"
            } else {
                "fail"
            },
        );
        if a.discrepancies.is_empty() {
            if let Some(inv) = invoices.first() {
                if let Some((_, l)) = &inv.total {
                    a.evidence
                        .insert("invoice_total_matches_po".into(), l.cite());
                }
                if let Some((_, l)) = &inv.po {
                    a.evidence.insert("po_reference".into(), l.cite());
                }
            }
        }
    }

    /// A three-way match's follow-ups: reconcile the PO for a mismatch, ask for the receipt.
    fn plan_match_interventions(&mut self, a: &Assessment) {
        if a.discrepancies.iter().any(|d| {
            matches!(
                *d,
                "price_mismatch" | "quantity_mismatch" | "total_mismatch" | "missing_po"
            )
        }) {
            self.intervene("request_po_reconciliation", json!({"po_id": self.invoices.values().next().and_then(|i| i.po.as_ref()).map(|p| p.0.clone())}));
        }
        if a.discrepancies.contains("missing_receipt") {
            self.intervene("request_additional_receipt_evidence", json!({}));
        }
    }

    fn plan_interventions(&mut self, a: &Assessment) {
        if !self.cfg.interventions {
            return;
        }
        if a.decision == Some(Decision::Pay) {
            // A high-risk payment signal (a bank-change notice, even a verified one) needs the
            // callback before any release, as the control boundary requires.
            if self.observed_any(&HIGH_RISK_PAYMENT_SIGNALS) {
                self.intervene_on_vendor("request_callback_verification");
            }
            // A prior-payment signal must be reviewed before any release.
            if self.observed_any(&DUPLICATE_SIGNALS) {
                self.intervene_on_vendor("flag_duplicate_cluster_review");
            }
            return;
        }
        if self.task == Some(TaskB) {
            self.plan_match_interventions(a);
        }
        if self.task != Some(TaskB) || self.full_review() {
            let callback = a.bank_issue
                || a.codes.contains("policy_bypass_attempt")
                || a.codes.contains("vendor_account_takeover_suspected")
                || a.codes.contains("shared_bank_account")
                || a.codes.contains("coordinated_timing");
            if callback {
                self.intervene_on_vendor("request_callback_verification");
            }
            // The approval chain documents a bank-account change: requested when the analyst
            // names one (an override or a takeover), not for a mismatched account alone, whose
            // control is the callback.
            let change_named = a.codes.contains("bank_override_attempt")
                || a.codes.contains("vendor_account_takeover_suspected");
            if change_named {
                self.intervene_on_vendor("request_bank_change_approval_chain");
            }
            // A bank fraud may be one leg of a layering scheme: the duplicate-cluster report
            // shows whether the account is shared with other vendors.
            let layering_check = self.task == Some(TaskD)
                && change_named
                && a.decision == Some(Decision::EscalateFraud);
            if a.duplicate_issue
                || layering_check
                || self.task == Some(TaskC)
                || self.task == Some(TaskE)
            {
                self.intervene_on_vendor("flag_duplicate_cluster_review");
            }
            if a.decision == Some(Decision::EscalateFraud)
                && (a.security_issue || self.task == Some(TaskE))
            {
                self.intervene_on_vendor("route_to_security");
            }
            if a.decision == Some(Decision::EscalateFraud)
                && (a.bank_issue
                    || a.codes.contains("shared_bank_account")
                    || self.task == Some(TaskE))
            {
                self.intervene_on_vendor("freeze_vendor_profile");
            }
        }
        let next = match (self.task, a.decision) {
            (Some(TaskE), _) => "campaign_freeze_and_manual_review",
            (_, Some(Decision::EscalateFraud)) => "security_review_and_callback_followup",
            (_, Some(Decision::Hold)) => "procurement_reconciliation_before_release",
            _ => "manual_review_before_release",
        };
        let summary = format!(
            "{} recommended for {}: {}.",
            a.decision.map_or("", Decision::as_str),
            self.invoice_ids.join(", "),
            if a.codes.is_empty() {
                a.discrepancies
                    .iter()
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                a.codes.iter().copied().collect::<Vec<_>>().join(", ")
            }
        );
        self.intervene("create_human_handoff", json!({"summary": summary.chars().take(600).collect::<String>(), "recommended_next_step": next, "confidence": a.confidence}));
    }

    /// Follow-ups once artifacts arrive (the other vendor behind a shared account).
    fn plan_followups(&mut self) {
        if self.followups_planned {
            return;
        }
        let Some(cluster) = self.artifacts.get("duplicate_cluster_report") else {
            return;
        };
        self.followups_planned = true;
        let own = self.vendor_key.clone().unwrap_or_default();
        let vendors: BTreeSet<String> = cluster
            .get("evidence")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("vendor_key").and_then(Value::as_str))
            .filter(|v| normalize_id(v) != normalize_id(&own))
            .map(str::to_owned)
            .take(2)
            .collect();
        for v in vendors {
            self.push(
                "lookup_vendor_history",
                json!({"vendor_key": v}),
                Purpose::History(v.clone()),
            );
        }
    }

    // ----- submission -----

    /// Task E's condition on the linked invoices (split billing or a shared account), if any.
    fn linked_condition(&self, a: &Assessment) -> Option<String> {
        if self.task != Some(TaskE) || a.cross_links.is_empty() {
            return None;
        }
        let linked: Vec<String> = a
            .cross_links
            .iter()
            .filter_map(|id| self.invoices.get(id))
            .map(|i| {
                format!(
                    "{} ({})",
                    i.doc_id,
                    i.total_value().map(dstr).unwrap_or_default()
                )
            })
            .collect();
        Some(if a.split_links {
            format!(
                "the linked invoices {} had not billed one order in parts under the approval limit",
                linked.join(", ")
            )
        } else {
            format!("the linked invoices {} had not shared one unverified remittance account within days of each other", linked.join(", "))
        })
    }
    fn counterfactual(&self, a: &Assessment) -> String {
        if self.task == Some(TaskA) {
            return "If any requested field had been missing or unreadable on the invoice, or the bank account had failed validation, we would hold the invoice instead of paying it.".to_owned();
        }
        if a.decision == Some(Decision::Pay) {
            return "If the bank account had not matched the vendor master, the sender domain had been spoofed or a duplicate payment had existed in the ledger, we would hold the invoice instead of paying it.".to_owned();
        }
        if self.task == Some(TaskB) {
            return format!(
                "If the invoice had matched its purchase order and goods receipt without {}, we would pay the invoice instead of holding it.",
                a.discrepancies.iter().map(|d| d.replace('_', " ")).collect::<Vec<_>>().join(" or ")
            );
        }
        let mut conds = Vec::new();
        if a.codes.contains("sender_domain_spoof") {
            conds.push("the sender domain had matched the approved vendor domain".to_owned());
        }
        if a.bank_issue {
            conds.push("the bank account had matched the vendor master and the callback had verified the request".to_owned());
        }
        if a.codes.contains("policy_bypass_attempt") {
            conds.push(
                "the request had not asked to skip verification or the approval workflow"
                    .to_owned(),
            );
        }
        if !a.duplicate_links.is_empty() {
            conds.push(format!(
                "no duplicate payment such as {} existed in the ledger",
                a.duplicate_links
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if a.codes.contains("approval_threshold_evasion") {
            conds.push(
                "the amounts had not been split to stay under the approval threshold".to_owned(),
            );
        }
        if let Some(c) = self.linked_condition(a) {
            conds.push(c);
        }
        if conds.is_empty() {
            conds.push("every control check had passed".to_owned());
        }
        let verb = match a.decision {
            Some(Decision::Hold) => "holding",
            Some(Decision::NeedsReview) => "routing it to review",
            _ => "escalating",
        };
        format!(
            "If {}, we would pay the invoice instead of {verb} it.",
            conds.join(", and ")
        )
        .replace("routing it to review it", "routing it to review")
    }

    fn build_submission(&self, a: &Assessment) -> SubmissionDraft {
        let mut p = SubmissionDraft {
            decision: a.decision,
            confidence: a.confidence,
            ..Default::default()
        };
        let mut evidence: Ordered<String, Cite> = a
            .evidence
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if self.task == Some(TaskA) {
            let (fields, items, ev) = self.extraction();
            p.extracted_fields = Some(fields);
            p.line_items = Some(items);
            evidence = ev;
            p.reason_codes = Some(Vec::new());
        } else {
            let codes: Vec<&'static str> = a.codes.iter().copied().collect();
            let links: Vec<String> = a.duplicate_links.iter().cloned().collect();
            p.reason_codes = Some(codes.clone());
            p.policy_checks = Some(a.policy_checks.iter().map(|(k, v)| (*k, *v)).collect());
            p.counterfactual = Some(self.counterfactual(a));
            match self.task {
                Some(TaskB) => {
                    p.discrepancies = Some(a.discrepancies.iter().copied().collect());
                }
                Some(TaskC) => {
                    p.fraud_flags = Some(codes);
                    p.duplicate_links = Some(links);
                    p.discrepancies = Some(Vec::new());
                }
                Some(TaskD) => {
                    p.duplicate_links = (!links.is_empty()).then_some(links);
                }
                _ => {
                    p.campaign_signals = Some(a.campaign.iter().copied().collect());
                    p.cross_invoice_links = Some(if a.decision == Some(Decision::Pay) {
                        Vec::new()
                    } else {
                        a.cross_links.clone()
                    });
                    // The ledger ids of earlier payments the batch repeats (the instruction asks
                    // for them; graded as the batch's links when it links no invoices).
                    p.duplicate_links = (!links.is_empty()).then_some(links);
                }
            }
        }
        if self.cfg.certificate {
            p.decision_certificate = Some(self.certificate(a, &evidence));
        }
        p.evidence_map = evidence;
        p
    }

    /// Task A: fields, line items and per-field evidence from the OCR'd lines.
    fn extraction(
        &self,
    ) -> (
        Ordered<&'static str, String>,
        Vec<LineItemDraft>,
        Ordered<String, Cite>,
    ) {
        let mut fields = Ordered::default();
        let mut ev = Ordered::default();
        let mut items = Vec::new();
        if let Some(inv) = self.ordered_invoices().first() {
            let mut put = |k: &'static str, v: String, l: &Line| {
                fields.0.push((k, v));
                ev.0.push((k.to_owned(), l.cite()));
            };
            if let Some(l) = &inv.vendor {
                put("vendor_name", l.text.trim().to_owned(), l);
            }
            for (k, f) in [
                ("invoice_number", &inv.number),
                ("invoice_date", &inv.date),
                ("currency", &inv.currency),
                ("po_id", &inv.po),
                ("receipt_id", &inv.receipt),
                ("bank_account", &inv.bank),
            ] {
                if let Some((v, l)) = f {
                    put(k, v.clone(), l);
                }
            }
            for (k, f) in [
                ("subtotal", &inv.subtotal),
                ("tax", &inv.tax),
                ("total", &inv.total),
            ] {
                if let Some((v, l)) = f {
                    put(k, v.normalize().to_string(), l);
                }
            }
            for it in &inv.items {
                items.push(LineItemDraft {
                    description: it.description.clone(),
                    qty: it.qty.normalize().to_string(),
                    unit_price: it.unit_price.normalize().to_string(),
                    line_total: it.line_total.normalize().to_string(),
                });
            }
        }
        (fields, items, ev)
    }

    /// Agent-authored decision certificate over what the teacher saw.
    fn certificate(&self, a: &Assessment, evidence: &Ordered<String, Cite>) -> CertificateDraft {
        const FINAL: &str = "decision.final";
        let mut c = CertificateDraft::default();
        let mut decision = NodeDraft::new(FINAL, NodeKind::Decision);
        decision.value = a.decision;
        c.node(decision);
        let ev_ids: Vec<String> = evidence
            .0
            .iter()
            .take(12)
            .map(|(k, _)| format!("evidence.{k}"))
            .collect();
        for ((k, v), id) in evidence.0.iter().zip(&ev_ids) {
            c.node(
                NodeDraft::new(id, NodeKind::Observation)
                    .cite(v.clone())
                    .label(k),
            );
            c.edge(id, EdgeKind::Supports, FINAL);
        }
        for id in self.artifacts.keys().take(5) {
            let contradicts = a.decision == Some(Decision::Pay)
                && self
                    .artifacts
                    .get(id)
                    .and_then(|d| d.get("risk_signal"))
                    .and_then(Value::as_str)
                    .is_some_and(|s| s != "callback_clean" && s != "callback_no_answer");
            let node = format!("artifact.{id}");
            c.node(NodeDraft::new(&node, NodeKind::Artifact).cite(Cite::record(ArtifactId, id)));
            let kind = if contradicts {
                EdgeKind::Contradicts
            } else {
                EdgeKind::Supports
            };
            c.edge(node, kind, FINAL);
        }
        self.certify_reasons(&mut c, a, evidence, &ev_ids);
        c
    }

    /// The certificate's reasons: each claimed code as a hypothesis resting on its evidence, the
    /// policy checks, the interventions taken, Task A's completeness and the counterfactual.
    fn certify_reasons(
        &self,
        c: &mut CertificateDraft,
        a: &Assessment,
        evidence: &Ordered<String, Cite>,
        ev_ids: &[String],
    ) {
        const FINAL: &str = "decision.final";
        for code in a.codes.iter().take(8) {
            let Some(src) = evidence
                .0
                .iter()
                .any(|(k, _)| k == code)
                .then(|| format!("evidence.{code}"))
                .or_else(|| ev_ids.first().cloned())
            else {
                continue;
            };
            let node = format!("hypothesis.{code}");
            c.node(NodeDraft::new(&node, NodeKind::Hypothesis).label(*code));
            c.edge(src, EdgeKind::Supports, &node);
            c.edge(node, EdgeKind::Supports, FINAL);
        }
        if let Some(first) = ev_ids.first() {
            for (k, v) in a.policy_checks.iter().take(4) {
                let node = format!("policy.{k}");
                c.node(NodeDraft::new(&node, NodeKind::Policy).label(format!("{k}: {v}")));
                c.edge(first, EdgeKind::Supports, &node);
                c.edge(node, EdgeKind::Supports, FINAL);
            }
        }
        for name in self.interventions.iter().take(6) {
            let node = format!("intervention.{name}");
            c.node(NodeDraft::new(&node, NodeKind::Intervention).label(name));
            c.edge(node, EdgeKind::Supports, FINAL);
        }
        if self.task == Some(TaskA) {
            if let Some(first) = ev_ids.first() {
                const COMPLETE: &str = "policy.extraction_complete";
                c.node(
                    NodeDraft::new(COMPLETE, NodeKind::Policy)
                        .label("extraction_complete: every requested field read from the invoice"),
                );
                c.edge(first, EdgeKind::Supports, COMPLETE);
                c.edge(COMPLETE, EdgeKind::Supports, FINAL);
            }
        }
        const COUNTERFACTUAL: &str = "counterfactual.primary";
        c.node(
            NodeDraft::new(COUNTERFACTUAL, NodeKind::Counterfactual).label(self.counterfactual(a)),
        );
        if let Some(first) = ev_ids.first() {
            c.edge(first, EdgeKind::Supports, COUNTERFACTUAL);
        }
        c.edge(COUNTERFACTUAL, EdgeKind::WouldFlip, FINAL);
    }

    fn steps_left(env: &StepEnvelope) -> u32 {
        env.observation
            .max_steps
            .saturating_sub(env.observation.step_count)
    }

    fn submit(&self) -> Action {
        let a = self.assess();
        Action {
            action_type: "submit_decision".into(),
            payload: outbound_payload(&self.build_submission(&a)),
        }
    }
}

impl Agent for TeacherAgent {
    fn name(&self) -> String {
        if self.cfg.always_pay {
            return crate::CHECKLIST_PAY.into();
        }
        match (
            self.cfg.interventions,
            self.cfg.certificate,
            self.cfg.wait_for_artifacts,
        ) {
            (true, true, true) => "teacher".into(),
            (false, true, true) => "teacher-no-controls".into(),
            (true, false, true) => "teacher-no-certificate".into(),
            (true, true, false) => "teacher-no-artifact-wait".into(),
            _ => "teacher-ablated".into(),
        }
    }
    fn model(&self) -> String {
        if self.name() == "teacher" {
            "ledgershield/deterministic-baseline".into()
        } else {
            format!("ledgershield/{}", self.name())
        }
    }
    fn agent_type(&self) -> String {
        "deterministic-policy".into()
    }
    fn begin(&mut self, reset: &StepEnvelope, _seed: u64) {
        *self = TeacherAgent::with_config(self.cfg);
        self.task = TaskType::from_wire(&reset.observation.task_type);
        self.instruction = reset.observation.instruction.to_string();
        self.stage = Some(Stage::Documents);
        self.plan_documents(reset);
    }

    fn next_action(&mut self, last: &StepEnvelope) -> Action {
        if let Some(p) = self.last_purpose.take() {
            self.absorb(&p, last);
        }
        self.refresh(last);
        loop {
            if Self::steps_left(last) <= 1 {
                return self.submit();
            }
            if let Some((a, p)) = self.queue.pop_front() {
                self.last_purpose = Some(p);
                return a;
            }
            match self.stage.unwrap_or(Stage::Submit) {
                Stage::Documents => {
                    self.stage = Some(Stage::Investigation);
                    self.plan_investigation();
                    if self.task == Some(TaskA) || self.task == Some(TaskB) {
                        // no second wave
                    }
                }
                Stage::Investigation => {
                    if self.full_review() && !self.ledger_searched && self.draft.is_none() {
                        self.plan_corroboration();
                        self.draft = Some(Assessment::default());
                        continue;
                    }
                    let a = self.assess();
                    self.stage = Some(Stage::Interventions);
                    self.plan_interventions(&a);
                    self.draft = Some(a);
                }
                Stage::Interventions => {
                    self.plan_followups();
                    if self.queue.is_empty() {
                        self.stage = Some(Stage::Drain);
                    }
                }
                Stage::Drain => {
                    self.plan_followups();
                    if !self.queue.is_empty() {
                        continue;
                    }
                    let pending = !last.observation.pending_events.is_empty();
                    if self.cfg.wait_for_artifacts
                        && pending
                        && self.drained < MAX_DRAIN_STEPS
                        && Self::steps_left(last) > 2
                    {
                        self.drained += 1;
                        let ids = [
                            "three-way-match",
                            "bank-change-verification",
                            "duplicate-check",
                            "approval-threshold-check",
                        ];
                        let rule = ids[(self.drained as usize - 1) % ids.len()];
                        self.last_purpose = Some(Purpose::Filler);
                        return Action::new("lookup_policy", json!({"rule_id": rule}));
                    }
                    // Re-assess with everything delivered: a fraud call learned late still gets its controls.
                    let a = self.assess();
                    let before = self
                        .draft
                        .as_ref()
                        .map(|d| d.decision)
                        .unwrap_or(Some(Decision::Pay));
                    if before == Some(Decision::Pay) && a.decision != Some(Decision::Pay) {
                        self.plan_interventions(&a);
                        self.draft = Some(a);
                        continue;
                    }
                    self.stage = Some(Stage::Submit);
                }
                Stage::Submit => return self.submit(),
            }
        }
    }
}
