//! The factored action space: one masked `Discrete` choice per step that can express everything
//! the teacher does.
//!
//! An action is one of ([`Layout`] gives each group its index range, in this order):
//!
//! | group | count | what it does |
//! |---|---|---|
//! | `tool(t)` | 9 | chooses a tool that takes an argument; the **next** action is `point(r)`, the ledger row the argument is read from (a document, a vendor name or key, an account, an invoice number, a PO or receipt reference) |
//! | `lookup_policy` | 1 | the policy lookup (again only while artifacts are pending: a wait) |
//! | `intervene(a)` | 9 | an intervention, on the vendor the ledger knows ([`Ledger::vendor_key`]) |
//! | `decide(d)` | 4 | the submission's decision (once) |
//! | `target(x)` | 44 | chooses what the next `point(r)` fills: a reason code (27, cited at row `r`), a Task A field (10, value and citation from row `r`), a line item (row `r`), a verification a PAY cites (PO, receipt, vendor master, invoice total), a duplicate link (a ledger hit), a cross-invoice link (an invoice) |
//! | `check(c, pass\|fail)` | 8 | a policy check's state (once each) |
//! | `submit` | 1 | submits the composed decision (needs a decision) |
//! | `point.best` | 1 | the legal row the observation rates best for what is pending (highest affinity, then first revealed): an alias of one `point(r)` |
//! | `point(r)` | [`MAX_ROWS`] | the pending tool's or target's row |
//!
//! Tools, the policy lookup, interventions and `submit` are environment steps; every other
//! action only composes and costs nothing (no environment step, reward 0, the episode's clock
//! does not move). Composing is bounded: each target, check and the decision once, each row
//! once per target, so an episode cannot compose forever. An action its mask forbids is played
//! as a refused action (a penalised environment step), as the server treats an unknown tool.

use crate::ledger::{Ledger, LineClass, Row, RowKind, MAX_DOCS, MAX_ROWS};
use ls_core::{ActionName, CodeKind, Decision, ReasonCode, TaskType};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Tools whose argument is a pointer into the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tool {
    Ocr,
    Zoom,
    EmailThread,
    Vendor,
    VendorHistory,
    CompareBank,
    SearchLedger,
    Po,
    Receipt,
}

impl Tool {
    pub const ALL: [Tool; 9] = [
        Self::Ocr,
        Self::Zoom,
        Self::EmailThread,
        Self::Vendor,
        Self::VendorHistory,
        Self::CompareBank,
        Self::SearchLedger,
        Self::Po,
        Self::Receipt,
    ];

    pub fn action(self) -> ActionName {
        match self {
            Self::Ocr => ActionName::Ocr,
            Self::Zoom => ActionName::Zoom,
            Self::EmailThread => ActionName::InspectEmailThread,
            Self::Vendor => ActionName::LookupVendor,
            Self::VendorHistory => ActionName::LookupVendorHistory,
            Self::CompareBank => ActionName::CompareBankAccount,
            Self::SearchLedger => ActionName::SearchLedger,
            Self::Po => ActionName::LookupPo,
            Self::Receipt => ActionName::LookupReceipt,
        }
    }

    /// Can row `r` be this tool's argument?
    fn takes(self, l: &Ledger, r: &Row) -> bool {
        let doc_type = |r: &Row| {
            r.doc
                .and_then(|d| l.docs.get(d))
                .map(|d| d.doc_type.as_str())
        };
        let has_value = r.value.as_deref().is_some_and(|v| !v.trim().is_empty());
        has_value
            && match self {
                Self::Ocr | Self::Zoom => r.kind == RowKind::Document,
                Self::EmailThread => r.kind == RowKind::Document && doc_type(r) == Some("email"),
                Self::Vendor | Self::VendorHistory => {
                    (r.kind == RowKind::Line && r.class == LineClass::VendorName)
                        || matches!(r.kind, RowKind::Thread | RowKind::Vendor)
                }
                Self::CompareBank => {
                    (r.kind == RowKind::Line && r.class == LineClass::Bank)
                        || r.kind == RowKind::History
                }
                Self::SearchLedger => {
                    r.kind == RowKind::Line && r.class == LineClass::InvoiceNumber
                }
                Self::Po => r.kind == RowKind::Line && r.class == LineClass::PoRef,
                Self::Receipt => r.kind == RowKind::Line && r.class == LineClass::ReceiptRef,
            }
    }
}

/// A Task A field, filled from a line of its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    VendorName,
    InvoiceNumber,
    InvoiceDate,
    Currency,
    PoId,
    ReceiptId,
    BankAccount,
    Subtotal,
    Tax,
    Total,
}

