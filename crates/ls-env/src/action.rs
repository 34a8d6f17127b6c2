//! The typed action: one variant per tool, intervention and submission, each with its argument
//! struct. A request is parsed once, at the protocol edge ([`ActionRequest::parse`]); the episode
//! matches on [`Action`] exhaustively, so a new action that is not dispatched does not compile.
//!
//! Each argument struct is declared once by `args!`: the declaration generates the struct, its
//! parser (fields read in declaration order, so the first wrong field is the one named) and its
//! JSON Schema ([`payload_schema`], what MCP `tools/list` shows). Wire rules the schema states:
//! a `required` field is one the action cannot succeed without; it may still be missing on the
//! wire, where it reads as empty and the tool fails as a penalised step (spec 3.1), never a 4xx.
//! A field of the wrong JSON type is a [`PayloadError`] naming it (4xx). Unknown keys are ignored.

use crate::payload::{opt_bbox, opt_page, opt_str, PayloadError};
use ls_core::enums::{ActionName, Decision};
use ls_core::submission::Submission;
use ls_core::submission::SubmissionError;
use ls_core::text::{decimal_to_f64, json_decimal, normalize_text};
use serde_json::{json, Map, Value};

/// Errors a step can return without touching state.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    #[error("the episode has ended ({0}); call reset to start a new one")]
    EpisodeEnded(String),
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error(transparent)]
    Submission(#[from] SubmissionError),
}

/// How a payload field is read, and the schema it is documented with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A string id (a number is accepted and rendered); at most `MAX_FIELD_CHARS` characters.
    Id,
    /// A free-text string (same rules as an id), kept as the JSON value sent.
    Text,
    /// OCR mode: `fast` or `accurate` (normalised; anything else reads as a fast, unmemoised read).
    Mode,
    /// A 1-based page: an integer, or a numeric string (a non-numeric string means no page).
    Page,
    /// `[x1, y1, x2, y2]`, four finite numbers.
    BBox,
    /// An amount: a number or a numeric string.
    Amount,
    /// Any JSON value, passed through as sent.
    Any,
}

/// One payload field of an action's declaration.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    pub name: &'static str,
    pub kind: FieldKind,
    pub required: bool,
    pub description: &'static str,
}

