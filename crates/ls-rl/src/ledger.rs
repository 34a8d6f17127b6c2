//! The evidence ledger: what an episode revealed, folded from its replies into typed rows.
//!
//! One ledger for every consumer: the structured observation ([`crate::observe`]), the factored
//! action space's pointers ([`crate::factored`]), the Python training code (through the
//! `ledgershield._native` bindings) and the text a language model is shown
//! ([`Ledger::render`]).
//!
//! A row is one thing the agent saw: a catalogue document, an OCR line (with the token it came from,
//! so it can be cited), an e-mail thread's header, a vendor master record, a vendor-history change,
//! a bank comparison, a ledger hit, a PO or goods-receipt record, a delivered artifact. Rows are
//! added in the order they were revealed; an accurate OCR read of a document replaces its fast
//! read's lines in place. After every reply the relations between revealed rows are recomputed
//! ([`Flag`]): they compare what was revealed with what was revealed (an invoice total with the
//! PO record it names, once both were read), never with anything hidden.

use crate::facts::{self, Email, Invoice, Line};
use ls_core::text::{compact_account, json_decimal, normalize_text, parse_decimal};
use ls_core::{ActionName, ArtifactId, ReasonCode, TaskType};
use ls_env::terminal_info::StepEnvelope;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// Catalogue documents the ledger keeps (and pointers can name).
pub const MAX_DOCS: usize = 8;
/// Rows the ledger keeps; later rows are dropped and counted in [`Ledger::dropped_rows`].
pub const MAX_ROWS: usize = 128;
/// Of which document lines at most this many (so records always find room).
pub const MAX_LINE_ROWS: usize = 96;
/// OCR lines kept per document (fields, items, cue lines; see [`keep_line`]).
pub const MAX_LINES_PER_DOC: usize = 18;

/// What a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKind {
    Document,
    Line,
    Thread,
    Vendor,
    History,
    BankCheck,
    LedgerHit,
    Po,
    Receipt,
    Artifact,
}

impl RowKind {
    pub const ALL: [RowKind; 10] = [
        Self::Document,
        Self::Line,
        Self::Thread,
        Self::Vendor,
        Self::History,
        Self::BankCheck,
        Self::LedgerHit,
        Self::Po,
        Self::Receipt,
        Self::Artifact,
    ];

    pub fn index(self) -> usize {
        Self::ALL.iter().position(|k| *k == self).expect("listed")
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Document => "document",
            Self::Line => "line",
            Self::Thread => "thread",
            Self::Vendor => "vendor",
            Self::History => "history",
            Self::BankCheck => "bank_check",
            Self::LedgerHit => "ledger_hit",
            Self::Po => "po",
            Self::Receipt => "receipt",
            Self::Artifact => "artifact",
        }
    }
}

/// The field a document line shows, from its label (or its position and shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LineClass {
    VendorName,
    InvoiceNumber,
    InvoiceDate,
    Currency,
    PoRef,
    ReceiptRef,
    Subtotal,
    Tax,
    Total,
    Bank,
    Item,
    From,
    Subject,
    Header,
    Body,
    Other,
}

impl LineClass {
    pub const ALL: [LineClass; 16] = [
        Self::VendorName,
        Self::InvoiceNumber,
        Self::InvoiceDate,
        Self::Currency,
        Self::PoRef,
        Self::ReceiptRef,
        Self::Subtotal,
        Self::Tax,
        Self::Total,
        Self::Bank,
        Self::Item,
        Self::From,
        Self::Subject,
        Self::Header,
        Self::Body,
        Self::Other,
    ];

    pub fn index(self) -> usize {
        Self::ALL.iter().position(|k| *k == self).expect("listed")
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::VendorName => "vendor_name",
            Self::InvoiceNumber => "invoice_number",
            Self::InvoiceDate => "invoice_date",
            Self::Currency => "currency",
            Self::PoRef => "po_id",
            Self::ReceiptRef => "receipt_id",
            Self::Subtotal => "subtotal",
            Self::Tax => "tax",
            Self::Total => "total",
            Self::Bank => "bank_account",
            Self::Item => "line_item",
            Self::From => "from",
            Self::Subject => "subject",
            Self::Header => "header",
            Self::Body => "body",
            Self::Other => "other",
        }
    }
}

/// Relations and readings of a row, computed from revealed rows only (one bit each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Flag {
    /// An invoice total equal to the total of the PO record it names (both read).
    MatchesPo,
    /// An invoice total, or an item's price or quantity, that differs from its PO record.
    DiffersFromPo,
    /// An item whose quantity differs from the goods receipt record.
    DiffersFromReceipt,
    /// An account equal to an account the vendor master allows (or a comparison that matched).
    MatchesMaster,
    /// An account the vendor master does not allow (or a comparison that did not match).
    DiffersFromMaster,
    /// An account on another vendor's invoice too (a shared remittance account).
    SharedAccount,
    /// An e-mail sender (or thread) whose domain is not among the vendor's approved domains.
    DomainMismatch,
    /// An invoice number an earlier payment carries exactly (or that exact ledger hit).
    LedgerExact,
    /// An invoice number or amount close to an earlier payment (or that near ledger hit).
    LedgerNear,
    /// A pending or rejected bank-change request (the history record, or an account it names).
    ChangeUnverified,
    /// An approved change to the account (the history record, or the account it names).
    ChangeApproved,
    /// Urgency wording ("urgent", "today", "immediately", ...).
    Urgency,
    /// Wording that asks to skip a control ("skip callback", "bypass", ...).
    Bypass,
    /// Wording of a moved receivables / new banking partner.
    Takeover,
    /// Wording about staying under an approval limit, or a note that a bill is one part of more.
    Threshold,
    /// Wording addressed to an AI ("ignore previous instructions", ...).
    Injection,
    /// A total just under an approval limit the policy names (policy read).
    UnderLimit,
    /// A record or artifact whose result is good (a matched comparison, a confirming callback,
    /// an approved chain).
    ResultGood,
    /// A record or artifact whose result is bad (a mismatch, a failed or disputed callback, a
    /// missing approval, a tool that found no record).
    ResultBad,
}

