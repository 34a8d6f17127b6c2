//! The factored action vocabulary: the tools that take a pointer, the targets a pointer can fill
//! (reason codes, Task A fields, line items, verifications, links), the actions and their
//! index [`Layout`], and where each target's fact shows in the ledger ([`affinity`]).

use crate::ledger::{Flag, Ledger, LineClass, Row, RowKind, MAX_ROWS};
use ls_core::{ActionName, Decision, ReasonCode};
use std::collections::HashMap;

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
    pub(crate) fn takes(self, l: &Ledger, r: &Row) -> bool {
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

    pub(crate) fn numeric(self) -> bool {
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
    pub(crate) fn takes(self, l: &Ledger, r: &Row) -> bool {
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
    pub(crate) fn repeats(self) -> bool {
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

/// Interventions in the layout (the catalogue's; `Layout::new` asserts the count).
pub const INTERVENTIONS: usize = 9;
/// Targets in the layout: every reason code, every Task A field, line items, four
/// verifications, two kinds of link.
pub const TARGETS: usize =
    ReasonCode::ALL.len() + Field::ALL.len() + 1 + Verification::ALL.len() + 2;
/// Actions in the layout (the `Discrete` size), from the groups' sizes.
pub const ACTIONS: usize = Tool::ALL.len()
    + 1
    + INTERVENTIONS
    + DECISIONS.len()
    + TARGETS
    + 2 * Check::ALL.len()
    + 2
    + MAX_ROWS;

/// The index layout: every action's index, declared once from the groups above.
#[derive(Debug, Clone)]
pub struct Layout {
    actions: Vec<FactoredAction>,
    /// Every action's index (a lookup, never a scan nor a formatted key).
    index: HashMap<FactoredAction, usize>,
    /// The index of `point.best`.
    point_best: usize,
    /// The index of `point(0)`: `point(r)` is at `first_point + r`, the last group.
    first_point: usize,
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
        assert_eq!(
            interventions().len(),
            INTERVENTIONS,
            "the catalogue's interventions are the layout's"
        );
        debug_assert_eq!(actions.len(), ACTIONS, "the layout has the declared size");
        let index: HashMap<FactoredAction, usize> =
            actions.iter().enumerate().map(|(i, a)| (*a, i)).collect();
        let point_best = index[&FactoredAction::PointBest];
        let first_point = index[&FactoredAction::Point(0)];
        debug_assert_eq!(first_point + MAX_ROWS, actions.len(), "points come last");
        Self {
            actions,
            index,
            point_best,
            first_point,
        }
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
        match *a {
            FactoredAction::Point(r) => self.point(r),
            FactoredAction::PointBest => Some(self.point_best),
            _ => self.index.get(a).copied(),
        }
    }

    /// The index of `point(r)` (`None` past [`MAX_ROWS`]).
    pub fn point(&self, r: usize) -> Option<usize> {
        (r < MAX_ROWS).then_some(self.first_point + r)
    }

    /// The index of `point.best`.
    pub fn point_best(&self) -> usize {
        self.point_best
    }

    /// The `point(r)` entries of a mask over this layout, row by row ([`MAX_ROWS`] flags).
    pub fn points<'m>(&self, mask: &'m [bool]) -> &'m [bool] {
        &mask[self.first_point..self.first_point + MAX_ROWS]
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

/// What is pending: a tool or a target waiting for its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    Tool(Tool),
    Target(Target),
}

/// Where a reason code's fact shows and which relations support it there.
fn code_places(code: ReasonCode) -> (&'static [Place], &'static [Flag]) {
    use Flag as F;
    use ReasonCode as C;
    match code {
        C::BankOverrideAttempt | C::BankAccountMismatch => {
            (BANK, &[F::DiffersFromMaster, F::ChangeUnverified])
        }
        C::VendorAccountTakeoverSuspected => (BODY_BANK, &[F::Takeover, F::DiffersFromMaster]),
        C::SenderDomainSpoof => (SENDER, &[F::DomainMismatch]),
        C::PolicyBypassAttempt | C::InstructionOverrideAttempt => (WORDING, &[F::Bypass]),
        C::PromptInjectionAttempt => (BODY, &[F::Injection]),
        C::UrgentPaymentPressure => (WORDING, &[F::Urgency]),
        C::ApprovalThresholdEvasion => (SPLIT, &[F::Threshold, F::UnderLimit]),
        C::DuplicateNearMatch => (NUMBER, &[F::LedgerExact, F::LedgerNear]),
        C::SharedBankAccount => (BANK_LINE, &[F::SharedAccount]),
        C::CoordinatedTiming | C::InvalidInvoiceDate => (DATE, &[]),
        C::PriceMismatch => (ITEM, &[F::DiffersFromPo]),
        C::QuantityMismatch => (ITEM, &[F::DiffersFromPo, F::DiffersFromReceipt]),
        C::TotalMismatch => (TOTAL, &[F::DiffersFromPo]),
        C::PartialReceiptOnly => (ITEM_RECEIPT, &[F::DiffersFromReceipt]),
        C::MissingReceipt => (RECEIPT, &[F::ResultBad]),
        C::MissingPo => (PO, &[F::ResultBad]),
        C::DuplicatePoReference => (PO_LINE, &[]),
        C::ReceiptDateMismatch => (DATE_RECEIPT, &[]),
        C::TaxIdMismatch => (TAX, &[]),
        C::VendorMasterMismatch | C::VendorNameSpoof => (VENDOR, &[]),
        C::CallbackVerificationFailed
        | C::CallbackSuspiciousConfirm
        | C::CallbackDisputeConfirmed => (ARTIFACT, &[F::ResultBad]),
    }
}

/// The places of [`code_places`], named once.
const BANK: &[Place] = &[
    Place::Line(LineClass::Bank),
    Place::Kind(RowKind::History),
    Place::Kind(RowKind::BankCheck),
];
const BANK_LINE: &[Place] = &[Place::Line(LineClass::Bank)];
const BODY: &[Place] = &[Place::Line(LineClass::Body)];
const BODY_BANK: &[Place] = &[Place::Line(LineClass::Body), Place::Line(LineClass::Bank)];
const WORDING: &[Place] = &[
    Place::Line(LineClass::Body),
    Place::Line(LineClass::Subject),
];
const SENDER: &[Place] = &[Place::Line(LineClass::From), Place::Kind(RowKind::Thread)];
const SPLIT: &[Place] = &[
    Place::Line(LineClass::Body),
    Place::Line(LineClass::Other),
    Place::Line(LineClass::Item),
    Place::Line(LineClass::Total),
];
const NUMBER: &[Place] = &[
    Place::Line(LineClass::InvoiceNumber),
    Place::Kind(RowKind::LedgerHit),
];
const DATE: &[Place] = &[Place::Line(LineClass::InvoiceDate)];
const DATE_RECEIPT: &[Place] = &[
    Place::Line(LineClass::InvoiceDate),
    Place::Kind(RowKind::Receipt),
];
const ITEM: &[Place] = &[Place::Line(LineClass::Item)];
const ITEM_RECEIPT: &[Place] = &[Place::Line(LineClass::Item), Place::Kind(RowKind::Receipt)];
const TOTAL: &[Place] = &[Place::Line(LineClass::Total)];
const RECEIPT: &[Place] = &[
    Place::Line(LineClass::ReceiptRef),
    Place::Kind(RowKind::Receipt),
];
const PO: &[Place] = &[Place::Line(LineClass::PoRef), Place::Kind(RowKind::Po)];
const PO_LINE: &[Place] = &[Place::Line(LineClass::PoRef)];
const TAX: &[Place] = &[Place::Line(LineClass::Other), Place::Kind(RowKind::Vendor)];
const VENDOR: &[Place] = &[
    Place::Line(LineClass::VendorName),
    Place::Kind(RowKind::Vendor),
];
const ARTIFACT: &[Place] = &[Place::Kind(RowKind::Artifact)];

/// A place a fact can show: a document line of a class, or a record of a kind.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    Line(LineClass),
    Kind(RowKind),
}

impl Place {
    fn holds(self, r: &Row) -> bool {
        match self {
            Self::Line(c) => r.kind == RowKind::Line && r.class == c,
            Self::Kind(k) => r.kind == k,
        }
    }
}

/// How well row `r` could fill target `t` (see the module doc).
pub fn affinity(t: Target, r: &Row) -> f32 {
    match t {
        Target::Code(code) => {
            let (places, support) = code_places(code);
            if !places.iter().any(|p| p.holds(r)) {
                0.0
            } else if support.iter().any(|f| r.flags.has(*f)) {
                1.0
            } else {
                0.5
            }
        }
        Target::Field(f) => f32::from(u8::from(r.kind == RowKind::Line && r.class == f.class())),
        Target::LineItem => f32::from(u8::from(
            r.kind == RowKind::Line && r.class == LineClass::Item,
        )),
        Target::Verify(v) => {
            let ok = match v {
                Verification::Po => r.kind == RowKind::Po && !r.missing,
                Verification::Receipt => r.kind == RowKind::Receipt && !r.missing,
                Verification::VendorMaster => {
                    r.kind == RowKind::Vendor
                        || (r.kind == RowKind::BankCheck && r.flags.has(Flag::ResultGood))
                }
                Verification::InvoiceTotal => {
                    r.kind == RowKind::Line && r.class == LineClass::Total
                }
            };
            f32::from(u8::from(ok))
        }
        Target::DuplicateLink => f32::from(u8::from(r.kind == RowKind::LedgerHit)),
        Target::CrossLink => f32::from(u8::from(r.kind == RowKind::Document)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_place() {
        for c in ReasonCode::ALL {
            assert!(!code_places(c).0.is_empty(), "{c:?}");
        }
    }

    #[test]
    fn the_layout_indexes_every_action_once() {
        let l = Layout::new();
        for (i, a) in l.actions().iter().enumerate() {
            assert_eq!(l.index_of(a), Some(i), "{a:?}");
        }
        let targets = Target::all();
        let distinct: std::collections::BTreeSet<_> = targets.iter().collect();
        assert_eq!(distinct.len(), targets.len());
        assert_eq!(targets.len(), TARGETS);
        assert_eq!(l.len(), ACTIONS);
    }
}