impl Field {
    pub const ALL: [Field; 10] = [
        Self::VendorName,
        Self::InvoiceNumber,
        Self::InvoiceDate,
        Self::Currency,
        Self::PoId,
        Self::ReceiptId,
        Self::BankAccount,
        Self::Subtotal,
        Self::Tax,
        Self::Total,
    ];

    pub fn class(self) -> LineClass {
        match self {
            Self::VendorName => LineClass::VendorName,
            Self::InvoiceNumber => LineClass::InvoiceNumber,
            Self::InvoiceDate => LineClass::InvoiceDate,
            Self::Currency => LineClass::Currency,
            Self::PoId => LineClass::PoRef,
            Self::ReceiptId => LineClass::ReceiptRef,
            Self::BankAccount => LineClass::Bank,
            Self::Subtotal => LineClass::Subtotal,
            Self::Tax => LineClass::Tax,
            Self::Total => LineClass::Total,
        }
    }

    /// The submission's key (`extracted_fields` and the evidence map).
    pub fn key(self) -> &'static str {
        self.class().as_str()
    }

    fn numeric(self) -> bool {
        matches!(self, Self::Subtotal | Self::Tax | Self::Total)
    }
}

/// What a PAY cites: the records of the checks its policy requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verification {
    Po,
    Receipt,
    VendorMaster,
    InvoiceTotal,
}

impl Verification {
    pub const ALL: [Verification; 4] = [
        Self::Po,
        Self::Receipt,
        Self::VendorMaster,
        Self::InvoiceTotal,
    ];

    /// The evidence-map key the citation is filed under.
    pub fn key(self) -> &'static str {
        match self {
            Self::Po => "three_way_match_po",
            Self::Receipt => "three_way_match_receipt",
            Self::VendorMaster => "bank_account_verified",
            Self::InvoiceTotal => "invoice_total",
        }
    }
}

/// The four policy checks a submission marks (`ls_core::PolicyCheck`, in its order).
pub use ls_core::PolicyCheck as Check;

/// What the next `point(r)` fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Code(ReasonCode),
    Field(Field),
    LineItem,
    Verify(Verification),
    DuplicateLink,
    CrossLink,
}

impl Target {
    /// Every target in layout order.
    pub fn all() -> Vec<Target> {
        let mut v: Vec<Target> = ReasonCode::ALL.iter().map(|c| Self::Code(*c)).collect();
        v.extend(Field::ALL.iter().map(|f| Self::Field(*f)));
        v.push(Self::LineItem);
        v.extend(Verification::ALL.iter().map(|x| Self::Verify(*x)));
        v.push(Self::DuplicateLink);
        v.push(Self::CrossLink);
        v
    }

    /// Can row `r` fill this target?
    fn takes(self, l: &Ledger, r: &Row) -> bool {
        match self {
            Self::Code(_) => r.kind != RowKind::Document,
            Self::Field(f) => r.kind == RowKind::Line && r.class == f.class(),
            Self::LineItem => r.kind == RowKind::Line && r.class == LineClass::Item,
            Self::Verify(Verification::Po) => r.kind == RowKind::Po && !r.missing,
            Self::Verify(Verification::Receipt) => r.kind == RowKind::Receipt && !r.missing,
            Self::Verify(Verification::VendorMaster) => {
                r.kind == RowKind::Vendor
                    || (r.kind == RowKind::BankCheck
                        && r.flags.has(crate::ledger::Flag::ResultGood))
            }
            Self::Verify(Verification::InvoiceTotal) => {
                r.kind == RowKind::Line && r.class == LineClass::Total
            }
            Self::DuplicateLink => r.kind == RowKind::LedgerHit,
            Self::CrossLink => {
                r.kind == RowKind::Document
                    && r.doc
                        .and_then(|d| l.docs.get(d))
                        .is_some_and(|d| d.doc_type == "invoice")
            }
        }
    }

    /// May this target take more than one row (line items, links)?
    fn repeats(self) -> bool {
        matches!(self, Self::LineItem | Self::DuplicateLink | Self::CrossLink)
    }
}

/// One factored action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FactoredAction {
    Tool(Tool),
    LookupPolicy,
    Intervene(ActionName),
    Decide(Decision),
    Target(Target),
    Check(Check, bool),
    Submit,
    /// The legal row the observation rates best for what is pending (highest affinity, then
    /// the first revealed): an alias of one `Point`.
    PointBest,
    Point(usize),
}

/// The interventions, in layout order.
pub fn interventions() -> Vec<ActionName> {
    ActionName::ALL
        .into_iter()
        .filter(|a| a.is_intervention())
        .collect()
}

/// The decisions, in layout order.
pub const DECISIONS: [Decision; 4] = [
    Decision::Pay,
    Decision::Hold,
    Decision::NeedsReview,
    Decision::EscalateFraud,
];