impl Flag {
    pub const ALL: [Flag; 19] = [
        Self::MatchesPo,
        Self::DiffersFromPo,
        Self::DiffersFromReceipt,
        Self::MatchesMaster,
        Self::DiffersFromMaster,
        Self::SharedAccount,
        Self::DomainMismatch,
        Self::LedgerExact,
        Self::LedgerNear,
        Self::ChangeUnverified,
        Self::ChangeApproved,
        Self::Urgency,
        Self::Bypass,
        Self::Takeover,
        Self::Threshold,
        Self::Injection,
        Self::UnderLimit,
        Self::ResultGood,
        Self::ResultBad,
    ];

    fn bit(self) -> u32 {
        1 << (self as u32)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MatchesPo => "matches_po",
            Self::DiffersFromPo => "differs_from_po",
            Self::DiffersFromReceipt => "differs_from_receipt",
            Self::MatchesMaster => "matches_master",
            Self::DiffersFromMaster => "differs_from_master",
            Self::SharedAccount => "shared_account",
            Self::DomainMismatch => "domain_mismatch",
            Self::LedgerExact => "ledger_exact",
            Self::LedgerNear => "ledger_near",
            Self::ChangeUnverified => "change_unverified",
            Self::ChangeApproved => "change_approved",
            Self::Urgency => "urgency",
            Self::Bypass => "bypass",
            Self::Takeover => "takeover",
            Self::Threshold => "threshold",
            Self::Injection => "injection",
            Self::UnderLimit => "under_limit",
            Self::ResultGood => "result_good",
            Self::ResultBad => "result_bad",
        }
    }
}

/// A set of [`Flag`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(u32);

impl Flags {
    pub fn has(self, f: Flag) -> bool {
        self.0 & f.bit() != 0
    }
    pub fn set(&mut self, f: Flag) {
        self.0 |= f.bit();
    }
    pub fn iter(self) -> impl Iterator<Item = Flag> {
        Flag::ALL.into_iter().filter(move |f| self.has(*f))
    }
}

/// One thing the agent saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub kind: RowKind,
    /// The catalogue slot of the document the row belongs to, if any.
    pub doc: Option<usize>,
    pub class: LineClass,
    /// The row's text: a line's words, a record's key and summary.
    pub text: String,
    /// The value a tool argument or an extracted field takes from this row (an id, an account,
    /// an invoice number, a vendor key; a line's value after its label).
    pub value: Option<String>,
    pub amount: Option<Decimal>,
    /// How a submission cites this row: a line as `{doc_id, page, bbox, token_ids}`, a record by
    /// the id the tool returned (`{"po_id": ...}`, `{"ledger_id": ...}`, `{"artifact_id": ...}`).
    pub reference: Value,
    pub flags: Flags,
    /// A failed lookup's row ("no such PO"): what was asked for, with [`Flag::ResultBad`].
    pub missing: bool,
}

impl Row {
    /// The ids a submission cites this row by: the string values of its reference (a line's
    /// document and token ids, a record's `po_id`, `vendor_key`, `ledger_id`, ...).
    pub fn cited_ids(&self) -> impl Iterator<Item = &str> {
        self.reference
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "page" && k.as_str() != "bbox")
            .flat_map(|(_, v)| match v {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            })
    }
}

/// A catalogue document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocEntry {
    pub doc_id: String,
    pub doc_type: String,
    /// Read with OCR (accurate).
    pub read: bool,
}

/// An inspected e-mail thread's readings.
#[derive(Debug, Clone, Default, PartialEq)]
struct Thread {
    thread_id: String,
    vendor_key: Option<String>,
    domain_mismatch: bool,
}

/// A vendor master record's allowed accounts and key.
#[derive(Debug, Clone, Default, PartialEq)]
struct Vendor {
    key: String,
    accounts: BTreeSet<String>,
}

/// The evidence ledger of one episode.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub task: Option<TaskType>,
    pub docs: Vec<DocEntry>,
    pub rows: Vec<Row>,
    /// Rows that did not fit ([`MAX_ROWS`]).
    pub dropped_rows: usize,
    /// Observed risk signals (the environment's detector readings of revealed content).
    pub signals: BTreeSet<ReasonCode>,
    /// Tools and interventions that succeeded, and those that failed at least once.
    pub succeeded: BTreeSet<ActionName>,
    pub failed: BTreeSet<ActionName>,
    pub interventions: BTreeSet<ActionName>,
    /// Artifacts delivered so far.
    pub artifacts: BTreeSet<ArtifactId>,
    pub pending_events: usize,
    pub budget_fraction: f64,
    pub step_fraction: f64,
    pub steps_left: u32,
    pub done: bool,
    /// Approval limits the policy names (after `lookup_policy`).
    limits: Vec<Decimal>,
    threads: Vec<Thread>,
    vendors: Vec<Vendor>,
    /// Invoices as read from their OCR lines, by catalogue slot.
    invoices: Vec<(usize, Invoice)>,
    emails: Vec<(usize, Email)>,
    /// PO and receipt records as the tools returned them.
    records: Vec<(RowKind, String, Map<String, Value>)>,
    /// Ledger hits: (invoice number, amount, match score).
    hits: Vec<(String, Option<Decimal>, f64)>,
}

