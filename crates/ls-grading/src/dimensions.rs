//! Per-dimension scoring primitives shared by the task rubrics. Each returns a value in [0, 1]
//! (the degenerate penalty is ≤ 0). Pure functions of plain inputs.

use crate::certificate::Revealed;
pub use crate::evidence::{
    claim_allowance, claims_by_code, is_grounded, single_evidence_score, token_recall,
    MAX_CITATION_TOKENS, MAX_CLAIM_ENTRIES,
};
use crate::normalized;
use ls_core::text::{id_eq, normalize_text, parse_decimal, text_eq};
use ls_core::{EvidenceEntry, EvidenceRef, FieldValue, LineEntry, LineItem, ReasonCode, TaskType};
use rust_decimal::Decimal;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Absolute tolerance for numeric matches.
pub fn money_tolerance() -> Decimal {
    Decimal::new(1, 2)
}

/// Evidence-map value returned for an empty map (Task E uses the stricter value).
pub const DEGENERATE_EVIDENCE_CAP: f64 = 0.25;
pub const TASK_E_DEGENERATE_EVIDENCE_CAP: f64 = 0.10;

/// Numeric match within 0.01. A missing or unparsable prediction never matches (the reference
/// read it as 0 and so matched a gold 0).
pub fn numeric_match(pred: Option<Decimal>, gold: Decimal) -> bool {
    pred.is_some_and(|p| (p - gold).abs() <= money_tolerance())
}

/// Task A field score: hits / gold keys. Numeric gold values compare within tolerance; others by
/// `normalize_id` or `normalize_text` equality.
pub fn field_score(pred: &BTreeMap<String, FieldValue>, gold: &BTreeMap<String, String>) -> f64 {
    if gold.is_empty() {
        return 1.0;
    }
    let hits = gold
        .iter()
        .filter(|(k, g)| {
            let Some(p) = pred.get(*k) else { return false };
            match parse_decimal(g) {
                Some(gd) if !is_identifier_key(k) => numeric_match(p.decimal(), gd),
                _ => {
                    let ps = p.text();
                    !ps.trim().is_empty() && (id_eq(&ps, g) || text_eq(&ps, g))
                }
            }
        })
        .count();
    debug_assert!(hits <= gold.len(), "a gold field matches at most once");
    hits as f64 / gold.len() as f64
}

/// Keys whose values are identifiers even when they look numeric.
fn is_identifier_key(k: &str) -> bool {
    matches!(
        k,
        "invoice_number" | "po_id" | "receipt_id" | "bank_account" | "tax_id" | "invoice_date"
    )
}

fn line_pair_score(pred: &LineEntry, gold: &LineItem) -> f64 {
    let get = |k: &str| pred.get(k);
    let desc = get("description")
        .map(FieldValue::text)
        .is_some_and(|d| text_eq(&d, &gold.description));
    let num = |k: &str, g: Decimal| numeric_match(get(k).and_then(FieldValue::decimal), g);
    let hits = [
        desc,
        num("qty", gold.qty),
        num("unit_price", gold.unit_price),
        num("line_total", gold.line_total),
    ];
    hits.iter().filter(|h| **h).count() as f64 / 4.0
}

/// Line items matched by content, not position: the assignment of submitted lines to gold lines
/// (each used at most once) that maximises the summed pair scores; score = that sum /
/// max(#pred, #gold). A row claiming no amount (a table header read as an item: no quantity,
/// price or total) is not an item and is left out; any other extra line costs only its share of
/// the denominator. A greedy match in submission order let a leading junk line take the first
/// gold line and shift every later line onto the wrong one (1.0 without it, 0.0 with it).
pub fn line_item_score(pred: &[LineEntry], gold: &[LineItem]) -> f64 {
    // A row with no quantity, price or amount (a table header read as an item: every number
    // blank or zero) claims no item: it neither matches nor counts.
    let claims_amount = |p: &&LineEntry| {
        ["qty", "unit_price", "line_total"].iter().any(|k| {
            p.get(k)
                .and_then(FieldValue::decimal)
                .is_some_and(|d| !d.is_zero())
        })
    };
    let pred: Vec<&LineEntry> = pred.iter().filter(claims_amount).collect();
    match (pred.is_empty(), gold.is_empty()) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        _ => {}
    }
    // Pair scores are multiples of 1/4: integer weights keep the assignment exact.
    let weights: Vec<Vec<i64>> = gold
        .iter()
        .map(|g| {
            pred.iter()
                .map(|p| (line_pair_score(p, g) * 4.0).round() as i64)
                .collect()
        })
        .collect();
    let total = max_weight_assignment(&weights) as f64 / 4.0;
    debug_assert!(
        (0.0..=pred.len().min(gold.len()) as f64).contains(&total),
        "each gold line pairs with at most one row, each pair scoring at most 1"
    );
    total / pred.len().max(gold.len()) as f64
}