/// The index layout: every action's index, declared once from the groups above.
#[derive(Debug, Clone)]
pub struct Layout {
    actions: Vec<FactoredAction>,
    index: BTreeMap<String, usize>,
}

fn key_of(a: &FactoredAction) -> String {
    format!("{a:?}")
}

impl Layout {
    pub fn new() -> Self {
        let mut actions: Vec<FactoredAction> =
            Tool::ALL.iter().map(|t| FactoredAction::Tool(*t)).collect();
        actions.push(FactoredAction::LookupPolicy);
        actions.extend(interventions().into_iter().map(FactoredAction::Intervene));
        actions.extend(DECISIONS.iter().map(|d| FactoredAction::Decide(*d)));
        actions.extend(Target::all().into_iter().map(FactoredAction::Target));
        for c in Check::ALL {
            for pass in [true, false] {
                actions.push(FactoredAction::Check(c, pass));
            }
        }
        actions.push(FactoredAction::Submit);
        actions.push(FactoredAction::PointBest);
        actions.extend((0..MAX_ROWS).map(FactoredAction::Point));
        let index = actions
            .iter()
            .enumerate()
            .map(|(i, a)| (key_of(a), i))
            .collect();
        Self { actions, index }
    }

    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    pub fn action(&self, index: usize) -> Option<FactoredAction> {
        self.actions.get(index).copied()
    }

    pub fn index_of(&self, a: &FactoredAction) -> Option<usize> {
        self.index.get(&key_of(a)).copied()
    }

    /// Every action with its index, in order (for documentation and tests).
    pub fn actions(&self) -> &[FactoredAction] {
        &self.actions
    }
}

impl Default for Layout {
    fn default() -> Self {
        Self::new()
    }
}

/// What playing a factored action does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// An environment step: the typed action as `{action_type, payload}` parts.
    Env {
        action_type: String,
        payload: Map<String, Value>,
    },
    /// A composing step: nothing reaches the environment.
    Composed,
}

/// What is pending: a tool or a target waiting for its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    Tool(Tool),
    Target(Target),
}

/// The submission being composed, and what the next `point` fills.
#[derive(Debug, Clone, Default)]
pub struct Composer {
    pub pending: Option<Pending>,
    pub decision: Option<Decision>,
    /// Reason codes with the row that shows each.
    pub codes: BTreeMap<ReasonCode, usize>,
    pub fields: BTreeMap<Field, usize>,
    pub items: Vec<usize>,
    pub verifications: BTreeMap<Verification, usize>,
    pub duplicate_links: Vec<usize>,
    pub cross_links: Vec<usize>,
    pub checks: BTreeMap<Check, bool>,
    /// (tool, argument value) pairs already played: not offered again.
    played: BTreeSet<(Tool, String)>,
    /// Composing steps taken (bounded by the masks; asserted).
    pub composed_steps: usize,
}

/// The longest hand-off summary the composer writes (well inside the payload's field limit).
pub const SUMMARY_CHARS: usize = 240;

/// The region a `zoom` reads: the whole first page.
pub const ZOOM_BBOX: [u32; 4] = [0, 0, 600, 800];

/// The action an index past the layout or a masked-out action plays (no tool has this name).
pub const REFUSED_ACTION: &str = "invalid_factored_action";

impl Composer {
    pub fn new() -> Self {
        Self::default()
    }

    fn filled(&self, t: Target) -> bool {
        match t {
            Target::Code(c) => self.codes.contains_key(&c),
            Target::Field(f) => self.fields.contains_key(&f),
            Target::Verify(v) => self.verifications.contains_key(&v),
            Target::LineItem | Target::DuplicateLink | Target::CrossLink => false,
        }
    }

    fn used(&self, t: Target, row: usize) -> bool {
        match t {
            Target::LineItem => self.items.contains(&row),
            Target::DuplicateLink => self.duplicate_links.contains(&row),
            Target::CrossLink => self.cross_links.contains(&row),
            _ => false,
        }
    }

    fn row_ok_for(&self, l: &Ledger, p: Pending, i: usize) -> bool {
        let Some(r) = l.rows.get(i) else { return false };
        match p {
            Pending::Tool(t) => {
                t.takes(l, r)
                    && !self
                        .played
                        .contains(&(t, r.value.clone().unwrap_or_default()))
            }
            Pending::Target(t) => t.takes(l, r) && !self.used(t, i),
        }
    }

    /// The legal row rated best for what is pending: the highest affinity with a pending target
    /// (`observe::affinity`), else the first revealed legal row.
    pub fn best_row(&self, l: &Ledger) -> Option<usize> {
        let p = self.pending?;
        let legal = (0..l.rows.len().min(MAX_ROWS)).filter(|i| self.row_ok_for(l, p, *i));
        match p {
            Pending::Tool(_) => legal.min(),
            Pending::Target(t) => legal.max_by(|a, b| {
                crate::observe::affinity(t, &l.rows[*a])
                    .total_cmp(&crate::observe::affinity(t, &l.rows[*b]))
                    .then(b.cmp(a))
            }),
        }
    }

