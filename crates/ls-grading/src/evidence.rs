//! The agent's evidence entries as grading reads them: a reference read leniently from JSON, its
//! match with a gold reference, whether it is grounded in what the agent revealed, and the
//! entries grouped into one claim per reason code. Shared by the dimension scores and the
//! reasons stage.

use crate::certificate::Revealed;
use ls_core::text::{bbox_iou, canonical_code, text_eq};
use ls_core::EvidenceRef;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Most tokens one entry may cite to support a code or verify a PAY (a whole document is not a
/// citation: an entry listing every token of a page would otherwise overlap any gold target).
pub const MAX_CITATION_TOKENS: usize = 3;

/// Most evidence entries one claimed code may spread over (aliases and duplicate keys of a code
/// are one claim): more keys for one code are spray, and support nothing.
pub const MAX_CLAIM_ENTRIES: usize = 3;

/// A predicted evidence reference read leniently from agent JSON (borrowing from it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PredRef<'a> {
    pub doc_id: Cow<'a, str>,
    pub page: Option<u32>,
    pub bbox: Vec<f64>,
    pub token_ids: Vec<&'a str>,
}

pub fn read_ref(v: &Value) -> Option<PredRef<'_>> {
    let o = v.as_object()?;
    let [doc_id, page, bbox, token_ids] = crate::fields(o, ["doc_id", "page", "bbox", "token_ids"]);
    let doc_id = doc_id.map(value_text).unwrap_or_default();
    let page = match page {
        None | Some(Value::Null) => Some(1),
        Some(Value::Number(n)) => n.as_u64().and_then(|p| u32::try_from(p).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let bbox = bbox
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let token_ids = token_ids
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Some(PredRef {
        doc_id,
        page,
        bbox,
        token_ids,
    })
}

/// Text form of a scalar JSON value (strings as-is, numbers printed, others empty).
pub fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// [`value_str`] borrowing strings.
pub(crate) fn value_text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(value_str(other)),
    }
}

/// Single reference: 0.35 doc + 0.15 page + 0.30 IoU + 0.20 token recall.
pub fn single_evidence_score(pred: &Value, gold: &EvidenceRef) -> f64 {
    let Some(p) = read_ref(pred) else { return 0.0 };
    if p.doc_id.trim().is_empty() && p.token_ids.is_empty() && p.bbox.is_empty() {
        return 0.0;
    }
    let doc = f64::from(u8::from(
        p.doc_id == gold.doc_id || text_eq(&p.doc_id, &gold.doc_id),
    ));
    let page = f64::from(u8::from(p.page == Some(gold.page)));
    let iou = bbox_iou(&p.bbox, &gold.bbox);
    let tokens = token_recall(&p.token_ids, &gold.token_ids);
    0.35 * doc + 0.15 * page + 0.30 * iou + 0.20 * tokens
}

/// |pred ∩ gold| / |gold| on raw ids (as sets).
pub fn token_recall<P: AsRef<str>, G: AsRef<str>>(pred: &[P], gold: &[G]) -> f64 {
    if pred.is_empty() || gold.is_empty() {
        return 0.0;
    }
    let p: BTreeSet<&str> = pred.iter().map(AsRef::as_ref).collect();
    let g: BTreeSet<&str> = gold.iter().map(AsRef::as_ref).collect();
    p.intersection(&g).count() as f64 / g.len() as f64
}

/// How many claims a submission may make over `gold` targets before further ones count as spam:
/// the gold's own plus twice as many again (at least two).
pub fn claim_allowance(gold: usize) -> usize {
    gold + 2 * gold.max(1)
}

/// Does every reference of an evidence entry point at something the agent revealed?
pub fn is_grounded(v: &Value, revealed: Revealed<'_>) -> bool {
    let refs = crate::certificate::extract_refs(v);
    !refs.is_empty() && refs.iter().all(|r| revealed.contains(r))
}

/// Every evidence entry whose key canonicalises to one code: one claim, however it is spelled.
#[derive(Debug, Clone, Default)]
pub struct Claim<'a> {
    pub entries: Vec<&'a Value>,
    /// Token ids cited over all its entries.
    pub tokens: BTreeSet<&'a str>,
}

impl Claim<'_> {
    /// Every entry grounded in what the agent revealed.
    pub fn grounded(&self, revealed: Revealed<'_>) -> bool {
        !self.entries.is_empty() && self.entries.iter().all(|v| is_grounded(v, revealed))
    }

    /// A citation, not a spray: at most [`MAX_CLAIM_ENTRIES`] keys and
    /// [`MAX_CITATION_TOKENS`] tokens over all of them.
    pub fn specific(&self) -> bool {
        self.entries.len() <= MAX_CLAIM_ENTRIES && self.tokens.len() <= MAX_CITATION_TOKENS
    }
}

/// The evidence map as claims: one per canonical code (keys that name no code are left out).
pub fn claims_by_code(evidence_map: &BTreeMap<String, Value>) -> BTreeMap<&'static str, Claim<'_>> {
    let mut out: BTreeMap<&'static str, Claim<'_>> = BTreeMap::new();
    for (k, v) in evidence_map {
        let Some(code) = canonical_code(k) else {
            continue;
        };
        let c = out.entry(code).or_default();
        c.entries.push(v);
        if let Some(r) = read_ref(v) {
            c.tokens.extend(r.token_ids);
        }
    }
    out
}
