//! What each investigation tool replies with, declared once as types.
//!
//! A tool's reply is its `last_tool_result`: the structure keys every result carries
//! (`tool_name`, `success`, `cost`, ...; `ls_env::channels::RESULT_STRUCTURE_KEYS`) and the
//! tool's own fields, which are the types here. A typed client reads a reply by deserializing
//! the whole result into one of them once, from its JSON text (the teacher does), instead of
//! string-keyed reads through a JSON tree: the reply types ignore the structure keys, the
//! records inside them refuse a field they do not declare. The environment's search hits and
//! e-mail threads are serialized through these types. The
//! round-trip test in `ls-env` (`tests/replies.rs`) plays every tool on every curated case and
//! holds each reply equal to its type here: a field the environment adds, drops or renames fails
//! it by name.
//!
//! Records the fixture schema already declares (vendor, history row, purchase order, receipt,
//! ledger row, policy rule) are reused as they are: a tool shows the record as the case holds it.

use crate::schema::{LedgerRow, PoRecord, PolicyRule, Receipt, Vendor, VendorHistoryRow};
use crate::text::codes::HistoryFlag;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// What every tool result starts with: the tool that answered and whether it succeeded (the
/// other structure keys are the environment's, `ls_env::channels::RESULT_STRUCTURE_KEYS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultHead {
    pub tool_name: String,
    pub success: bool,
}

/// A document token as a reading tool shows it (fast OCR may show it garbled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShownToken<'a> {
    pub token_id: Cow<'a, str>,
    pub text: Cow<'a, str>,
    pub bbox: [f64; 4],
    pub page: u32,
}

/// `ocr`: the tokens read, in the mode and scope asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OcrReply<'a> {
    pub doc_id: Cow<'a, str>,
    /// The mode as asked, normalised (`fast` or `accurate`; any other spelling reads as fast).
    pub mode: Cow<'a, str>,
    pub scope: ReadScope,
    pub page: Option<u32>,
    pub bbox: Option<[f64; 4]>,
    pub tokens: Vec<ShownToken<'a>>,
    /// The first 600 characters of the text read.
    pub text_preview: Cow<'a, str>,
}

/// How much of a document an OCR call read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadScope {
    Document,
    Page,
    Region,
}

/// `zoom`: a region's first six lines and the document's visual cues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoomReply<'a> {
    pub crop_hint: Cow<'a, str>,
    pub visual_tokens: Vec<Cow<'a, str>>,
    pub focus_text: Vec<Cow<'a, str>>,
    pub focus_tokens: Vec<ShownToken<'a>>,
    pub doc_id: Cow<'a, str>,
    pub page: u32,
    pub bbox: [f64; 4],
    pub region_token_count: usize,
}

/// `get_doc_crop`: a region's text lines (or the document's crop hints when it has none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CropReply<'a> {
    pub crop_text_hint: Vec<Cow<'a, str>>,
    pub doc_id: Cow<'a, str>,
    pub page: u32,
    pub bbox: [f64; 4],
    pub region_token_count: usize,
}

/// `lookup_vendor`: the vendor master record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VendorReply {
    pub vendor: Vendor,
}

/// `lookup_vendor_history`: the vendor's master-data changes and events, and the warning flags
/// derived from them (in spelling order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryReply {
    /// The key as asked (empty when none was given).
    pub vendor_key: String,
    pub history: Vec<VendorHistoryRow>,
    pub derived_flags: Vec<HistoryFlag>,
}

/// `lookup_policy`: every rule (no `rule_id`) or the one asked for, with what the grade requires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyReply {
    /// What the grade requires, in an analyst's words (prose for the reader; no client parses
    /// it, so it stays the text tree it is written as in `ls-grading`).
    pub submission_requirements: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<PolicyRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRule>,
}

/// `lookup_po`: the purchase order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoReply {
    pub po: PoRecord,
}

/// `lookup_receipt`: the goods receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptReply {
    pub receipt: Receipt,
}

/// `search_ledger`: the ten best-matching payments and how many matched in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerReply<'a> {
    pub hits: Vec<LedgerHit<'a>>,
    pub count: usize,
    /// Hits scoring at least 0.8.
    pub exact_duplicate_count: usize,
    pub near_duplicate_count: usize,
}

/// One ledger search hit: the ledger row's fields as the case holds them (in
/// [`LedgerRow`]'s order), then its match score (4 dp). The fields are spelled out rather than
/// flattened from a `LedgerRow` because an amount is read from its exact JSON text, which a
/// flattened field never sees; [`LedgerHit::new`] and the round-trip test keep the two equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerHit<'a> {
    pub ledger_id: Cow<'a, str>,
    pub vendor_key: Cow<'a, str>,
    pub vendor_name: Cow<'a, str>,
    pub invoice_number: Cow<'a, str>,
    #[serde(default)]
    pub fingerprint: Cow<'a, str>,
    pub currency: Cow<'a, str>,
    #[serde(with = "crate::schema::money")]
    pub amount: Decimal,
    #[serde(default)]
    pub po_id: Cow<'a, str>,
    pub payment_status: Cow<'a, str>,
    pub payment_date: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bank_account: Option<Cow<'a, str>>,
    pub match_score: f64,
}