    /// The legal actions now, one flag per layout index.
    pub fn mask(&self, layout: &Layout, l: &Ledger) -> Vec<bool> {
        let mut m = vec![false; layout.len()];
        if l.done {
            return m;
        }
        let rows = 0..l.rows.len().min(MAX_ROWS);
        if let Some(p) = self.pending {
            for i in rows {
                if self.row_ok_for(l, p, i) {
                    m[layout
                        .index_of(&FactoredAction::Point(i))
                        .expect("laid out")] = true;
                }
            }
            debug_assert!(m.iter().any(|x| *x), "a pending choice always has a row");
            m[layout
                .index_of(&FactoredAction::PointBest)
                .expect("laid out")] = true;
            return m;
        }
        for (i, a) in layout.actions().iter().enumerate() {
            m[i] = match *a {
                FactoredAction::Tool(t) => rows
                    .clone()
                    .any(|r| self.row_ok_for(l, Pending::Tool(t), r)),
                // Read once; again only to wait for pending artifacts (the cheapest step).
                FactoredAction::LookupPolicy => {
                    !l.succeeded.contains(&ActionName::LookupPolicy) || l.pending_events > 0
                }
                FactoredAction::Intervene(a) => {
                    !l.interventions.contains(&a)
                        && (a == ActionName::CreateHumanHandoff || l.vendor_key().is_some())
                }
                FactoredAction::Decide(_) => self.decision.is_none(),
                FactoredAction::Target(t) => {
                    (!self.filled(t) || t.repeats())
                        && rows
                            .clone()
                            .any(|r| self.row_ok_for(l, Pending::Target(t), r))
                }
                FactoredAction::Check(c, _) => !self.checks.contains_key(&c),
                FactoredAction::Submit => self.decision.is_some(),
                FactoredAction::Point(_) | FactoredAction::PointBest => false,
            };
        }
        m
    }

    /// Play layout index `index` against the ledger: what reaches the environment, if anything.
    /// A masked-out index is refused ([`REFUSED_ACTION`], a penalised environment step).
    pub fn apply(&mut self, layout: &Layout, l: &Ledger, index: usize) -> Step {
        let legal = self.mask(layout, l).get(index).copied().unwrap_or(false);
        let Some(action) = layout.action(index).filter(|_| legal) else {
            return Step::Env {
                action_type: REFUSED_ACTION.into(),
                payload: Map::new(),
            };
        };
        let step = self.play(l, action);
        if step == Step::Composed {
            self.composed_steps += 1;
            debug_assert!(
                self.composed_steps <= 4 * layout.len() + 4 * MAX_ROWS,
                "composing is bounded"
            );
        }
        step
    }

    fn play(&mut self, l: &Ledger, action: FactoredAction) -> Step {
        let vendor = || l.vendor_key().unwrap_or_default();
        match action {
            FactoredAction::Tool(t) => {
                self.pending = Some(Pending::Tool(t));
                Step::Composed
            }
            FactoredAction::LookupPolicy => env("lookup_policy", json!({})),
            FactoredAction::Intervene(a) => {
                let payload = if a == ActionName::CreateHumanHandoff {
                    json!({"summary": self.summary(), "recommended_next_step": "manual_review", "confidence": 0.8})
                } else {
                    json!({"vendor_key": vendor()})
                };
                env(a.as_str(), payload)
            }
            FactoredAction::Decide(d) => {
                self.decision = Some(d);
                Step::Composed
            }
            FactoredAction::Target(t) => {
                self.pending = Some(Pending::Target(t));
                Step::Composed
            }
            FactoredAction::Check(c, pass) => {
                self.checks.insert(c, pass);
                Step::Composed
            }
            FactoredAction::Submit => env_map("submit_decision", self.submission(l)),
            FactoredAction::PointBest => {
                let i = self
                    .best_row(l)
                    .expect("point.best is legal only when a row is");
                self.play(l, FactoredAction::Point(i))
            }
            FactoredAction::Point(i) => {
                let p = self
                    .pending
                    .take()
                    .expect("a point is legal only when something is pending");
                match p {
                    Pending::Tool(t) => self.tool_step(l, t, i),
                    Pending::Target(t) => {
                        match t {
                            Target::Code(c) => {
                                self.codes.insert(c, i);
                            }
                            Target::Field(f) => {
                                self.fields.insert(f, i);
                            }
                            Target::LineItem => self.items.push(i),
                            Target::Verify(v) => {
                                self.verifications.insert(v, i);
                            }
                            Target::DuplicateLink => self.duplicate_links.push(i),
                            Target::CrossLink => self.cross_links.push(i),
                        }
                        Step::Composed
                    }
                }
            }
        }
    }

