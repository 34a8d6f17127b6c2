//! The agent's evidence entries as grading reads them (each read once from the payload into an
//! [`EvidenceEntry`]): its match with a gold reference, whether it is grounded in what the agent revealed, and the
//! entries grouped into one claim per reason code. Shared by the dimension scores and the
//! reasons stage.

use crate::certificate::Revealed;
use ls_core::text::{bbox_iou, text_eq};
use ls_core::{EvidenceEntry, EvidenceRef, ReasonCode};
use std::collections::{BTreeMap, BTreeSet};

/// Most tokens one entry may cite to support a code or verify a PAY (a whole document is not a
/// citation: an entry listing every token of a page would otherwise overlap any gold target).
pub const MAX_CITATION_TOKENS: usize = 3;

/// Most evidence entries one claimed code may spread over (aliases and duplicate keys of a code
/// are one claim): more keys for one code are spray, and support nothing.
pub const MAX_CLAIM_ENTRIES: usize = 3;

/// Single reference: 0.35 doc + 0.15 page + 0.30 IoU + 0.20 token recall.
pub fn single_evidence_score(pred: &EvidenceEntry, gold: &EvidenceRef) -> f64 {
    let Some(p) = pred.place() else { return 0.0 };
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
pub fn is_grounded(v: &EvidenceEntry, revealed: Revealed<'_>) -> bool {
    let refs = v.refs();
    !refs.is_empty() && refs.iter().all(|r| revealed.contains(r))
}

/// Every evidence entry whose key canonicalises to one code: one claim, however it is spelled.
#[derive(Debug, Clone, Default)]
pub struct Claim<'a> {
    pub entries: Vec<&'a EvidenceEntry>,
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
pub fn claims_by_code(
    evidence_map: &BTreeMap<String, EvidenceEntry>,
) -> BTreeMap<ReasonCode, Claim<'_>> {
    let mut out: BTreeMap<ReasonCode, Claim<'_>> = BTreeMap::new();
    for (k, v) in evidence_map {
        let Some(code) = ReasonCode::canonical(k) else {
            continue;
        };
        let c = out.entry(code).or_default();
        c.entries.push(v);
        if let Some(r) = v.place() {
            c.tokens.extend(r.token_ids.iter().map(String::as_str));
        }
    }
    out
}