impl FieldSpec {
    fn schema(&self) -> Value {
        let d = self.description;
        match self.kind {
            FieldKind::Id | FieldKind::Text => json!({"type": "string", "description": d}),
            FieldKind::Mode => {
                json!({"type": "string", "enum": ["fast", "accurate"], "description": d})
            }
            FieldKind::Page => json!({"type": "integer", "minimum": 1, "description": d}),
            FieldKind::BBox => {
                json!({"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4, "description": d})
            }
            FieldKind::Amount => json!({"type": "number", "description": d}),
            FieldKind::Any => json!({"description": d}),
        }
    }
}

/// An object schema from field declarations (properties in declaration order).
pub fn object_schema(fields: &[FieldSpec]) -> Value {
    let mut props = Map::new();
    for f in fields {
        props.insert(f.name.to_owned(), f.schema());
    }
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    json!({"type": "object", "properties": props, "required": required})
}

fn read_amount(p: &Map<String, Value>, key: &str) -> Result<Option<f64>, PayloadError> {
    match ls_core::json_field(p, key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => json_decimal(v)
            .map(|d| Some(decimal_to_f64(d)))
            .ok_or_else(|| PayloadError::new(key, "must be a number or numeric string")),
    }
}

/// A text field: checked as a string (or number), kept as sent (the handoff packet records it).
fn read_text(p: &Map<String, Value>, key: &str) -> Result<Option<Value>, PayloadError> {
    opt_str(p, key)?;
    Ok(p.get(key).cloned())
}

fn read_any(p: &Map<String, Value>, key: &str) -> Result<Option<Value>, PayloadError> {
    Ok(p.get(key).cloned())
}

macro_rules! field_type {
    (Id) => {
        String
    };
    (Text) => {
        Value
    };
    (Mode) => {
        String
    };
    (Page) => {
        u32
    };
    (BBox) => {
        [f64; 4]
    };
    (Amount) => {
        f64
    };
    (Any) => {
        Value
    };
}

macro_rules! read_field {
    (Id, $p:expr, $k:expr) => {
        opt_str($p, $k)
    };
    (Text, $p:expr, $k:expr) => {
        read_text($p, $k)
    };
    (Mode, $p:expr, $k:expr) => {
        opt_str($p, $k)
    };
    (Page, $p:expr, $k:expr) => {
        opt_page($p, $k)
    };
    (BBox, $p:expr, $k:expr) => {
        opt_bbox($p, $k)
    };
    (Amount, $p:expr, $k:expr) => {
        read_amount($p, $k)
    };
    (Any, $p:expr, $k:expr) => {
        read_any($p, $k)
    };
}

/// A required field is a plain value (missing reads as its default, and the tool fails naming
/// it); an optional one is an `Option`.
macro_rules! field_slot {
    (required, $kind:ident) => { field_type!($kind) };
    (optional, $kind:ident) => { Option<field_type!($kind)> };
}

macro_rules! field_value {
    (required, $v:expr) => {
        $v.unwrap_or_default()
    };
    (optional, $v:expr) => {
        $v
    };
}

macro_rules! is_required {
    (required) => {
        true
    };
    (optional) => {
        false
    };
}

macro_rules! args {
    ($( $(#[$m:meta])* $name:ident { $( $field:ident: $kind:ident $req:ident $desc:literal ),* $(,)? } )*) => {
        $(
            $(#[$m])*
            #[derive(Debug, Clone, Default, PartialEq)]
            pub struct $name { $( pub $field: field_slot!($req, $kind), )* }

            impl $name {
                /// The declaration: what the parser reads and the schema documents.
                pub const FIELDS: &'static [FieldSpec] = &[ $( FieldSpec {
                    name: stringify!($field),
                    kind: FieldKind::$kind,
                    required: is_required!($req),
                    description: $desc,
                }, )* ];

                /// Read the declared fields in order; the first of the wrong type is the error.
                pub fn parse(p: &Map<String, Value>) -> Result<Self, PayloadError> {
                    Ok(Self { $( $field: field_value!($req, read_field!($kind, p, stringify!($field))?), )* })
                }
            }
        )*
    };
}

args! {
    /// `zoom` / `get_doc_crop`.
    RegionArgs {
        doc_id: Id required "document id from visible_documents",
        page: Page optional "1-based page number",
        bbox: BBox optional "[x0, y0, x1, y1] region",
    }
    /// `ocr` (`mode` is read first: it prices the call).
    OcrArgs {
        mode: Mode optional "fast costs 0.45, accurate 1.10",
        doc_id: Id required "document id from visible_documents",
        page: Page optional "1-based page number",
        bbox: BBox optional "[x0, y0, x1, y1] region",
    }
    /// `lookup_vendor`.
    VendorArgs {
        vendor_key: Id required "vendor key",
    }
    /// `lookup_vendor_history`: the key is expected, not required (spec 3.1: without it the
    /// tool returns no rows and never fails).
    HistoryArgs {
        vendor_key: Id optional "vendor key",
    }
    /// `lookup_policy`.
    PolicyArgs {
        rule_id: Id optional "policy rule id; omit to list the policy",
    }
    /// `lookup_po`.
    PoArgs {
        po_id: Id required "purchase order id",
    }
    /// `lookup_receipt`.
    ReceiptArgs {
        receipt_id: Id required "goods receipt id",
    }
    /// `search_ledger`.
    LedgerArgs {
        vendor_key: Id optional "vendor key",
        invoice_number: Id optional "invoice number",
        amount: Amount optional "invoice amount",
    }
    /// `inspect_email_thread`.
    ThreadArgs {
        thread_id: Id required "email thread or email document id",
    }
    /// `compare_bank_account`: the vendor is required (spec 3.1; a missing key fails the tool
    /// with `vendor not found: `), the proposal optional (a missing one is a mismatch).
    BankArgs {
        vendor_key: Id required "vendor key",
        proposed_bank_account: Id optional "account to compare with the vendor master",
    }
    /// `create_human_handoff`: `confidence` goes into the handoff packet as sent.
    HandoffArgs {
        summary: Text optional "handoff summary",
        recommended_next_step: Text optional "what the human should do next",
        confidence: Any optional "confidence to record in the handoff packet (default 0.5)",
    }
}

impl OcrArgs {
    /// `accurate` mode (priced 1.10); any other mode is priced as fast.
    pub fn accurate(&self) -> bool {
        self.mode
            .as_deref()
            .is_some_and(|m| normalize_text(m) == "accurate")
    }
}

/// One step's action, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Tool(ToolCall),
    Intervention(Intervention),
    Submit(Box<Submission>),
    /// A name outside the catalogue (its first 64 characters): a penalised step, not an error.
    Unknown(String),
}

/// An investigation tool with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    Zoom(RegionArgs),
    GetDocCrop(RegionArgs),
    Ocr(OcrArgs),
    LookupVendor(VendorArgs),
    LookupVendorHistory(HistoryArgs),
    LookupPolicy(PolicyArgs),
    LookupPo(PoArgs),
    LookupReceipt(ReceiptArgs),
    SearchLedger(LedgerArgs),
    InspectEmailThread(ThreadArgs),
    CompareBankAccount(BankArgs),
}