/// Which OCR lines a row is worth: a document's first line, labelled fields, items, a tax id,
/// notes that say a bill is part of more, and every e-mail line but the transport headers;
/// addresses, terms and banners are left out (the rows are few).
fn keep_line(class: LineClass, text: &str) -> bool {
    let t = normalize_text(text);
    match class {
        LineClass::Header => false,
        LineClass::Body => {
            !["message-id", "reply-to", "x-", "mime", "content-"]
                .iter()
                .any(|p| t.starts_with(p))
                && !t.is_empty()
        }
        LineClass::Other => {
            ["vat", "gstin", "tax id", "tin"]
                .iter()
                .any(|p| t.starts_with(p))
                || [
                    " part ",
                    "part ",
                    "phase ",
                    "separately",
                    "instalment",
                    "installment",
                    "split",
                ]
                .iter()
                .any(|w| t.starts_with(w.trim_start()) || t.contains(w))
        }
        _ => true,
    }
}

fn words(text: &str, list: &[&str]) -> bool {
    let t = normalize_text(text);
    list.iter().any(|w| t.contains(w))
}

const INJECTION: [&str; 5] = [
    "ignore previous",
    "ignore prior",
    "as an ai",
    "disregard",
    "system prompt",
];

/// The class of an OCR line of a document of `doc_type`, at `position`.
fn classify(doc_type: &str, text: &str, position: usize) -> LineClass {
    let t = normalize_text(text);
    let has = |p: &str| t.starts_with(p);
    if doc_type == "invoice" {
        if position == 0 {
            return LineClass::VendorName;
        }
        for (p, c) in [
            ("invoice no", LineClass::InvoiceNumber),
            ("invoice date", LineClass::InvoiceDate),
            ("currency", LineClass::Currency),
            ("po:", LineClass::PoRef),
            ("receipt:", LineClass::ReceiptRef),
            ("subtotal", LineClass::Subtotal),
            ("tax:", LineClass::Tax),
            ("total", LineClass::Total),
            ("bank", LineClass::Bank),
            ("iban", LineClass::Bank),
            ("swift", LineClass::Bank),
        ] {
            if has(p) {
                return c;
            }
        }
        if text.split('|').count() == 4
            && text
                .split('|')
                .skip(1)
                .all(|p| parse_decimal(p.trim()).is_some())
        {
            return LineClass::Item;
        }
        return LineClass::Other;
    }
    if has("from:") {
        LineClass::From
    } else if has("subject:") {
        LineClass::Subject
    } else if has("to:") || has("cc:") || has("sent:") || has("date:") {
        LineClass::Header
    } else {
        LineClass::Body
    }
}