    fn tool_step(&mut self, l: &Ledger, t: Tool, i: usize) -> Step {
        let r = &l.rows[i];
        // An argument is read from a row; it stays inside the payload's field limit.
        let value: String = r
            .value
            .as_deref()
            .unwrap_or_default()
            .chars()
            .take(ls_env::payload::MAX_FIELD_CHARS)
            .collect();
        self.played.insert((t, value.clone()));
        let vendor = l.vendor_key().unwrap_or_default();
        let payload = match t {
            Tool::Ocr => json!({"doc_id": value, "mode": "accurate"}),
            Tool::Zoom => json!({"doc_id": value, "page": 1, "bbox": ZOOM_BBOX}),
            Tool::EmailThread => json!({"thread_id": value}),
            Tool::Vendor | Tool::VendorHistory => json!({"vendor_key": value}),
            Tool::CompareBank => json!({"vendor_key": vendor, "proposed_bank_account": value}),
            Tool::SearchLedger => {
                let amount = l.invoice_of_row(i).and_then(|inv| inv.total_value());
                json!({"vendor_key": vendor, "invoice_number": value, "amount": amount.map(decimal_json)})
            }
            Tool::Po => json!({"po_id": value}),
            Tool::Receipt => json!({"receipt_id": value}),
        };
        env(t.action().as_str(), payload)
    }

    /// The hand-off's summary: the decision and codes composed so far, within the payload's
    /// length limit.
    fn summary(&self) -> String {
        let codes: Vec<&str> = self.codes.keys().map(|c| c.as_str()).collect();
        let s = match self.decision {
            Some(d) => format!("{} recommended: {}.", d.as_str(), codes.join(", ")),
            None => "Handing the case to a human reviewer.".to_owned(),
        };
        s.chars().take(SUMMARY_CHARS).collect()
    }

    /// The composed `submit_decision` payload.
    pub fn submission(&self, l: &Ledger) -> Map<String, Value> {
        let decision = self.decision.unwrap_or(Decision::NeedsReview);
        let reference = |i: &usize| {
            l.rows
                .get(*i)
                .map(|r| r.reference.clone())
                .unwrap_or(Value::Null)
        };
        let mut p = Map::new();
        p.insert("decision".into(), json!(decision.as_str()));
        p.insert("confidence".into(), json!(confidence(decision)));
        let mut evidence = Map::new();
        for (c, i) in &self.codes {
            evidence.insert(c.as_str().into(), reference(i));
        }
        for (v, i) in &self.verifications {
            evidence.insert(v.key().into(), reference(i));
        }
        let codes: Vec<&str> = self.codes.keys().map(|c| c.as_str()).collect();
        if l.task == Some(TaskType::TaskA) {
            let mut fields = Map::new();
            for (f, i) in &self.fields {
                let value = l.rows[*i].value.clone().unwrap_or_default();
                let v = if f.numeric() {
                    ls_core::text::parse_decimal(&value)
                        .map_or(json!(value), |d| json!(d.normalize().to_string()))
                } else {
                    json!(value)
                };
                fields.insert(f.key().into(), v);
                evidence.insert(f.key().into(), reference(i));
            }
            let items: Vec<Value> = self
                .items
                .iter()
                .filter_map(|i| line_item(&l.rows[*i]))
                .collect();
            p.insert("extracted_fields".into(), Value::Object(fields));
            p.insert("line_items".into(), Value::Array(items));
            p.insert("reason_codes".into(), json!([]));
        } else {
            // Task B names its reasons in `discrepancies` (its contract); the others in `reason_codes`.
            let named = if l.task == Some(TaskType::TaskB) {
                Vec::new()
            } else {
                codes.clone()
            };
            p.insert("reason_codes".into(), json!(named));
            let checks: Map<String, Value> = self
                .checks
                .iter()
                .map(|(c, pass)| {
                    (
                        c.as_str().to_owned(),
                        json!(if *pass { "pass" } else { "fail" }),
                    )
                })
                .collect();
            p.insert("policy_checks".into(), Value::Object(checks));
            p.insert(
                "counterfactual".into(),
                json!(counterfactual(decision, self, l)),
            );
        }
        let dup: Vec<String> = self
            .duplicate_links
            .iter()
            .filter_map(|i| l.rows[*i].value.clone())
            .collect();
        let cross: Vec<String> = self
            .cross_links
            .iter()
            .filter_map(|i| l.rows[*i].value.clone())
            .collect();
        let of_kind = |k: CodeKind| -> Vec<&str> {
            self.codes
                .keys()
                .filter(|c| c.kind() == k)
                .map(|c| c.as_str())
                .collect()
        };
        match l.task {
            Some(TaskType::TaskB) => {
                let mut d = of_kind(CodeKind::Discrepancy);
                d.extend(of_kind(CodeKind::Fraud));
                p.insert("discrepancies".into(), json!(d));
            }
            Some(TaskType::TaskC) => {
                p.insert("fraud_flags".into(), json!(codes));
                p.insert("duplicate_links".into(), json!(dup));
                p.insert("discrepancies".into(), json!([]));
            }
            Some(TaskType::TaskD) if !dup.is_empty() => {
                p.insert("duplicate_links".into(), json!(dup));
            }
            Some(TaskType::TaskE) => {
                let campaign: Vec<&str> = self
                    .codes
                    .keys()
                    .filter(|c| {
                        matches!(
                            c,
                            ReasonCode::ApprovalThresholdEvasion
                                | ReasonCode::SharedBankAccount
                                | ReasonCode::CoordinatedTiming
                        )
                    })
                    .map(|c| c.as_str())
                    .collect();
                p.insert("campaign_signals".into(), json!(campaign));
                p.insert(
                    "cross_invoice_links".into(),
                    json!(if decision == Decision::Pay {
                        Vec::new()
                    } else {
                        cross
                    }),
                );
                if !dup.is_empty() {
                    p.insert("duplicate_links".into(), json!(dup));
                }
            }
            _ => {}
        }
        p.insert("evidence_map".into(), Value::Object(evidence));
        p
    }
}