/// An intervention (interventions never fail on their payload; it is logged as sent).
#[derive(Debug, Clone, PartialEq)]
pub enum Intervention {
    RequestCallbackVerification,
    FreezeVendorProfile,
    RequestBankChangeApprovalChain,
    RequestPoReconciliation,
    RequestAdditionalReceiptEvidence,
    RouteToProcurement,
    RouteToSecurity,
    FlagDuplicateClusterReview,
    CreateHumanHandoff(Box<HandoffArgs>),
}

impl Action {
    /// Parse an action name and its payload. An unknown name is [`Action::Unknown`]; a field of
    /// the wrong type is the error the step answers with.
    pub fn parse(action_type: &str, payload: &Map<String, Value>) -> Result<Self, StepError> {
        let Some(name) = ActionName::parse(action_type) else {
            return Ok(Self::Unknown(action_type.chars().take(64).collect()));
        };
        Self::from_name(name, payload)
    }

    fn from_name(name: ActionName, p: &Map<String, Value>) -> Result<Self, StepError> {
        use ActionName as N;
        use Intervention as I;
        use ToolCall as T;
        let tool = |t: T| Ok(Self::Tool(t));
        let intervention = |i: I| Ok(Self::Intervention(i));
        match name {
            N::Zoom => tool(T::Zoom(RegionArgs::parse(p)?)),
            N::GetDocCrop => tool(T::GetDocCrop(RegionArgs::parse(p)?)),
            N::Ocr => tool(T::Ocr(OcrArgs::parse(p)?)),
            N::LookupVendor => tool(T::LookupVendor(VendorArgs::parse(p)?)),
            N::LookupVendorHistory => tool(T::LookupVendorHistory(HistoryArgs::parse(p)?)),
            N::LookupPolicy => tool(T::LookupPolicy(PolicyArgs::parse(p)?)),
            N::LookupPo => tool(T::LookupPo(PoArgs::parse(p)?)),
            N::LookupReceipt => tool(T::LookupReceipt(ReceiptArgs::parse(p)?)),
            N::SearchLedger => tool(T::SearchLedger(LedgerArgs::parse(p)?)),
            N::InspectEmailThread => tool(T::InspectEmailThread(ThreadArgs::parse(p)?)),
            N::CompareBankAccount => tool(T::CompareBankAccount(BankArgs::parse(p)?)),
            N::RequestCallbackVerification => intervention(I::RequestCallbackVerification),
            N::FreezeVendorProfile => intervention(I::FreezeVendorProfile),
            N::RequestBankChangeApprovalChain => intervention(I::RequestBankChangeApprovalChain),
            N::RequestPoReconciliation => intervention(I::RequestPoReconciliation),
            N::RequestAdditionalReceiptEvidence => {
                intervention(I::RequestAdditionalReceiptEvidence)
            }
            N::RouteToProcurement => intervention(I::RouteToProcurement),
            N::RouteToSecurity => intervention(I::RouteToSecurity),
            N::FlagDuplicateClusterReview => intervention(I::FlagDuplicateClusterReview),
            N::CreateHumanHandoff => {
                intervention(I::CreateHumanHandoff(Box::new(HandoffArgs::parse(p)?)))
            }
            N::SubmitDecision => Ok(Self::Submit(Box::new(Submission::from_payload(p)?))),
        }
    }