/// The value after a line's label (`Bank: X` -> `X`), or the whole line.
fn label_value(text: &str) -> String {
    match text.split_once(':') {
        Some((label, rest)) if label.len() <= 24 && !rest.trim().is_empty() => {
            rest.trim().to_owned()
        }
        _ => text.trim().to_owned(),
    }
}

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Fold one reply (a reset or a step) into the ledger.
    pub fn absorb(&mut self, env: &StepEnvelope) {
        let o = &env.observation;
        self.task = TaskType::from_wire(&o.task_type);
        self.absorb_catalogue(
            o.visible_documents
                .iter()
                .map(|d| (d.doc_id.as_str(), d.doc_type.as_str())),
        );
        self.signals = o
            .risk_snapshot
            .observed_signals
            .iter()
            .filter_map(|s| ReasonCode::from_wire(s))
            .collect();
        self.pending_events = o.pending_events.len();
        self.budget_fraction = if o.budget_total > 0.0 {
            (o.budget_remaining / o.budget_total).clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.step_fraction = f64::from(o.step_count) / f64::from(o.max_steps.max(1));
        self.steps_left = o.max_steps.saturating_sub(o.step_count);
        self.done = env.done;
        for a in &o.revealed_artifacts {
            if self.artifacts.insert(a.artifact_id) {
                self.absorb_artifact(a.artifact_id, &a.details);
            }
        }
        let r = &o.last_tool_result;
        if let Some(tool) = r
            .get("tool_name")
            .and_then(|v| v.as_str().and_then(ActionName::from_wire))
        {
            let success = r.get("success").and_then(|v| v.as_bool()).unwrap_or(false);
            self.absorb_result(tool, success, &|k| r.get(k));
        }
        self.relate();
        debug_assert!(self.rows.len() <= MAX_ROWS);
        debug_assert!(self.docs.len() <= MAX_DOCS);
    }

    fn absorb_catalogue<'a>(&mut self, docs: impl Iterator<Item = (&'a str, &'a str)>) {
        for (id, ty) in docs {
            if self.docs.iter().any(|d| d.doc_id == id) || self.docs.len() >= MAX_DOCS {
                continue;
            }
            let slot = self.docs.len();
            self.docs.push(DocEntry {
                doc_id: id.to_owned(),
                doc_type: ty.to_owned(),
                read: false,
            });
            self.push(Row {
                kind: RowKind::Document,
                doc: Some(slot),
                class: LineClass::Other,
                text: format!("{id} ({ty})"),
                value: Some(id.to_owned()),
                amount: None,
                reference: json!({"doc_id": id}),
                flags: Flags::default(),
                missing: false,
            });
        }
    }

    fn push(&mut self, row: Row) {
        let lines = self.rows.iter().filter(|r| r.kind == RowKind::Line).count();
        let room = if row.kind == RowKind::Line {
            lines < MAX_LINE_ROWS
        } else {
            true
        };
        if room && self.rows.len() < MAX_ROWS {
            self.rows.push(row);
        } else {
            self.dropped_rows += 1;
        }
    }

    /// A tool's or an intervention's result. `get` reads one field of the tool's reply.
    pub fn absorb_result(
        &mut self,
        tool: ActionName,
        success: bool,
        get: &dyn Fn(&str) -> Option<Value>,
    ) {
        if tool.is_intervention() {
            if success {
                self.interventions.insert(tool);
            }
            return;
        }
        if success {
            self.succeeded.insert(tool);
        } else {
            self.failed.insert(tool);
        }
        let obj = |k: &str| {
            get(k)
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default()
        };
        let text = |k: &str| get(k).and_then(|v| v.as_str().map(str::to_owned));
        use ActionName::*;
        match tool {
            Ocr if success => {
                if let Some(doc) = text("doc_id") {
                    let mut m = Map::new();
                    m.insert("tokens".into(), get("tokens").unwrap_or(Value::Null));
                    let accurate = text("mode").as_deref() == Some("accurate");
                    self.absorb_lines(&doc, &facts::lines_from_ocr(&doc, &m), accurate);
                }
            }
            InspectEmailThread if success => self.absorb_thread(&obj("thread")),
            LookupVendor if success => self.absorb_vendor(&obj("vendor")),
            LookupVendorHistory if success => {
                let key = text("vendor_key").unwrap_or_default();
                for h in get("history")
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .take(8)
                {
                    self.absorb_history(&key, h);
                }
            }
            CompareBankAccount if success => self.absorb_bank_check(
                text("vendor_key").unwrap_or_default(),
                text("proposed_bank_account").unwrap_or_default(),
                get("matched").and_then(|v| v.as_bool()).unwrap_or(false),
            ),
            SearchLedger if success => {
                for h in get("hits")
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .take(6)
                {
                    self.absorb_ledger_hit(h);
                }
            }
            LookupPo => self.absorb_record(RowKind::Po, "po_id", &obj("po"), success, get),
            LookupReceipt => self.absorb_record(
                RowKind::Receipt,
                "receipt_id",
                &obj("receipt"),
                success,
                get,
            ),
            LookupPolicy if success => {
                if let Some(rules) = get("policies").or_else(|| get("policy_rules")) {
                    self.limits = limits_of(&rules);
                }
            }
            _ => {}
        }
    }

    /// A bank comparison's verdict, as a record row naming the account compared.
    fn absorb_bank_check(&mut self, vendor_key: String, account: String, matched: bool) {
        let mut flags = Flags::default();
        let (result, relation, words) = if matched {
            (
                Flag::ResultGood,
                Flag::MatchesMaster,
                "matches the vendor master",
            )
        } else {
            (
                Flag::ResultBad,
                Flag::DiffersFromMaster,
                "does not match the vendor master",
            )
        };
        flags.set(result);
        flags.set(relation);
        self.push(Row {
            kind: RowKind::BankCheck,
            doc: None,
            class: LineClass::Bank,
            text: format!("bank comparison {account}: {words}"),
            value: Some(account),
            amount: None,
            reference: json!({ "vendor_key": vendor_key }),
            flags,
            missing: false,
        });
    }

    fn absorb_lines(&mut self, doc_id: &str, lines: &[Line], accurate: bool) {
        let Some(slot) = self.docs.iter().position(|d| d.doc_id == doc_id) else {
            return;
        };
        if self.docs[slot].read && !accurate {
            return; // an accurate read already stands
        }
        // An accurate read replaces a fast one.
        self.rows
            .retain(|r| !(r.kind == RowKind::Line && r.doc == Some(slot)));
        self.docs[slot].read |= accurate;
        let doc_type = self.docs[slot].doc_type.clone();
        if doc_type == "invoice" {
            let inv = Invoice::parse(doc_id, lines);
            self.invoices.retain(|(s, _)| *s != slot);
            self.invoices.push((slot, inv));
        } else {
            self.emails.retain(|(s, _)| *s != slot);
            self.emails.push((
                slot,
                Email {
                    doc_id: doc_id.to_owned(),
                    lines: lines.to_vec(),
                },
            ));
        }
        let kept: Vec<(usize, &Line, LineClass)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l, classify(&doc_type, &l.text, i)))
            .filter(|(i, l, class)| *i == 0 || keep_line(*class, &l.text))
            .take(MAX_LINES_PER_DOC)
            .collect();
        for (_, l, class) in kept {
            let value = label_value(&l.text);
            let amount = match class {
                LineClass::Subtotal | LineClass::Tax | LineClass::Total => parse_decimal(&value),
                LineClass::Item => l
                    .text
                    .rsplit('|')
                    .next()
                    .and_then(|v| parse_decimal(v.trim())),
                _ => None,
            };
            self.push(Row {
                kind: RowKind::Line,
                doc: Some(slot),
                class,
                text: l.text.clone(),
                value: Some(if class == LineClass::VendorName {
                    l.text.trim().to_owned()
                } else {
                    value
                }),
                amount,
                reference: l.evidence(),
                flags: Flags::default(),
                missing: false,
            });
        }
    }

    fn absorb_thread(&mut self, t: &Map<String, Value>) {
        let s = |k: &str| {
            t.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let profile = t.get("sender_profile").and_then(Value::as_object);
        let mismatch = profile
            .and_then(|p| p.get("domain_alignment"))
            .and_then(Value::as_str)
            .is_some_and(|a| a == "mismatch");
        let thread = Thread {
            thread_id: s("thread_id"),
            vendor_key: t
                .get("vendor_key")
                .and_then(Value::as_str)
                .map(str::to_owned),
            domain_mismatch: mismatch,
        };
        let mut flags = Flags::default();
        if mismatch {
            flags.set(Flag::DomainMismatch);
        }
        let signals = t.get("request_signals").and_then(Value::as_object);
        let on = |k: &str| {
            signals
                .and_then(|m| m.get(k))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        for (k, f) in [
            ("urgency_language", Flag::Urgency),
            ("callback_discouraged", Flag::Bypass),
            ("policy_override_language", Flag::Bypass),
            ("prompt_injection_language", Flag::Injection),
        ] {
            if on(k) {
                flags.set(f);
            }
        }
        let doc = self.docs.iter().position(|d| d.doc_id == thread.thread_id);
        self.push(Row {
            kind: RowKind::Thread,
            doc,
            class: LineClass::From,
            text: format!(
                "thread {} from {} ({})",
                thread.thread_id,
                s("sender"),
                s("subject")
            ),
            value: thread.vendor_key.clone(),
            amount: None,
            reference: json!({"thread_id": thread.thread_id}),
            flags,
            missing: false,
        });
        self.threads.retain(|x| x.thread_id != thread.thread_id);
        self.threads.push(thread);
    }

    fn absorb_vendor(&mut self, v: &Map<String, Value>) {
        let key = v
            .get("vendor_key")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut accounts: BTreeSet<String> = v
            .get("allowed_bank_accounts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(compact_account)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(b) = v.get("bank_account").and_then(Value::as_str) {
            accounts.insert(compact_account(b));
        }
        let name = v
            .get("vendor_name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.push(Row {
            kind: RowKind::Vendor,
            doc: None,
            class: LineClass::VendorName,
            text: format!("vendor master {key}: {name}"),
            value: Some(key.clone()),
            amount: None,
            reference: json!({"vendor_key": key}),
            flags: Flags::default(),
            missing: false,
        });
        self.vendors.retain(|x| x.key != key);
        self.vendors.push(Vendor { key, accounts });
    }

    fn absorb_history(&mut self, key: &str, h: &Value) {
        let s = |k: &str| {
            h.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let status = normalize_text(&s("status"));
        let mut flags = Flags::default();
        if status.contains("approved")
            || status.contains("verified")
            || status.contains("completed")
        {
            flags.set(Flag::ChangeApproved);
        } else if !status.is_empty() {
            flags.set(Flag::ChangeUnverified);
        }
        self.push(Row {
            kind: RowKind::History,
            doc: None,
            class: LineClass::Bank,
            text: format!(
                "{} {} {} -> {} ({})",
                s("change_id"),
                s("change_type"),
                s("old_value"),
                s("new_value"),
                s("status")
            ),
            value: Some(s("new_value")),
            amount: None,
            reference: json!({"vendor_key": key, "change_id": s("change_id")}),
            flags,
            missing: false,
        });
    }

    fn absorb_ledger_hit(&mut self, h: &Value) {
        let s = |k: &str| {
            h.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let score = h.get("match_score").and_then(Value::as_f64).unwrap_or(0.0);
        let mut flags = Flags::default();
        flags.set(if score >= 1.0 {
            Flag::LedgerExact
        } else {
            Flag::LedgerNear
        });
        let id = s("ledger_id");
        if self
            .rows
            .iter()
            .any(|r| r.kind == RowKind::LedgerHit && r.value.as_deref() == Some(id.as_str()))
        {
            return;
        }
        self.hits.push((
            s("invoice_number"),
            h.get("amount").and_then(json_decimal),
            score,
        ));
        self.push(Row {
            kind: RowKind::LedgerHit,
            doc: None,
            class: LineClass::InvoiceNumber,
            text: format!(
                "ledger {id}: {} {} ({}, match {score})",
                s("invoice_number"),
                h.get("amount").map(Value::to_string).unwrap_or_default(),
                s("payment_status")
            ),
            value: Some(id.clone()),
            amount: h.get("amount").and_then(json_decimal),
            reference: json!({"ledger_id": id}),
            flags,
            missing: false,
        });
    }

    /// A PO or receipt lookup: the record, or (failed) a row naming what was not found.
    fn absorb_record(
        &mut self,
        kind: RowKind,
        id_key: &str,
        rec: &Map<String, Value>,
        success: bool,
        get: &dyn Fn(&str) -> Option<Value>,
    ) {
        let id = rec
            .get(id_key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| get(id_key).and_then(|v| v.as_str().map(str::to_owned)))
            .unwrap_or_default();
        if id.is_empty()
            || self
                .rows
                .iter()
                .any(|r| r.kind == kind && r.value.as_deref() == Some(id.as_str()))
        {
            return;
        }
        let mut flags = Flags::default();
        if !success {
            flags.set(Flag::ResultBad);
        }
        self.push(Row {
            kind,
            doc: None,
            class: if kind == RowKind::Po {
                LineClass::PoRef
            } else {
                LineClass::ReceiptRef
            },
            text: if success {
                format!("{} record {id}", kind.as_str())
            } else {
                format!("{} {id} not found", kind.as_str())
            },
            value: Some(id.clone()),
            amount: rec.get("total").and_then(json_decimal),
            reference: json!({ id_key: id }),
            flags,
            missing: !success,
        });
        if success {
            self.records.push((kind, id, rec.clone()));
        }
    }

    fn absorb_artifact(&mut self, id: ArtifactId, details: &Map<String, Value>) {
        let text = serde_json::to_string(details).unwrap_or_default();
        let t = normalize_text(&text);
        let mut flags = Flags::default();
        let bad = [
            "dispute",
            "denies",
            "adversarial",
            "fail",
            "rejected",
            "missing",
            "not_found",
            "mismatch",
            "suspicious",
        ];
        if bad.iter().any(|w| t.contains(w)) {
            flags.set(Flag::ResultBad);
        } else {
            flags.set(Flag::ResultGood);
        }
        self.push(Row {
            kind: RowKind::Artifact,
            doc: None,
            class: LineClass::Other,
            text: format!(
                "artifact {}: {}",
                id.as_str(),
                text.chars().take(160).collect::<String>()
            ),
            value: Some(id.as_str().to_owned()),
            amount: None,
            reference: json!({"artifact_id": id.as_str()}),
            flags,
            missing: false,
        });
    }
}

/// The approval limits named by the policy list (`threshold` of each rule), ascending.
fn limits_of(rules: &Value) -> Vec<Decimal> {
    let mut v: Vec<Decimal> = rules
        .as_array()
        .map(|a| {
            a.iter()
                .take(64)
                .filter_map(|r| r.get("threshold").and_then(json_decimal))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A PO's or receipt's item list as (description key, quantity, unit price).
fn record_items(
    rec: Option<&Map<String, Value>>,
    key: &str,
) -> Vec<(String, Option<Decimal>, Option<Decimal>)> {
    rec.and_then(|r| r.get(key).and_then(Value::as_array))
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        item_key(
                            x.get("description")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                        ),
                        x.get("qty").and_then(json_decimal),
                        x.get("unit_price").and_then(json_decimal),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Letters and digits of a description, lower-cased (to pair invoice and PO lines).
fn item_key(text: &str) -> String {
    normalize_text(text)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

impl Ledger {
    /// The index of the row citing `token_id`, if it is kept.
    fn row_of_token(&self, token_id: &str) -> Option<usize> {
        self.rows.iter().position(|r| {
            r.kind == RowKind::Line
                && r.reference["token_ids"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|x| x == token_id))
        })
    }

    fn flag_token(&mut self, token_id: &str, f: Flag) {
        if let Some(i) = self.row_of_token(token_id) {
            self.rows[i].flags.set(f);
        }
    }

    fn record(&self, kind: RowKind, id: &str) -> Option<&Map<String, Value>> {
        self.records
            .iter()
            .find(|(k, rid, _)| {
                *k == kind && ls_core::text::normalize_id(rid) == ls_core::text::normalize_id(id)
            })
            .map(|(_, _, r)| r)
    }

    /// Recompute every line's relations from the rows revealed so far.
    fn relate(&mut self) {
        for r in self.rows.iter_mut().filter(|r| r.kind == RowKind::Line) {
            r.flags = Flags::default();
        }
        let mut marks: Vec<(String, Flag)> = Vec::new();
        let accounts: Vec<(String, String)> = self
            .invoices
            .iter()
            .filter_map(|(_, inv)| Some((inv.account()?, normalize_text(&inv.vendor_name()))))
            .collect();
        for (_, inv) in &self.invoices {
            self.relate_invoice(inv, &accounts, &mut marks);
        }
        for (slot, email) in &self.emails {
            let mismatch = self.threads.iter().any(|t| {
                t.domain_mismatch
                    && self
                        .docs
                        .get(*slot)
                        .is_some_and(|d| d.doc_id == t.thread_id)
            });
            for l in &email.lines {
                let tok = l.token_id.clone();
                if mismatch && normalize_text(&l.text).starts_with("from:") {
                    marks.push((tok.clone(), Flag::DomainMismatch));
                }
                for (list, f) in [
                    (&facts::URGENCY[..], Flag::Urgency),
                    (&facts::BYPASS[..], Flag::Bypass),
                    (&facts::TAKEOVER[..], Flag::Takeover),
                    (&INJECTION[..], Flag::Injection),
                ] {
                    if words(&l.text, list) {
                        marks.push((tok.clone(), f));
                    }
                }
            }
            if let Some(l) = email.threshold_evasion_line() {
                marks.push((l.token_id.clone(), Flag::Threshold));
            }
        }
        for (tok, f) in marks {
            self.flag_token(&tok, f);
        }
    }

    /// An invoice's relations, stage by stage: against its PO and receipt records, its account
    /// against the vendor master and the other invoices, its number and total against earlier
    /// payments, the batch and the policy's limits.
    fn relate_invoice(
        &self,
        inv: &Invoice,
        accounts: &[(String, String)],
        marks: &mut Vec<(String, Flag)>,
    ) {
        self.relate_records(inv, marks);
        if let (Some(account), Some((_, line))) = (inv.account(), &inv.bank) {
            self.relate_account(inv, &account, line, accounts, marks);
        }
        if let Some((number, line)) = &inv.number {
            self.relate_number(inv, number, line, marks);
        }
        if let Some((total, line)) = &inv.total {
            if self
                .limits
                .iter()
                .any(|l| *total < *l && *total >= *l * Decimal::new(90, 2))
            {
                marks.push((line.token_id.clone(), Flag::UnderLimit));
            }
        }
        if let Some(l) = inv.split_marker() {
            marks.push((l.token_id.clone(), Flag::Threshold));
        }
    }

    /// The total and the items against the PO record the invoice names, the items against the
    /// goods receipt (the one named, else the PO's).
    fn relate_records(&self, inv: &Invoice, marks: &mut Vec<(String, Flag)>) {
        let mark = |marks: &mut Vec<(String, Flag)>, l: &Line, f: Flag| {
            marks.push((l.token_id.clone(), f))
        };
        let po = inv
            .po
            .as_ref()
            .and_then(|(id, _)| self.record(RowKind::Po, id));
        if let (Some(po), Some((total, line))) = (po, &inv.total) {
            match po.get("total").and_then(json_decimal) {
                Some(t) if (t - total).abs() <= Decimal::new(1, 2) => {
                    mark(marks, line, Flag::MatchesPo)
                }
                Some(_) => mark(marks, line, Flag::DiffersFromPo),
                None => {}
            }
        }
        let po_items = record_items(po, "line_items");
        let receipt_id = inv
            .receipt
            .as_ref()
            .map(|r| r.0.clone())
            .or_else(|| inv.po.as_ref().map(|p| p.0.replacen("PO-", "GRN-", 1)));
        let received = record_items(
            receipt_id.and_then(|id| self.record(RowKind::Receipt, &id)),
            "received_line_items",
        );
        for it in &inv.items {
            let key = item_key(&it.description);
            if let Some((_, q, u)) = po_items.iter().find(|(k, _, _)| *k == key) {
                if q.is_some_and(|q| q != it.qty)
                    || u.is_some_and(|u| (u - it.unit_price).abs() > Decimal::new(1, 2))
                {
                    mark(marks, &it.line, Flag::DiffersFromPo);
                }
            }
            if let Some((_, q, _)) = received.iter().find(|(k, _, _)| *k == key) {
                if q.is_some_and(|q| q < it.qty) {
                    mark(marks, &it.line, Flag::DiffersFromReceipt);
                }
            }
        }
    }

    /// The invoice's account against the vendor master records, the comparisons and history
    /// changes that name it, and the other vendors' invoices.
    fn relate_account(
        &self,
        inv: &Invoice,
        account: &str,
        line: &Line,
        accounts: &[(String, String)],
        marks: &mut Vec<(String, Flag)>,
    ) {
        let mut mark = |f: Flag| marks.push((line.token_id.clone(), f));
        for v in &self.vendors {
            mark(if v.accounts.contains(account) {
                Flag::MatchesMaster
            } else {
                Flag::DiffersFromMaster
            });
        }
        for r in &self.rows {
            if r.value
                .as_deref()
                .is_none_or(|v| compact_account(v) != account)
            {
                continue;
            }
            match r.kind {
                RowKind::BankCheck if r.flags.has(Flag::ResultGood) => mark(Flag::MatchesMaster),
                RowKind::BankCheck => mark(Flag::DiffersFromMaster),
                RowKind::History => {
                    for f in [Flag::ChangeUnverified, Flag::ChangeApproved]
                        .into_iter()
                        .filter(|f| r.flags.has(*f))
                    {
                        mark(f);
                    }
                }
                _ => {}
            }
        }
        let own = normalize_text(&inv.vendor_name());
        if accounts.iter().any(|(a, v)| a == account && *v != own) {
            mark(Flag::SharedAccount);
        }
    }

    /// The invoice number against earlier payments (an exact hit, or a suffixed number or the same
    /// amount) and against the batch's other invoices.
    fn relate_number(
        &self,
        inv: &Invoice,
        number: &str,
        line: &Line,
        marks: &mut Vec<(String, Flag)>,
    ) {
        let mut mark = |f: Flag| marks.push((line.token_id.clone(), f));
        let n = ls_core::text::normalize_id(number);
        for (hn, amount, score) in &self.hits {
            let hn = ls_core::text::normalize_id(hn);
            if hn == n && *score >= 1.0 {
                mark(Flag::LedgerExact);
            } else if hn.starts_with(&n)
                || n.starts_with(&hn)
                || (amount.is_some() && *amount == inv.total_value())
            {
                mark(Flag::LedgerNear);
            }
        }
        let repeated = self
            .invoices
            .iter()
            .filter(|(_, o)| o.doc_id != inv.doc_id)
            .any(|(_, o)| {
                o.number
                    .as_ref()
                    .is_some_and(|(m, _)| ls_core::text::normalize_id(m) == n)
                    || (o.total_value().is_some() && o.total_value() == inv.total_value())
            });
        if repeated {
            mark(Flag::LedgerNear);
        }
    }

    /// The vendor key tools should name: the one a vendor record or an e-mail thread gave, else
    /// the vendor name printed on the first invoice read.
    pub fn vendor_key(&self) -> Option<String> {
        self.vendors
            .first()
            .map(|v| v.key.clone())
            .or_else(|| self.threads.iter().find_map(|t| t.vendor_key.clone()))
            .or_else(|| {
                self.invoices
                    .first()
                    .map(|(_, i)| i.vendor_name())
                    .filter(|n| !n.is_empty())
            })
    }

    /// The parsed invoices in catalogue order.
    pub fn invoices(&self) -> impl Iterator<Item = &Invoice> {
        let mut v: Vec<&(usize, Invoice)> = self.invoices.iter().collect();
        v.sort_by_key(|(s, _)| *s);
        v.into_iter().map(|(_, i)| i)
    }

    /// The invoice whose number line is row `row` (for `search_ledger`'s amount).
    pub fn invoice_of_row(&self, row: usize) -> Option<&Invoice> {
        let r = self.rows.get(row)?;
        let tok = r.reference["token_ids"].get(0)?.as_str()?;
        self.invoices.iter().map(|(_, i)| i).find(|i| {
            i.number.as_ref().is_some_and(|(_, l)| l.token_id == tok)
                || i.items.iter().any(|it| it.line.token_id == tok)
        })
    }

    /// Every id a submission may cite from what was revealed: the ids of every row's
    /// reference ([`Row::cited_ids`]), in row order, each once.
    pub fn cited_ids(&self) -> Vec<&str> {
        let mut seen = BTreeSet::new();
        self.rows
            .iter()
            .flat_map(Row::cited_ids)
            .filter(|id| seen.insert(*id))
            .collect()
    }

    /// The ledger as text for a language model: one line per row — its kind and class, how a
    /// submission cites it (a line's document and token id, a record's id), its text and its
    /// relations — then the observed signals. Documents not yet read are listed once, together.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let unread: Vec<&str> = self
            .docs
            .iter()
            .filter(|d| !d.read)
            .map(|d| d.doc_id.as_str())
            .collect();
        if !unread.is_empty() {
            out.push_str(&format!("documents not read yet: {}\n", unread.join(", ")));
        }
        for (i, r) in self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind != RowKind::Document)
        {
            let cite = match (r.reference.get("doc_id"), r.reference.get("token_ids")) {
                (Some(d), Some(t)) => format!(
                    "{} {}",
                    d.as_str().unwrap_or_default(),
                    t.get(0).and_then(Value::as_str).unwrap_or_default()
                ),
                _ => r.reference.to_string(),
            };
            let flags: Vec<&str> = r.flags.iter().map(Flag::as_str).collect();
            out.push_str(&format!(
                "[{i}] {} {} ({cite}): {}",
                r.kind.as_str(),
                r.class.as_str(),
                r.text.chars().take(120).collect::<String>()
            ));
            if !flags.is_empty() {
                out.push_str(&format!(" [{}]", flags.join(", ")));
            }
            out.push('\n');
        }
        if !self.signals.is_empty() {
            let s: Vec<&str> = self.signals.iter().map(|c| c.as_str()).collect();
            out.push_str(&format!("observed signals: {}\n", s.join(", ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ocr_reply(doc: &str, lines: &[(&str, &str)]) -> Map<String, Value> {
        let tokens: Vec<Value> = lines
            .iter()
            .enumerate()
            .map(|(i, (tok, text))| {
                json!({"token_id": tok, "text": text, "page": 1,
                       "bbox": [10.0, 10.0 + 20.0 * i as f64, 200.0, 25.0 + 20.0 * i as f64]})
            })
            .collect();
        let mut m = Map::new();
        m.insert("doc_id".into(), json!(doc));
        m.insert("mode".into(), json!("accurate"));
        m.insert("tokens".into(), Value::Array(tokens));
        m
    }

    /// A line is cited by its document and token ids, a record by its id; every id a row's
    /// reference holds is a citable id, listed once, and the rendered text shows the citations.
    #[test]
    fn cited_ids_are_the_references_and_the_text_shows_them() {
        let mut l = Ledger::new();
        l.absorb_catalogue([("INV-1", "invoice")].into_iter());
        let ocr = ocr_reply(
            "INV-1",
            &[
                ("i1-t1", "Acme Ltd"),
                ("i1-t2", "PO: PO-7"),
                ("i1-t3", "Total: 10.00"),
            ],
        );
        l.absorb_result(ActionName::Ocr, true, &|k| ocr.get(k).cloned());
        let po = json!({"po": {"po_id": "PO-7", "total": 10.0}});
        l.absorb_result(ActionName::LookupPo, true, &|k| po.get(k).cloned());
        l.relate();
        let ids = l.cited_ids();
        for id in ["INV-1", "i1-t1", "i1-t2", "i1-t3", "PO-7"] {
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
        assert_eq!(
            ids.iter().filter(|i| **i == "INV-1").count(),
            1,
            "each id once"
        );
        let text = l.render();
        assert!(text.contains("(INV-1 i1-t2): PO: PO-7\n"), "{text}");
        assert!(text.contains("(INV-1 i1-t3): Total: 10.00"), "{text}");
        assert!(text.contains("PO-7\"}"), "the PO record's citation: {text}");
    }
}