impl<'a> LedgerHit<'a> {
    /// `row` as a hit scoring `match_score`.
    pub fn new(row: &'a LedgerRow, match_score: f64) -> Self {
        let LedgerRow {
            ledger_id,
            vendor_key,
            vendor_name,
            invoice_number,
            fingerprint,
            currency,
            amount,
            po_id,
            payment_status,
            payment_date,
            bank_account,
        } = row;
        Self {
            ledger_id: ledger_id.into(),
            vendor_key: vendor_key.into(),
            vendor_name: vendor_name.into(),
            invoice_number: invoice_number.into(),
            fingerprint: fingerprint.into(),
            currency: currency.into(),
            amount: *amount,
            po_id: po_id.into(),
            payment_status: payment_status.into(),
            payment_date: payment_date.into(),
            bank_account: bank_account.as_deref().map(Cow::Borrowed),
            match_score,
        }
    }
}

/// `inspect_email_thread`: the thread as read, who sent it, and what the request detectors found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReply<'a> {
    pub thread: ThreadView<'a>,
}

/// An e-mail thread as `inspect_email_thread` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadView<'a> {
    pub thread_id: Cow<'a, str>,
    pub vendor_key: Cow<'a, str>,
    pub sender: Cow<'a, str>,
    pub subject: Cow<'a, str>,
    pub body: Cow<'a, str>,
    /// Non-empty lines of the body (at least 1).
    pub message_count: usize,
    pub sender_profile: SenderProfile<'a>,
    pub request_signals: RequestSignals,
    /// One fixed explanatory line per detector that fired.
    pub quoted_directives: Vec<Cow<'a, str>>,
}

/// The sender's domain against the vendor's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SenderProfile<'a> {
    pub from_domain: Cow<'a, str>,
    /// The first domain on file for the vendor (empty when none is).
    pub expected_domain: Cow<'a, str>,
    pub domain_alignment: DomainAlignment,
}

/// Whether the sender's domain is the vendor's (or a subdomain of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainAlignment {
    Aligned,
    Mismatch,
}

/// The request detectors of a message (spec 3.3.1), in their wire order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSignals {
    pub urgency_language: bool,
    pub bank_change_language: bool,
    pub callback_discouraged: bool,
    pub policy_override_language: bool,
    pub prompt_injection_language: bool,
    pub instruction_override_language: bool,
}

/// `compare_bank_account`: the account proposed against the vendor master.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BankReply<'a> {
    pub vendor_key: Cow<'a, str>,
    /// The master's account (its bank account, else its approved or first allowed one).
    pub approved_bank_account: Cow<'a, str>,
    /// As asked (`null` when none was given).
    pub proposed_bank_account: Option<Cow<'a, str>>,
    pub matched: bool,
    pub comparison_summary: BankComparison,
}

/// The verdict of a bank-account comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BankComparison {
    MatchedMasterData,
    MismatchToMasterData,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_hit_is_its_ledger_row_then_its_score() {
        let row: LedgerRow = serde_json::from_str(
            r#"{"ledger_id": "LED-1", "vendor_key": "v", "vendor_name": "V",
                "invoice_number": "I-1", "currency": "USD", "amount": 12.50,
                "payment_status": "paid", "payment_date": "2024-01-02"}"#,
        )
        .unwrap();
        let hit = serde_json::to_string(&LedgerHit::new(&row, 0.91)).unwrap();
        let row_text = serde_json::to_string(&row).unwrap();
        assert_eq!(
            hit,
            format!("{},\"match_score\":0.91}}", row_text.trim_end_matches('}'))
        );
        let back: LedgerHit<'static> = serde_json::from_str(&hit).unwrap();
        assert_eq!(
            back.amount.to_string(),
            "12.50",
            "the amount's exact text is kept"
        );
        assert_eq!(back, LedgerHit::new(&row, 0.91));
    }

    #[test]
    fn a_thread_with_a_field_no_type_declares_is_refused_by_name() {
        let wire = serde_json::json!({"thread_id": "T", "vendor_key": "", "sender": "",
            "subject": "", "body": "", "message_count": 1,
            "sender_profile": {"from_domain": "", "expected_domain": "",
                "domain_alignment": "aligned"},
            "request_signals": RequestSignals::default(), "quoted_directives": [],
            "surprise": 1});
        let err = serde_json::from_value::<ThreadView>(wire).unwrap_err();
        assert!(err.to_string().contains("surprise"), "{err}");
    }

    #[test]
    fn an_unknown_history_flag_is_refused() {
        let wire = serde_json::json!({"vendor_key": "v", "history": [],
            "derived_flags": ["not_a_flag"]});
        assert!(serde_json::from_value::<HistoryReply>(wire).is_err());
    }
}