    /// The catalogue entry (cost, kind, channel) of this action; `None` for an unknown name.
    pub fn name(&self) -> Option<ActionName> {
        match self {
            Self::Tool(t) => Some(t.name()),
            Self::Intervention(i) => Some(i.name()),
            Self::Submit(_) => Some(ActionName::SubmitDecision),
            Self::Unknown(_) => None,
        }
    }
}

impl ToolCall {
    pub fn name(&self) -> ActionName {
        use ActionName as N;
        match self {
            Self::Zoom(_) => N::Zoom,
            Self::GetDocCrop(_) => N::GetDocCrop,
            Self::Ocr(_) => N::Ocr,
            Self::LookupVendor(_) => N::LookupVendor,
            Self::LookupVendorHistory(_) => N::LookupVendorHistory,
            Self::LookupPolicy(_) => N::LookupPolicy,
            Self::LookupPo(_) => N::LookupPo,
            Self::LookupReceipt(_) => N::LookupReceipt,
            Self::SearchLedger(_) => N::SearchLedger,
            Self::InspectEmailThread(_) => N::InspectEmailThread,
            Self::CompareBankAccount(_) => N::CompareBankAccount,
        }
    }
}

impl Intervention {
    pub fn name(&self) -> ActionName {
        use ActionName as N;
        match self {
            Self::RequestCallbackVerification => N::RequestCallbackVerification,
            Self::FreezeVendorProfile => N::FreezeVendorProfile,
            Self::RequestBankChangeApprovalChain => N::RequestBankChangeApprovalChain,
            Self::RequestPoReconciliation => N::RequestPoReconciliation,
            Self::RequestAdditionalReceiptEvidence => N::RequestAdditionalReceiptEvidence,
            Self::RouteToProcurement => N::RouteToProcurement,
            Self::RouteToSecurity => N::RouteToSecurity,
            Self::FlagDuplicateClusterReview => N::FlagDuplicateClusterReview,
            Self::CreateHumanHandoff(_) => N::CreateHumanHandoff,
        }
    }

    /// The step's message.
    pub fn message(&self) -> &'static str {
        match self {
            Self::RequestCallbackVerification => "Callback verification requested.",
            Self::RequestBankChangeApprovalChain => "Bank change approval chain requested.",
            Self::RequestPoReconciliation => "PO reconciliation requested.",
            Self::RequestAdditionalReceiptEvidence => "Additional receipt evidence requested.",
            Self::FlagDuplicateClusterReview => "Duplicate cluster review requested.",
            Self::FreezeVendorProfile => "Vendor profile frozen pending investigation.",
            Self::RouteToProcurement => "Case routed to procurement.",
            Self::RouteToSecurity => "Case routed to security.",
            Self::CreateHumanHandoff(_) => "Human handoff packet created.",
        }
    }
}