fn env(action_type: &str, payload: Value) -> Step {
    env_map(
        action_type,
        payload.as_object().cloned().unwrap_or_default(),
    )
}

fn env_map(action_type: &str, payload: Map<String, Value>) -> Step {
    Step::Env {
        action_type: action_type.to_owned(),
        payload,
    }
}

fn decimal_json(d: Decimal) -> Value {
    d.normalize()
        .to_string()
        .parse::<f64>()
        .map(|f| json!(f))
        .unwrap_or(Value::Null)
}

/// The confidence a decision is submitted with (the teacher's).
pub fn confidence(d: Decision) -> f64 {
    match d {
        Decision::Pay | Decision::Hold => 0.9,
        Decision::NeedsReview => 0.88,
        Decision::EscalateFraud => 0.95,
    }
}

/// A line item from an item row (`description | qty | unit price | amount`).
fn line_item(r: &Row) -> Option<Value> {
    let parts: Vec<&str> = r.text.split('|').map(str::trim).collect();
    let [desc, qty, unit, total] = parts[..] else {
        return None;
    };
    let n = |s: &str| ls_core::text::parse_decimal(s).map(|d| d.normalize().to_string());
    Some(
        json!({"description": desc, "qty": n(qty)?, "unit_price": n(unit)?, "line_total": n(total)?}),
    )
}

/// A one-sentence counterfactual from the decision, its codes and links (the conditions that
/// would have to differ for the opposite decision, naming the records and invoices they rest on).
pub fn counterfactual(decision: Decision, c: &Composer, l: &Ledger) -> String {
    if decision == Decision::Pay {
        return "If the bank account had not matched the vendor master, the sender domain had been spoofed or a duplicate payment had existed in the ledger, we would hold the invoice instead of paying it.".to_owned();
    }
    let value = |i: &usize| {
        l.rows
            .get(*i)
            .and_then(|r| r.value.clone())
            .unwrap_or_default()
    };
    let mut conds: Vec<String> = Vec::new();
    let mut say = |s: String| {
        if !conds.contains(&s) {
            conds.push(s);
        }
    };
    for code in c.codes.keys() {
        say(match code {
            ReasonCode::SenderDomainSpoof => "the sender domain had matched the approved vendor domain".to_owned(),
            ReasonCode::BankOverrideAttempt | ReasonCode::BankAccountMismatch | ReasonCode::VendorAccountTakeoverSuspected => {
                "the bank account had matched the vendor master and the callback had verified the request".to_owned()
            }
            ReasonCode::PolicyBypassAttempt | ReasonCode::InstructionOverrideAttempt => {
                "the request had not asked to skip verification or the approval workflow".to_owned()
            }
            ReasonCode::DuplicateNearMatch => "no duplicate payment existed in the ledger".to_owned(),
            ReasonCode::ApprovalThresholdEvasion => "the amounts had not been split to stay under the approval threshold".to_owned(),
            ReasonCode::SharedBankAccount | ReasonCode::CoordinatedTiming => continue,
            other => format!("there had been no {}", other.as_str().replace('_', " ")),
        });
    }
    if !c.duplicate_links.is_empty() {
        let ids: Vec<String> = c.duplicate_links.iter().map(value).collect();
        say(format!(
            "no duplicate payment such as {} existed in the ledger",
            ids.join(", ")
        ));
    }
    if !c.cross_links.is_empty() {
        let docs: Vec<String> = c
            .cross_links
            .iter()
            .map(|i| {
                let id = value(i);
                let total = l
                    .invoices()
                    .find(|inv| inv.doc_id == id)
                    .and_then(|inv| inv.total_value())
                    .map(|t| format!(" ({})", t.round_dp(2)))
                    .unwrap_or_default();
                format!("{id}{total}")
            })
            .collect();
        say(format!(
            "the linked invoices {} had not shared one unverified remittance account within days of each other",
            docs.join(", ")
        ));
    } else if c.codes.contains_key(&ReasonCode::SharedBankAccount)
        || c.codes.contains_key(&ReasonCode::CoordinatedTiming)
    {
        say(
            "the invoices had not shared one remittance account within days of each other"
                .to_owned(),
        );
    }
    if conds.is_empty() {
        conds.push("every control check had passed".to_owned());
    }
    let verb = match decision {
        Decision::Hold => "holding it",
        Decision::NeedsReview => "routing it to review",
        _ => "escalating it",
    };
    format!(
        "If {}, we would pay the invoice instead of {verb}.",
        conds.join(", and ")
    )
}