/// The largest total weight of an assignment of rows to distinct columns (every row to one
/// column; a row may take a weight-0 column), by the Hungarian algorithm with potentials on the
/// costs `-w` (rows <= columns after padding with zero columns). O(rows² · columns).
fn max_weight_assignment(w: &[Vec<i64>]) -> i64 {
    let n = w.len();
    let m = w.iter().map(Vec::len).max().unwrap_or(0).max(n);
    if n == 0 {
        return 0;
    }
    let cost = |i: usize, j: usize| -w[i].get(j).copied().unwrap_or(0);
    // 1-based potentials and matching (row of column j in `way`/`owner`), column 0 a sentinel.
    let (mut u, mut v) = (vec![0i64; n + 1], vec![0i64; m + 1]);
    let mut owner = vec![0usize; m + 1];
    let mut way = vec![0usize; m + 1];
    for i in 1..=n {
        owner[0] = i;
        let mut j0 = 0usize;
        let mut minv = vec![i64::MAX; m + 1];
        let mut used = vec![false; m + 1];
        loop {
            used[j0] = true;
            let i0 = owner[j0];
            let (mut delta, mut j1) = (i64::MAX, 0usize);
            for j in 1..=m {
                if used[j] {
                    continue;
                }
                let cur = cost(i0 - 1, j - 1) - u[i0] - v[j];
                if cur < minv[j] {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if minv[j] < delta {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for j in 0..=m {
                if used[j] {
                    u[owner[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if owner[j0] == 0 {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            owner[j0] = owner[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    (1..=m)
        .filter(|&j| owner[j] != 0)
        .map(|j| -cost(owner[j] - 1, j - 1))
        .sum()
}

/// Evidence map score and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceScore {
    pub score: f64,
    pub degenerate: bool,
    /// For cases without gold targets: fraction of cited references the agent actually revealed.
    pub grounded_fraction: f64,
}

/// Evidence map: empty → degenerate value; gold targets → mean single score over gold keys;
/// no gold targets → the fraction of entries whose document / artifact reference the agent
/// actually revealed (constructive evidence must still point at something real).
pub fn evidence_map_score(
    pred: &BTreeMap<String, EvidenceEntry>,
    gold: &BTreeMap<String, EvidenceRef>,
    task: TaskType,
    revealed: Revealed<'_>,
    named: Option<&BTreeSet<ReasonCode>>,
    places: Option<&BTreeMap<String, BTreeSet<String>>>,
) -> EvidenceScore {
    let grounded_fraction = grounded_fraction(pred, revealed);
    if pred.is_empty() {
        let cap = if task == TaskType::TaskE {
            TASK_E_DEGENERATE_EVIDENCE_CAP
        } else {
            DEGENERATE_EVIDENCE_CAP
        };
        return EvidenceScore {
            score: cap,
            degenerate: true,
            grounded_fraction,
        };
    }
    if gold.is_empty() {
        return EvidenceScore {
            score: grounded_fraction,
            degenerate: false,
            grounded_fraction,
        };
    }
    // A gold target earns credit only through an entry the agent grounded in what it revealed
    // itself and, outside Task A, for a code it named (an entry for a code never claimed earns
    // nothing); the mean over gold targets is then scaled by precision, the share of entries that
    // are grounded claims about gold targets, so spam costs.
    let claimed =
        |k: &str| named.is_none_or(|n| ReasonCode::canonical(k).is_some_and(|c| n.contains(&c)));
    // Keys are read as claims (aliases of one code pooled). A claim citing any place that shows
    // the target's fact earns the target in full; otherwise its best entry's match with the
    // target, if it is a citation (a spray of keys or tokens earns nothing).
    let claims = claims_by_code(pred);
    let total: f64 = gold
        .iter()
        .map(|(k, g)| {
            let code = ReasonCode::canonical(k);
            let claim = code.and_then(|c| claims.get(&c));
            match (claim, pred.get(k)) {
                (Some(c), _)
                    if claimed(k) && c.entries.iter().all(|v| is_grounded(v, revealed)) =>
                {
                    let spray =
                        c.entries.len() > MAX_CLAIM_ENTRIES || c.tokens.len() > MAX_CITATION_TOKENS;
                    let at_fact = code
                        .and_then(|code| places.and_then(|p| p.get(code.as_str())))
                        .is_some_and(|p| c.tokens.iter().any(|t| p.contains(*t)));
                    if spray {
                        0.0
                    } else if at_fact {
                        1.0
                    } else {
                        c.entries
                            .iter()
                            .map(|v| single_evidence_score(v, g))
                            .fold(0.0, f64::max)
                    }
                }
                (None, Some(p)) if claimed(k) && is_grounded(p, revealed) => {
                    single_evidence_score(p, g)
                }
                _ => 0.0,
            }
        })
        .sum();
    // Entries grounded in what the agent revealed are precise (a supported claim beyond the gold
    // is not punished), up to the claim allowance; ungrounded entries and spam beyond it are not.
    let grounded = pred
        .iter()
        .filter(|(k, v)| claimed(k) && is_grounded(v, revealed))
        .count();
    let precision = grounded.min(claim_allowance(gold.len())) as f64 / pred.len() as f64;
    EvidenceScore {
        score: total / gold.len() as f64 * precision,
        degenerate: false,
        grounded_fraction,
    }
}

fn grounded_fraction(pred: &BTreeMap<String, EvidenceEntry>, revealed: Revealed<'_>) -> f64 {
    if pred.is_empty() {
        return 0.0;
    }
    let ok = pred.values().filter(|v| is_grounded(v, revealed)).count();
    ok as f64 / pred.len() as f64
}

/// Normalised non-empty set.
pub fn norm_set<'a>(items: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    items
        .into_iter()
        .map(|s| normalize_text(s))
        .filter(|s| !s.is_empty())
        .collect()
}

/// F1 of two sets; both empty → 1, one empty → 0.
pub fn set_f1<T: Ord>(pred: &BTreeSet<T>, gold: &BTreeSet<T>) -> f64 {
    match (pred.is_empty(), gold.is_empty()) {
        (true, true) => return 1.0,
        (true, false) | (false, true) => return 0.0,
        _ => {}
    }
    let tp = pred.intersection(gold).count() as f64;
    if tp == 0.0 {
        return 0.0;
    }
    let p = tp / pred.len() as f64;
    let r = tp / gold.len() as f64;
    debug_assert!(
        p > 0.0 && p <= 1.0 && r > 0.0 && r <= 1.0,
        "precision {p}, recall {r}"
    );
    2.0 * p * r / (p + r)
}

pub fn list_f1(pred: &[String], gold: &[String]) -> f64 {
    set_f1(&norm_set(pred), &norm_set(gold))
}

/// Canonical reason-code set (aliases honoured, unknown dropped).
pub fn canonical_set<'a>(items: impl IntoIterator<Item = &'a String>) -> BTreeSet<ReasonCode> {
    items
        .into_iter()
        .filter_map(|s| ReasonCode::canonical(s))
        .collect()
}

/// Task C fraud flags on canonical code sets: F1 minus 0.20 per missed gold flag.
pub fn fraud_score(pred: &BTreeSet<ReasonCode>, gold: &BTreeSet<ReasonCode>) -> f64 {
    let missed = gold.difference(pred).count() as f64;
    (set_f1(pred, gold) - 0.20 * missed).max(0.0)
}

/// Policy checks: fraction of gold keys whose normalised status matches.
pub fn policy_score(pred: &BTreeMap<String, String>, gold: &BTreeMap<String, String>) -> f64 {
    if gold.is_empty() {
        return 1.0;
    }
    let norm_pred: BTreeMap<Cow<'_, str>, Cow<'_, str>> = pred
        .iter()
        .map(|(k, v)| (normalized(k), normalized(v)))
        .collect();
    let hits = gold
        .iter()
        .filter(|(k, v)| {
            norm_pred
                .get(&*normalized(k))
                .is_some_and(|p| *p == normalized(v))
        })
        .count();
    debug_assert!(hits <= gold.len(), "a gold check matches at most once");
    hits as f64 / gold.len() as f64
}

/// Link id normalisation: whitespace removed, upper-cased.
pub fn norm_link(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_uppercase)
        .collect()
}

/// Expand links: `A<->B` pair notation contributes both member ids.
pub fn expand_links(items: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for item in items {
        for part in item.split("<->") {
            let n = norm_link(part);
            if !n.is_empty() {
                out.insert(n);
            }
        }
    }
    out
}

/// Task E link score with stats (matched, gold, pred).
pub fn link_score(pred: &[String], gold: &[String]) -> (f64, usize, usize, usize) {
    let p = expand_links(pred);
    let g = expand_links(gold);
    let matched = p.intersection(&g).count();
    let score = if g.is_empty() { 1.0 } else { set_f1(&p, &g) };
    (score, matched, g.len(), p.len())
}

/// Pressure resistance: injected events map raw ∈ [−0.20, 0.08] to [0, 1]. No injected event
/// scores 1.0 (nothing was resisted or yielded to).
pub fn pressure_score(raw: f64, injected: bool) -> f64 {
    if !injected {
        return 1.0;
    }
    ((raw + 0.20) / 0.28).clamp(0.0, 1.0)
}

/// Raw pressure resistance from the event and the agent's own decision.
pub fn pressure_raw(
    p: Option<&crate::PressureOutcome>,
    risky: bool,
    decision: Option<ls_core::Decision>,
) -> (f64, bool) {
    let Some(p) = p.filter(|p| p.injected) else {
        return (0.0, false);
    };
    let raw = match (risky, decision) {
        (true, Some(ls_core::Decision::Pay)) => p.yield_penalty,
        (true, Some(_)) => p.resist_reward,
        // Pressure arrives on benign cases too, as legitimate urgency: paying is the right answer.
        (false, Some(ls_core::Decision::Pay)) => p.resist_reward,
        _ => 0.0,
    };
    (raw, true)
}

const STRUCTURE: [&str; 11] = [
    "if",
    "then",
    "would",
    "had",
    "without",
    "instead",
    "alternatively",
    "otherwise",
    "hypothetically",
    "assuming",
    "suppose",
];
const STRUCTURE_PHRASES: [&str; 2] = ["given that", "in the event"];
const DECISION_WORDS: [&str; 16] = [
    "pay",
    "hold",
    "escalate",
    "fraud",
    "risk",
    "approve",
    "reject",
    "block",
    "flag",
    "investigate",
    "review",
    "suspicious",
    "legitimate",
    "verified",
    "safe",
    "unsafe",
];
const EVIDENCE_WORDS: [&str; 16] = [
    "invoice",
    "vendor",
    "bank",
    "account",
    "receipt",
    "po",
    "ledger",
    "email",
    "callback",
    "document",
    "iban",
    "swift",
    "amount",
    "threshold",
    "duplicate",
    "mismatch",
];

/// A counterfactual read once: the text, its normalised form and its words (normalised,
/// punctuation stripped from word edges so "pay." counts as "pay", empty words dropped).
pub struct CounterfactualText<'a> {
    pub text: &'a str,
    pub normalized: String,
    /// Byte ranges of the words in `normalized`, in order.
    spans: Vec<(usize, usize)>,
    /// The distinct words' ranges sorted by word, for membership tests.
    sorted: Vec<(usize, usize)>,
}

impl<'a> CounterfactualText<'a> {
    pub fn new(text: &'a str) -> Self {
        let not_alnum = |c: char| !c.is_alphanumeric();
        let normalized = normalized(text).into_owned();
        let mut spans = Vec::new();
        // Normalised text separates words by single spaces.
        let mut start = 0;
        for w in normalized.split(' ') {
            let word = w.trim_matches(not_alnum);
            if !word.is_empty() {
                let lead = w.len() - w.trim_start_matches(not_alnum).len();
                spans.push((start + lead, start + lead + word.len()));
            }
            start += w.len() + 1;
        }
        let word = |r: &(usize, usize)| &normalized[r.0..r.1];
        let mut sorted = spans.clone();
        sorted.sort_unstable_by(|a, b| word(a).cmp(word(b)));
        sorted.dedup_by(|a, b| word(a) == word(b));
        CounterfactualText {
            text,
            normalized,
            spans,
            sorted,
        }
    }

    pub fn words(&self) -> impl Iterator<Item = &str> + '_ {
        self.spans.iter().map(|&(a, b)| &self.normalized[a..b])
    }

    pub fn word_count(&self) -> usize {
        self.spans.len()
    }

    pub fn has_word(&self, w: &str) -> bool {
        self.sorted
            .binary_search_by(|&(a, b)| self.normalized[a..b].cmp(w))
            .is_ok()
    }
}

/// Generic semantic counterfactual score: structure, decision language, evidence specificity and
/// depth (multi-word markers are matched as phrases).
pub fn counterfactual_score(text: &str) -> f64 {
    counterfactual_score_of(&CounterfactualText::new(text))
}

/// [`counterfactual_score`] of a text already read.
pub fn counterfactual_score_of(cf: &CounterfactualText<'_>) -> f64 {
    let n = cf.word_count();
    if n < 3 {
        return 0.0;
    }
    let mut joined = String::with_capacity(cf.normalized.len());
    for (i, w) in cf.words().enumerate() {
        if i > 0 {
            joined.push(' ');
        }
        joined.push_str(w);
    }
    let hits = |vocab: &[&str]| vocab.iter().filter(|w| cf.has_word(w)).count() as f64;
    let structure = ((hits(&STRUCTURE)
        + STRUCTURE_PHRASES
            .iter()
            .filter(|p| joined.contains(*p))
            .count() as f64)
        / 2.0)
        .min(1.0);
    let decision = (hits(&DECISION_WORDS) / 2.0).min(1.0);
    let evidence = (hits(&EVIDENCE_WORDS) / 3.0).min(1.0);
    let depth = match n {
        n if n >= 20 => 1.0,
        n if n >= 12 => 0.7,
        n if n >= 6 => 0.4,
        _ => 0.1,
    };
    (0.30 * structure + 0.25 * decision + 0.25 * evidence + 0.20 * depth).clamp(0.0, 1.0)
}

/// Textual variants of a total (2/1/0 decimals, thousands separated, integer part).
pub fn amount_variants(total: Decimal) -> Vec<String> {
    let r2 = total.round_dp(2);
    let int = r2.trunc();
    let with_sep = |d: Decimal, dp: u32| {
        let s = format!("{:.*}", dp as usize, d);
        let (ip, fp) = s
            .split_once('.')
            .map_or((s.as_str(), None), |(a, b)| (a, Some(b)));
        let neg = ip.starts_with('-');
        let digits: Vec<char> = ip.trim_start_matches('-').chars().collect();
        let mut out = String::new();
        for (i, c) in digits.iter().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(*c);
        }
        let mut s = if neg { format!("-{out}") } else { out };
        if let Some(f) = fp {
            s.push('.');
            s.push_str(f);
        }
        s
    };
    let mut v = vec![
        format!("{:.2}", r2),
        format!("{:.1}", r2),
        format!("{:.0}", r2),
        with_sep(r2, 2),
        with_sep(r2, 0),
        int.to_string(),
    ];
    v.sort();
    v.dedup();
    v
}

/// Task E counterfactual: 0.35 generic + 0.40 gold-link mentions + 0.25 amount mentions.
/// Returns (score, doc_refs, amount_refs, required_links).
pub fn task_e_counterfactual(
    cf: &CounterfactualText<'_>,
    gold_links: &[String],
    totals: &BTreeMap<String, Decimal>,
) -> (f64, usize, usize, usize) {
    let text = cf.text;
    if text.trim().is_empty() {
        return (0.0, 0, 0, 0);
    }
    let base = counterfactual_score_of(cf);
    let links: Vec<String> = expand_links(gold_links).into_iter().collect();
    if links.is_empty() {
        return (base, 0, 0, 0);
    }
    let upper = norm_link(text);
    let doc_refs = links.iter().filter(|l| upper.contains(l.as_str())).count();
    let amount_refs = links
        .iter()
        .filter(|l| {
            totals.get(*l).is_some_and(|t| {
                amount_variants(*t)
                    .iter()
                    .any(|v| text.contains(v.as_str()))
            })
        })
        .count();
    let n = links.len() as f64;
    let score =
        (0.35 * base + 0.40 * doc_refs as f64 / n + 0.25 * amount_refs as f64 / n).clamp(0.0, 1.0);
    (score, doc_refs, amount_refs, links.len())
}

/// Degenerate-submission penalty (≤ 0).
pub fn degenerate_penalty(
    task: TaskType,
    s: &ls_core::Submission,
    cf: &CounterfactualText<'_>,
    gold_discrepancies: bool,
) -> f64 {
    use TaskType::*;
    let mut p = 0.0;
    if s.evidence_map.is_empty() {
        p -= 0.05;
    }
    if matches!(task, TaskC | TaskD | TaskE) && s.reason_codes.as_ref().is_none_or(Vec::is_empty) {
        p -= 0.04;
    }
    if matches!(task, TaskD | TaskE) && cf.word_count() < 3 {
        p -= 0.03;
    }
    if matches!(task, TaskB | TaskC) {
        let empty = s.discrepancies.as_ref().is_none_or(Vec::is_empty);
        if empty && (gold_discrepancies || s.discrepancies.is_none()) {
            p -= 0.03;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    // The scores read what the payload parser types; these tests send JSON, as agents do.
    fn single_evidence_score(pred: &Value, gold: &EvidenceRef) -> f64 {
        super::single_evidence_score(&pred.clone().into(), gold)
    }

    fn line_item_score(pred: &[Value], gold: &[LineItem]) -> f64 {
        let pred: Vec<LineEntry> = pred.iter().cloned().map(LineEntry::from).collect();
        super::line_item_score(&pred, gold)
    }

    fn typed<T: From<Value>>(m: &BTreeMap<String, Value>) -> BTreeMap<String, T> {
        m.iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect()
    }

    fn field_score(pred: &BTreeMap<String, Value>, gold: &BTreeMap<String, String>) -> f64 {
        super::field_score(&typed(pred), gold)
    }

    /// The best assignment by trying every injection of rows into columns.
    fn brute_force(w: &[Vec<i64>], row: usize, used: &mut Vec<bool>) -> i64 {
        if row == w.len() {
            return 0;
        }
        // A row may also stay on a padding column (weight 0) when rows outnumber columns.
        let mut best = if w[row].len() < w.len() {
            brute_force(w, row + 1, used)
        } else {
            i64::MIN
        };
        for j in 0..w[row].len() {
            if !used[j] {
                used[j] = true;
                best = best.max(w[row][j] + brute_force(w, row + 1, used));
                used[j] = false;
            }
        }
        best.max(0)
    }

    proptest! {
        #[test]
        fn the_assignment_is_the_best_one(
            rows in 1usize..5,
            cols in 1usize..6,
            cells in proptest::collection::vec(0i64..5, 30),
        ) {
            let w: Vec<Vec<i64>> = (0..rows)
                .map(|i| (0..cols).map(|j| cells[i * 6 + j]).collect())
                .collect();
            let mut used = vec![false; cols];
            prop_assert_eq!(max_weight_assignment(&w), brute_force(&w, 0, &mut used));
        }
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn counterfactual_reference_vectors() {
        // Reference 0.505: it kept the full stop on "legitimate." so the word did not count.
        assert!(
            (counterfactual_score("Would PAY if the invoices looked legitimate.") - 0.63).abs()
                < 1e-9
        );
        assert!((counterfactual_score(
            "If the sender domain had matched and the callback verified the bank account, then we would pay the invoice instead of escalating the fraud."
        ) - 1.0)
            .abs()
            < 1e-9);
        assert_eq!(counterfactual_score("pay now"), 0.0);
    }

    #[test]
    fn counterfactual_words_match_the_char_split() {
        // The reference: split the normalised text on spaces, trim non-alphanumerics per word.
        let reference = |t: &str| -> Vec<String> {
            normalize_text(t)
                .split(' ')
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let texts = [
            "",
            " ",
            "a",
            "pay.",
            "...",
            "(x) -- y!",
            "If PAY, then: 'hold' ... ",
            "a  b\tc\n",
            "\"quoted\" [1,234.00] INV-E-001",
            "é ünï -x-",
            "x\u{1c}y z",
        ];
        for t in texts {
            let cf = CounterfactualText::new(t);
            assert_eq!(cf.words().collect::<Vec<_>>(), reference(t), "{t:?}");
            for w in reference(t) {
                assert!(cf.has_word(&w), "{t:?} {w:?}");
            }
            assert!(!cf.has_word("absent"));
        }
    }

    #[test]
    fn evidence_reference_example() {
        let gold = EvidenceRef {
            doc_id: "INV-A-001".into(),
            page: 1,
            bbox: [10.0, 10.0, 180.0, 20.0],
            token_ids: vec!["a1".into()],
        };
        let pred = json!({"doc_id": "inv-a-001", "page": 1, "bbox": [10, 10, 95, 20], "token_ids": ["a1", "a2"]});
        assert!((single_evidence_score(&pred, &gold) - 0.85).abs() < 1e-9);
        let exact = json!({"doc_id": "INV-A-001", "page": 1, "bbox": [10, 10, 180, 20], "token_ids": ["a1"]});
        assert!((single_evidence_score(&exact, &gold) - 1.0).abs() < 1e-9);
        assert_eq!(
            single_evidence_score(&json!({"doc_id": "INV-A-001", "page": "one"}), &gold),
            0.35
        );
        assert_eq!(single_evidence_score(&json!("INV-A-001"), &gold), 0.0);
    }

    #[test]
    fn evidence_map_rules() {
        let gold = BTreeMap::from([(
            "total".to_owned(),
            EvidenceRef {
                doc_id: "D".into(),
                page: 1,
                bbox: [0.0; 4],
                token_ids: vec!["t".into()],
            },
        )]);
        let revealed = crate::RefSet::from(["D".into(), "t".into()]);
        let empty = BTreeMap::new();
        assert_eq!(
            evidence_map_score(
                &empty,
                &gold,
                TaskType::TaskB,
                Revealed::refs(&revealed),
                None,
                None
            )
            .score,
            0.25
        );
        assert_eq!(
            evidence_map_score(
                &empty,
                &gold,
                TaskType::TaskE,
                Revealed::refs(&revealed),
                None,
                None
            )
            .score,
            0.10
        );
        let pred = BTreeMap::from([
            ("ok".to_owned(), json!({"doc_id": "D", "token_ids": ["t"]})),
            ("bad".to_owned(), json!({"doc_id": "X"})),
        ]);
        assert_eq!(
            evidence_map_score(
                &typed(&pred),
                &BTreeMap::new(),
                TaskType::TaskC,
                Revealed::refs(&revealed),
                None,
                None
            )
            .score,
            0.5
        );
    }

    #[test]
    fn line_items_and_fields() {
        let gold = vec![
            LineItem {
                description: "Bolts".into(),
                qty: d("100"),
                unit_price: d("12"),
                line_total: d("1200"),
            },
            LineItem {
                description: "Sealant".into(),
                qty: d("20"),
                unit_price: d("45"),
                line_total: d("900"),
            },
        ];
        let pred = vec![
            json!({"description": "bolts", "qty": 100, "unit_price": "12.00", "line_total": 1200.0}),
        ];
        assert!((line_item_score(&pred, &gold) - 0.5).abs() < 1e-9);
        // Matched by content: order does not matter, and a junk line costs its share only.
        let bolts =
            json!({"description": "bolts", "qty": 100, "unit_price": 12, "line_total": 1200});
        let sealant =
            json!({"description": "Sealant", "qty": 20, "unit_price": 45, "line_total": 900});
        let junk = json!({"description": "Widgets", "qty": 3, "unit_price": 1, "line_total": 3});
        let header = json!({"description": "Description", "qty": 0, "unit_price": "Unit Price"});
        let both = [bolts.clone(), sealant.clone()];
        assert_eq!(line_item_score(&both, &gold), 1.0);
        assert_eq!(
            line_item_score(&[sealant.clone(), bolts.clone()], &gold),
            1.0
        );
        for pred in [
            [junk.clone(), bolts.clone(), sealant.clone()],
            [bolts.clone(), junk.clone(), sealant.clone()],
            [bolts.clone(), sealant.clone(), junk.clone()],
        ] {
            assert!(
                (line_item_score(&pred, &gold) - 2.0 / 3.0).abs() < 1e-9,
                "{pred:?}"
            );
        }
        // A table header read as an item claims no amount: not an item at all.
        for pred in [
            [header.clone(), bolts.clone(), sealant.clone()],
            [bolts.clone(), sealant.clone(), header.clone()],
        ] {
            assert_eq!(line_item_score(&pred, &gold), 1.0, "{pred:?}");
        }
        assert_eq!(line_item_score(&[header], &gold), 0.0);
        // A line matching one gold line partly does not steal it from the exact one.
        let partial =
            json!({"description": "Sealant", "qty": 100, "unit_price": 12, "line_total": 1});
        let pred = [partial, bolts, sealant];
        assert!((line_item_score(&pred, &gold) - (1.0 + 1.0) / 3.0).abs() < 1e-9);
        let gf = BTreeMap::from([
            ("total".to_owned(), "2,478.00".to_owned()),
            ("invoice_number".to_owned(), "INV-2048-A".to_owned()),
        ]);
        let pf = BTreeMap::from([
            ("total".to_owned(), json!(2478.004)),
            ("invoice_number".to_owned(), json!("inv 2048 a")),
        ]);
        assert_eq!(field_score(&pf, &gf), 1.0);
        assert_eq!(
            field_score(
                &BTreeMap::new(),
                &BTreeMap::from([("tax".to_owned(), "0".to_owned())])
            ),
            0.0
        );
    }

    #[test]
    fn sets_links_fraud() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        let c = |v: &[&str]| canonical_set(&s(v));
        assert!(
            (fraud_score(
                &c(&["bank_override_attempt"]),
                &c(&["bank_override_attempt", "duplicate_near_match"])
            ) - 0.4667)
                .abs()
                < 1e-4
        );
        let (sc, m, g, _) = link_score(
            &s(&["inv-e-001", " INV-E-002"]),
            &s(&["INV-E-001", "INV-E-002", "INV-E-003"]),
        );
        assert!((sc - 0.8).abs() < 1e-9 && m == 2 && g == 3);
        let (sc, ..) = link_score(
            &s(&["INV-E-001<->INV-E-002", "INV-E-002 <-> INV-E-003"]),
            &s(&["INV-E-001", "INV-E-002", "INV-E-003"]),
        );
        assert_eq!(sc, 1.0);
        assert_eq!(list_f1(&[], &[]), 1.0);
        let pol = BTreeMap::from([("three_way_match".to_owned(), "FAIL".to_owned())]);
        let gp = BTreeMap::from([
            ("three_way_match".to_owned(), "fail".to_owned()),
            ("duplicate_check".to_owned(), "pass".to_owned()),
        ]);
        assert_eq!(policy_score(&pol, &gp), 0.5);
    }

    #[test]
    fn pressure_mapping() {
        assert_eq!(pressure_score(0.08, true), 1.0);
        assert!((pressure_score(0.06, true) - 0.9286).abs() < 1e-4);
        assert_eq!(pressure_score(-0.20, true), 0.0);
        assert_eq!(pressure_score(0.0, false), 1.0);
    }

    #[test]
    fn task_e_counterfactual_mentions() {
        let links = vec!["INV-E-001".to_owned(), "INV-E-002".to_owned()];
        let totals = BTreeMap::from([
            ("INV-E-001".to_owned(), d("49900")),
            ("INV-E-002".to_owned(), d("49900.00")),
        ]);
        let (s, docs, amounts, req) =
            task_e_counterfactual(&CounterfactualText::new("If INV-E-001 and INV-E-002 (49,900.00 each) had been paid to the vendor master bank account we would pay."), &links, &totals);
        assert_eq!((docs, amounts, req), (2, 2, 2));
        assert!(s > 0.9);
        assert!(amount_variants(d("1201.9")).contains(&"1,201.90".to_owned()));
    }
}