/// The payload fields an action reads, from its declaration (`None` for the submission, whose
/// fields are [`Submission::FIELDS`] in `ls-core`).
pub fn fields(name: ActionName) -> &'static [FieldSpec] {
    use ActionName as N;
    match name {
        N::Zoom | N::GetDocCrop => RegionArgs::FIELDS,
        N::Ocr => OcrArgs::FIELDS,
        N::LookupVendor => VendorArgs::FIELDS,
        N::LookupVendorHistory => HistoryArgs::FIELDS,
        N::LookupPolicy => PolicyArgs::FIELDS,
        N::LookupPo => PoArgs::FIELDS,
        N::LookupReceipt => ReceiptArgs::FIELDS,
        N::SearchLedger => LedgerArgs::FIELDS,
        N::InspectEmailThread => ThreadArgs::FIELDS,
        N::CompareBankAccount => BankArgs::FIELDS,
        N::CreateHumanHandoff => HandoffArgs::FIELDS,
        N::RequestCallbackVerification
        | N::FreezeVendorProfile
        | N::RequestBankChangeApprovalChain
        | N::RequestPoReconciliation
        | N::RequestAdditionalReceiptEvidence
        | N::RouteToProcurement
        | N::RouteToSecurity
        | N::FlagDuplicateClusterReview
        | N::SubmitDecision => &[],
    }
}

/// The JSON Schema of an action's payload, generated from its declaration (MCP `tools/list`).
pub fn payload_schema(name: ActionName) -> Value {
    if name == ActionName::SubmitDecision {
        return submission_schema();
    }
    object_schema(fields(name))
}

/// The submission's payload schema: `ls_core::Submission::FIELDS`, the table `from_payload`
/// reads, with the decision's closed vocabulary.
fn submission_schema() -> Value {
    let mut props = Map::new();
    for f in Submission::FIELDS {
        let mut s = match f.json_type {
            Some("strings") => json!({"type": "array", "items": {"type": "string"}}),
            Some(t) => json!({"type": t}),
            None => json!({}),
        };
        s["description"] = json!(f.description);
        match (f.name, f.json_type) {
            ("decision", _) => {
                s["enum"] = json!(Decision::ALL.iter().map(|d| d.as_str()).collect::<Vec<_>>());
            }
            // The two numbers are probabilities.
            (_, Some("number")) => {
                s["minimum"] = json!(0);
                s["maximum"] = json!(1);
            }
            ("policy_checks", _) => s["additionalProperties"] = json!({"type": "string"}),
            _ => {}
        }
        props.insert(f.name.to_owned(), s);
    }
    json!({"type": "object", "properties": props, "required": ["decision"]})
}

/// A step request as the protocol edge parsed it: the typed action, or the payload error the
/// step answers with (reported after the episode's own refusal, so a finished episode answers
/// `EpisodeEnded` whatever the payload), and the payload as sent, which the trajectory and the
/// intervention log record.
#[derive(Debug, Clone)]
pub struct ActionRequest<'a> {
    pub action: Result<Action, StepError>,
    pub payload: &'a Map<String, Value>,
}