/// How many documents a pointer can name (catalogue slots); re-exported for the observation.
pub const DOC_SLOTS: usize = MAX_DOCS;

/// An action the factored space cannot express (see [`Composer::express`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unexpressible;

/// Does a submission's evidence entry cite row `r` (a shared token id, or the same record id)?
fn cites(entry: &Value, r: &Row) -> bool {
    let entries: Vec<&Value> = match entry {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    entries.iter().any(|e| {
        let toks = |v: &Value| -> Vec<String> {
            v.get("token_ids")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mine = toks(&r.reference);
        if !mine.is_empty() {
            return toks(e).iter().any(|t| mine.contains(t));
        }
        match (e.as_object(), r.reference.as_object()) {
            (Some(e), Some(m)) => m
                .iter()
                .all(|(k, v)| e.get(k).is_some_and(|x| norm(x) == norm(v))),
            _ => false,
        }
    })
}

fn norm(v: &Value) -> String {
    ls_core::text::normalize_id(v.as_str().unwrap_or_default())
}

impl Composer {
    /// The factored actions that express an agent's action `action_type`/`payload` now (the
    /// teacher's, for behaviour cloning and the expressiveness test): a tool and the row its
    /// argument is read from, an intervention, or — for `submit_decision` — every part of the
    /// submission then `submit`. `Ok(empty)` for an action the interface does not repeat (an
    /// intervention already taken, the policy read again, a tool call already played with that
    /// argument); `Err` when it cannot be expressed (a zoom, a crop, an argument no revealed row
    /// carries). Nothing here is played; the caller plays the indices in order (each legal when
    /// its turn comes).
    pub fn express(
        &self,
        layout: &Layout,
        l: &Ledger,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<Vec<usize>, Unexpressible> {
        let idx = |a: FactoredAction| layout.index_of(&a).expect("laid out");
        let legal = self.mask(layout, l);
        let once = |a: FactoredAction| {
            Ok(if legal[idx(a)] {
                vec![idx(a)]
            } else {
                Vec::new()
            })
        };
        let Some(name) = ActionName::from_wire(action_type) else {
            return Err(Unexpressible);
        };
        if name.is_intervention() {
            return once(FactoredAction::Intervene(name));
        }
        match name {
            ActionName::LookupPolicy => once(FactoredAction::LookupPolicy),
            ActionName::SubmitDecision => Ok(self.express_submission(layout, l, payload)),
            _ => {
                let Some(tool) = Tool::ALL.into_iter().find(|t| t.action() == name) else {
                    return Err(Unexpressible);
                };
                let arg = |k: &str| {
                    payload
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let wanted = match tool {
                    Tool::Ocr | Tool::Zoom => arg("doc_id"),
                    Tool::EmailThread => arg("thread_id"),
                    Tool::Vendor | Tool::VendorHistory => arg("vendor_key"),
                    Tool::CompareBank => arg("proposed_bank_account"),
                    Tool::SearchLedger => arg("invoice_number"),
                    Tool::Po => arg("po_id"),
                    Tool::Receipt => arg("receipt_id"),
                };
                let same = |v: &str| match tool {
                    Tool::CompareBank => {
                        ls_core::text::compact_account(v) == ls_core::text::compact_account(&wanted)
                    }
                    _ => ls_core::text::normalize_id(v) == ls_core::text::normalize_id(&wanted),
                };
                if self.played.iter().any(|(t, v)| *t == tool && same(v)) {
                    return Ok(Vec::new());
                }
                let row = (0..l.rows.len().min(MAX_ROWS)).find(|i| {
                    self.row_ok_for(l, Pending::Tool(tool), *i)
                        && l.rows[*i].value.as_deref().is_some_and(same)
                });
                row.map(|r| {
                    vec![
                        idx(FactoredAction::Tool(tool)),
                        idx(FactoredAction::Point(r)),
                    ]
                })
                .ok_or(Unexpressible)
            }
        }
    }

    fn express_submission(
        &self,
        layout: &Layout,
        l: &Ledger,
        p: &Map<String, Value>,
    ) -> Vec<usize> {
        let idx = |a: FactoredAction| layout.index_of(&a).expect("laid out");
        let rows = 0..l.rows.len().min(MAX_ROWS);
        let evidence = p
            .get("evidence_map")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::new();
        let decision = p
            .get("decision")
            .and_then(Value::as_str)
            .and_then(Decision::parse_lenient);
        if let Some(d) = decision.filter(|_| self.decision.is_none()) {
            out.push(idx(FactoredAction::Decide(d)));
        }
        // A target and the row the agent cited for it (else the row the observation rates best).
        let fill = |out: &mut Vec<usize>, t: Target, entry: Option<&Value>| {
            let takes = |i: &usize| t.takes(l, &l.rows[*i]);
            let cited =
                entry.and_then(|e| rows.clone().filter(takes).find(|i| cites(e, &l.rows[*i])));
            let best = || {
                rows.clone().filter(takes).max_by(|a, b| {
                    crate::observe::affinity(t, &l.rows[*a])
                        .total_cmp(&crate::observe::affinity(t, &l.rows[*b]))
                        .then(b.cmp(a))
                })
            };
            if let Some(r) = cited.or_else(best) {
                out.push(idx(FactoredAction::Target(t)));
                out.push(idx(FactoredAction::Point(r)));
            }
        };
        // Every code the submission names, in whichever of the families' fields it sits.
        let mut codes: Vec<ReasonCode> = Vec::new();
        for key in [
            "reason_codes",
            "discrepancies",
            "fraud_flags",
            "campaign_signals",
        ] {
            for c in p.get(key).and_then(Value::as_array).into_iter().flatten() {
                if let Some(c) = c.as_str().and_then(ReasonCode::canonical) {
                    if !codes.contains(&c) {
                        codes.push(c);
                    }
                }
            }
        }
        for c in codes.iter().filter(|c| !self.codes.contains_key(c)) {
            let entry = evidence
                .iter()
                .find(|(k, _)| ReasonCode::canonical(k) == Some(*c))
                .map(|(_, v)| v);
            fill(&mut out, Target::Code(*c), entry);
        }
        for v in Verification::ALL {
            if let Some(e) = evidence.get(v.key()) {
                fill(&mut out, Target::Verify(v), Some(e));
            }
        }
        if let Some(fields) = p.get("extracted_fields").and_then(Value::as_object) {
            for f in Field::ALL.iter().filter(|f| fields.contains_key(f.key())) {
                fill(&mut out, Target::Field(*f), evidence.get(f.key()));
            }
        }
        let item_rows: Vec<usize> = rows
            .clone()
            .filter(|i| Target::LineItem.takes(l, &l.rows[*i]))
            .collect();
        let wanted_items = p
            .get("line_items")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        for r in item_rows.into_iter().take(wanted_items) {
            out.push(idx(FactoredAction::Target(Target::LineItem)));
            out.push(idx(FactoredAction::Point(r)));
        }
        for (key, target) in [
            ("duplicate_links", Target::DuplicateLink),
            ("cross_invoice_links", Target::CrossLink),
        ] {
            for id in p
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let row = rows.clone().find(|i| {
                    target.takes(l, &l.rows[*i])
                        && l.rows[*i]
                            .value
                            .as_deref()
                            .is_some_and(|v| norm(&json!(v)) == norm(&json!(id)))
                });
                if let Some(r) = row {
                    out.push(idx(FactoredAction::Target(target)));
                    out.push(idx(FactoredAction::Point(r)));
                }
            }
        }
        if let Some(checks) = p.get("policy_checks").and_then(Value::as_object) {
            for c in Check::ALL {
                let state = checks.get(c.as_str()).and_then(|v| match v {
                    Value::Bool(b) => Some(*b),
                    Value::String(s) => match ls_core::text::normalize_text(s).as_str() {
                        "pass" | "passed" | "true" => Some(true),
                        "fail" | "failed" | "false" => Some(false),
                        _ => None,
                    },
                    _ => None,
                });
                if let Some(pass) = state.filter(|_| !self.checks.contains_key(&c)) {
                    out.push(idx(FactoredAction::Check(c, pass)));
                }
            }
        }
        if decision.is_some() || self.decision.is_some() {
            out.push(idx(FactoredAction::Submit));
        }
        out
    }
}