impl<'a> ActionRequest<'a> {
    pub fn parse(action_type: &str, payload: &'a Map<String, Value>) -> Self {
        Self {
            action: Action::parse(action_type, payload),
            payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value of the field's documented type, and one of a type it refuses (none for `Any`).
    fn samples(kind: FieldKind) -> (Value, Option<Value>) {
        let wrong = Some(json!([[1]]));
        match kind {
            FieldKind::Id | FieldKind::Text => (json!("X-1"), wrong),
            FieldKind::Mode => (json!("accurate"), wrong),
            FieldKind::Page => (json!(2), Some(json!(0))),
            FieldKind::BBox => (json!([1, 2, 3, 4]), Some(json!([1, 2]))),
            FieldKind::Amount => (json!(12.5), Some(json!("twelve"))),
            FieldKind::Any => (json!({"any": 1}), None),
        }
    }

    fn one(k: &str, v: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(k.to_owned(), v);
        m
    }

    /// The schema and the parser agree, field by field, for every action: each documented
    /// property is read (a value of its type changes the parsed action), a value of another type
    /// is refused naming it, the schema's `type` is the kind's, and `required` is the
    /// declaration's.
    #[test]
    fn schema_and_parser_agree_for_every_action() {
        for name in ActionName::ALL {
            let schema = payload_schema(name);
            let props = schema["properties"].as_object().unwrap();
            let empty = Action::parse(name.as_str(), &Map::new()).unwrap();
            assert_eq!(empty.name(), Some(name));
            if name == ActionName::SubmitDecision {
                continue; // Submission::FIELDS is checked in ls-core.
            }
            let declared: Vec<&str> = fields(name).iter().map(|f| f.name).collect();
            assert_eq!(
                props.keys().map(String::as_str).collect::<Vec<_>>(),
                declared
            );
            let required: Vec<&str> = fields(name)
                .iter()
                .filter(|f| f.required)
                .map(|f| f.name)
                .collect();
            assert_eq!(schema["required"], json!(required), "{}", name.as_str());
            for f in fields(name) {
                let (good, bad) = samples(f.kind);
                let parsed = Action::parse(name.as_str(), &one(f.name, good.clone()))
                    .unwrap_or_else(|e| panic!("{} {}: {e}", name.as_str(), f.name));
                assert_ne!(
                    parsed,
                    empty,
                    "{}.{} is documented but not read",
                    name.as_str(),
                    f.name
                );
                let t = &props[f.name]["type"];
                match f.kind {
                    FieldKind::Any => assert!(t.is_null()),
                    _ => assert_eq!(
                        t.as_str(),
                        Some(match &good {
                            Value::String(_) => "string",
                            Value::Array(_) => "array",
                            Value::Number(n) if n.is_u64() => "integer",
                            _ => "number",
                        })
                    ),
                }
                if let Some(bad) = bad {
                    match Action::parse(name.as_str(), &one(f.name, bad)) {
                        Err(StepError::Payload(e)) => assert_eq!(e.field, f.name),
                        other => panic!("{}.{}: {other:?}", name.as_str(), f.name),
                    }
                }
            }
        }
    }

    /// The submission's schema lists exactly `Submission::FIELDS` and requires the decision.
    #[test]
    fn submission_schema_is_the_field_table() {
        let schema = payload_schema(ActionName::SubmitDecision);
        let props: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let table: Vec<&str> = Submission::FIELDS.iter().map(|f| f.name).collect();
        assert_eq!(props, table);
        assert_eq!(schema["required"], json!(["decision"]));
        assert_eq!(
            schema["properties"]["decision"]["enum"][3],
            "ESCALATE_FRAUD"
        );
    }

    /// Unknown names are a penalised step, not an error; names parse after normalisation; the
    /// first wrong field in declaration order is the one named (OCR reads `mode` first).
    #[test]
    fn parse_rules() {
        assert_eq!(
            Action::parse("nope", &Map::new()).unwrap(),
            Action::Unknown("nope".into())
        );
        let long = "x".repeat(100);
        assert_eq!(
            Action::parse(&long, &Map::new()).unwrap(),
            Action::Unknown("x".repeat(64))
        );
        assert_eq!(
            Action::parse(" Lookup_Vendor", &Map::new()).unwrap().name(),
            Some(ActionName::LookupVendor)
        );
        let mut p = one("doc_id", json!({}));
        p.insert("mode".into(), json!([1]));
        match Action::parse("ocr", &p) {
            Err(StepError::Payload(e)) => assert_eq!(e.field, "mode"),
            other => panic!("{other:?}"),
        }
        let Action::Tool(ToolCall::Ocr(a)) =
            Action::parse("ocr", &one("mode", json!(" Accurate "))).unwrap()
        else {
            panic!("ocr")
        };
        assert!(a.accurate() && a.doc_id.is_empty());
    }
}
