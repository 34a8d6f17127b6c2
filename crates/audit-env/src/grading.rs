//! Pure grading functions: partial-credit F1, strict F1, weighted F1, confusion matrix,
//! risk score (₹), calibration (ECE), the per-step reward and the campaign score.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{norm_key, weight_of, ErrorType, Finding, GtItem};
use crate::util::{clamp_score, ratio, round_n};

pub const PARTIAL_CREDIT: f64 = 0.40;
pub const TP_REWARD: f64 = 0.15;
pub const PARTIAL_REWARD: f64 = 0.04;
pub const FP_PENALTY: f64 = 0.05;
pub const DUPLICATE_PENALTY: f64 = 0.10;
pub const STEP_PENALTY: f64 = 0.02;
pub const STEP_DECAY: f64 = 0.005;
pub const RECALL_BONUS: f64 = 0.30;
pub const PRECISION_BONUS: f64 = 0.10;
pub const LOW_RECALL_PENALTY: f64 = 0.20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfusionEntry {
    pub ground_truth: usize,
    pub correctly_found: usize,
    pub missed: usize,
    pub false_positives: usize,
    pub severity_weight: f64,
}

impl ConfusionEntry {
    fn empty(severity_weight: f64) -> Self {
        ConfusionEntry {
            ground_truth: 0,
            correctly_found: 0,
            missed: 0,
            false_positives: 0,
            severity_weight,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RiskScore {
    pub caught_value: i64,
    pub missed_value: i64,
    pub total_risk_value: i64,
    pub risk_mitigation_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CalibrationBin {
    pub bin: usize,
    pub count: usize,
    pub confidence_mean: f64,
    pub accuracy_mean: f64,
    pub gap: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Calibration {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub samples: usize,
    pub valid_bins: usize,
    pub ece: Option<f64>,
    pub brier: Option<f64>,
    pub sharpness: Option<f64>,
    pub bins: Vec<CalibrationBin>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PartialMatch {
    pub document_id: String,
    pub submitted_type: String,
    pub expected_types: Vec<String>,
    /// The effective true positives this near miss earned: [`PARTIAL_CREDIT`] divided by the
    /// number of the agent's unmatched claims on the document ([`partial_shares`]).
    pub credit: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KeyRef {
    pub document_id: String,
    pub error_type: String,
}

/// Full grade of one set of findings against the ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GradeResult {
    /// Primary score: the partial-credit F1, clamped to [0.01, 0.99].
    pub score: f64,
    pub partial_credit_score: f64,
    /// README alias of `partial_credit_score`.
    pub partial_credit_f1: f64,
    pub strict_f1: f64,
    pub precision: f64,
    pub recall: f64,
    pub weighted_score: f64,
    pub true_positives: usize,
    pub false_positives: usize,
    pub false_negatives: usize,
    pub weighted_false_negatives: f64,
    pub duplicates: usize,
    pub partial_matches: usize,
    pub total_findings: usize,
    pub total_errors: usize,
    pub matched_errors: Vec<KeyRef>,
    pub missed_errors: Vec<KeyRef>,
    pub false_positive_list: Vec<KeyRef>,
    pub duplicate_list: Vec<KeyRef>,
    pub partial_match_list: Vec<PartialMatch>,
    pub confusion_matrix: BTreeMap<String, ConfusionEntry>,
    pub risk_score: RiskScore,
    pub calibration: Calibration,
    pub critical_missed: bool,
    /// Unfound ground-truth errors per type (always present; the only miss information in
    /// `counts` mode).
    pub missed_by_type: BTreeMap<String, usize>,
    /// `full`: every list above names documents. `counts`: held-out seeds and campaigns, where
    /// the lists that name documents are empty and only counts are reported ([`GradeResult::redacted`]).
    pub feedback_detail: FeedbackDetail,
}

/// How much of the ground truth a grade may show the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackDetail {
    /// Training seeds: matched, missed, false-positive and near-miss lists name documents.
    #[default]
    Full,
    /// Held-out seeds and campaigns: counts only (per type in `confusion_matrix` and
    /// `missed_by_type`); no list names a document or an expected type.
    Counts,
}

impl GradeResult {
    /// The grade as an evaluation reply may show it: every count and score, no document lists.
    /// A replayed empty submission then learns how many errors of each type exist, never where.
    pub fn redacted(&self) -> GradeResult {
        GradeResult {
            matched_errors: vec![],
            missed_errors: vec![],
            false_positive_list: vec![],
            duplicate_list: vec![],
            partial_match_list: vec![],
            feedback_detail: FeedbackDetail::Counts,
            ..self.clone()
        }
    }

    /// `redacted()` when `detail` is `Counts`, otherwise a copy.
    pub fn for_detail(&self, detail: FeedbackDetail) -> GradeResult {
        match detail {
            FeedbackDetail::Full => self.clone(),
            FeedbackDetail::Counts => self.redacted(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The finding names a ground-truth error (index into the ground truth).
    Match(usize),
    /// The error it names was already matched by an earlier finding.
    Duplicate(usize),
    /// A near miss: right document, wrong type of the same family as an error there that is
    /// still unfound (index of the error it was credited against).
    Partial(usize),
    FalsePositive,
}

/// Matches findings against ground truth in submission order.
pub struct Matcher<'a> {
    gt: &'a [GtItem],
    /// normalized document → GT item indices covering it
    by_doc: BTreeMap<String, Vec<usize>>,
    pub matched: Vec<bool>,
    /// GT items that already gave partial credit: each unfound error can be "almost found" once,
    /// so repeating guesses on an erroneous document earns nothing more.
    partial_used: Vec<bool>,
}

impl<'a> Matcher<'a> {
    pub fn new(gt: &'a [GtItem]) -> Self {
        let mut by_doc: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, g) in gt.iter().enumerate() {
            for d in g.docs() {
                by_doc
                    .entry(d.trim().to_ascii_uppercase())
                    .or_default()
                    .push(i);
            }
        }
        Matcher {
            gt,
            by_doc,
            matched: vec![false; gt.len()],
            partial_used: vec![false; gt.len()],
        }
    }

    /// Classify one finding, updating the matcher's state.
    ///
    /// * exact (document, type) of an unmatched error → `Match`, of a matched one → `Duplicate`;
    /// * otherwise, a type of the same [`ErrorFamily`](crate::model::ErrorFamily) as an error on
    ///   that document that is neither matched nor already credited → `Partial` (near miss);
    /// * anything else (unknown document, unknown type, another family, credit used up) →
    ///   `FalsePositive`.
    pub fn classify(&mut self, doc: &str, t: &str) -> Class {
        let (d, t) = norm_key(doc, t);
        let Some(items) = self.by_doc.get(&d) else {
            return Class::FalsePositive;
        };
        let same_type: Vec<usize> = items
            .iter()
            .copied()
            .filter(|&i| self.gt[i].error_type.as_str() == t)
            .collect();
        if same_type.is_empty() {
            let Some(family) = ErrorType::parse(&t).map(ErrorType::family) else {
                return Class::FalsePositive;
            };
            return match items.iter().copied().find(|&i| {
                !self.matched[i]
                    && !self.partial_used[i]
                    && self.gt[i].error_type.family() == family
            }) {
                Some(i) => {
                    self.partial_used[i] = true;
                    Class::Partial(i)
                }
                None => Class::FalsePositive,
            };
        }
        if let Some(&i) = same_type.iter().find(|&&i| !self.matched[i]) {
            self.matched[i] = true;
            Class::Match(i)
        } else {
            Class::Duplicate(same_type[0])
        }
    }

    /// Whether (doc, type) names an error type present on that document.
    pub fn has_exact(&self, doc: &str, t: &str) -> bool {
        let (d, t) = norm_key(doc, t);
        self.by_doc
            .get(&d)
            .is_some_and(|items| items.iter().any(|&i| self.gt[i].error_type.as_str() == t))
    }

    pub fn expected_types(&self, doc: &str) -> Vec<String> {
        let d = doc.trim().to_ascii_uppercase();
        let mut v: Vec<String> = self
            .by_doc
            .get(&d)
            .map(|is| {
                is.iter()
                    .map(|&i| self.gt[i].error_type.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v.dedup();
        v
    }
}

pub(crate) fn f1(p: f64, r: f64) -> f64 {
    if p + r <= 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

fn key_ref(doc: &str, t: &str) -> KeyRef {
    let (d, t) = norm_key(doc, t);
    KeyRef {
        document_id: d,
        error_type: t,
    }
}

/// Classify a whole list of findings the way the grader does: findings naming an exact
/// (document, type) error are resolved first, so partial credit only goes to errors left
/// unfound by the whole list; the rest follow in submission order. Returns one class per
/// finding, in the input order, and the per-error matched flags.
pub fn classify_all(gt: &[GtItem], findings: &[Finding]) -> (Vec<Class>, Vec<bool>) {
    classify_refs(gt, &findings.iter().collect::<Vec<_>>())
}

fn classify_refs(gt: &[GtItem], findings: &[&Finding]) -> (Vec<Class>, Vec<bool>) {
    let mut m = Matcher::new(gt);
    let mut classes = vec![Class::FalsePositive; findings.len()];
    let (exact, rest): (Vec<usize>, Vec<usize>) = (0..findings.len())
        .partition(|&i| m.has_exact(&findings[i].document_id, &findings[i].error_type));
    for i in exact.into_iter().chain(rest) {
        classes[i] = m.classify(&findings[i].document_id, &findings[i].error_type);
    }
    (classes, m.matched)
}

/// The share of [`PARTIAL_CREDIT`] each finding earns: 0 unless it is a near miss; for a near
/// miss the product of two factors:
///
/// * `1 / k`, where `k` is the number of the agent's unmatched claims (near misses and false
///   positives) on that document: one imprecise claim keeps the whole credit, a document
///   sprayed with one type per family shares it;
/// * the hit rate of the claimed type, `(matches + near misses) / claims` over the agent's
///   claims of that type (duplicates left out): a type claimed on every document earns little
///   for the near misses it happens to land on, an agent that names one error imprecisely
///   keeps the credit.
///
/// So near-miss farming earns nothing that one careful guess would not.
pub fn partial_shares(findings: &[&Finding], classes: &[Class]) -> Vec<f64> {
    let doc = |f: &Finding| f.document_id.trim().to_ascii_uppercase();
    let ty = |f: &Finding| f.error_type.trim().to_ascii_lowercase();
    let mut unmatched: BTreeMap<String, usize> = BTreeMap::new();
    let mut claims: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (f, c) in findings.iter().zip(classes) {
        if matches!(c, Class::Partial(_) | Class::FalsePositive) {
            *unmatched.entry(doc(f)).or_default() += 1;
        }
        if !matches!(c, Class::Duplicate(_)) {
            let e = claims.entry(ty(f)).or_default();
            e.1 += 1;
            if matches!(c, Class::Match(_) | Class::Partial(_)) {
                e.0 += 1;
            }
        }
    }
    findings
        .iter()
        .zip(classes)
        .map(|(f, c)| match c {
            Class::Partial(_) => {
                let k = unmatched.get(&doc(f)).copied().unwrap_or(1).max(1);
                let (hits, n) = claims.get(&ty(f)).copied().unwrap_or((1, 1));
                (1.0 / k as f64) * (hits as f64 / n.max(1) as f64)
            }
            _ => 0.0,
        })
        .collect()
}

/// Per error type: ground truth, found, missed and false positives, with its severity weight.
fn confusion_matrix(
    gt: &[GtItem],
    matched: &[bool],
    fps: &[KeyRef],
) -> BTreeMap<String, ConfusionEntry> {
    let mut cm: BTreeMap<String, ConfusionEntry> = BTreeMap::new();
    for (g, hit) in gt.iter().zip(matched) {
        let e = cm
            .entry(g.error_type.as_str().into())
            .or_insert_with(|| ConfusionEntry::empty(g.error_type.weight()));
        e.ground_truth += 1;
        if *hit {
            e.correctly_found += 1;
        } else {
            e.missed += 1;
        }
    }
    for k in fps {
        let w = weight_of(&k.error_type);
        cm.entry(k.error_type.clone())
            .or_insert_with(|| ConfusionEntry::empty(w))
            .false_positives += 1;
    }
    cm
}

/// The ₹ value of the ground truth caught and missed.
fn risk_score(gt: &[GtItem], matched: &[bool]) -> RiskScore {
    let caught: i64 = gt
        .iter()
        .zip(matched)
        .filter(|(_, x)| **x)
        .map(|(g, _)| g.error_type.value_inr())
        .sum();
    let total: i64 = gt.iter().map(|g| g.error_type.value_inr()).sum();
    RiskScore {
        caught_value: caught,
        missed_value: total - caught,
        total_risk_value: total,
        risk_mitigation_pct: round_n(ratio(caught as f64, total as f64, 0.0) * 100.0, 1),
    }
}

pub fn grade(gt: &[GtItem], findings: &[Finding]) -> GradeResult {
    let index = Matcher::new(gt);
    let mut fps: Vec<KeyRef> = vec![];
    let mut dups: Vec<KeyRef> = vec![];
    let mut partials: Vec<PartialMatch> = vec![];
    let (classes, matched) = classify_all(gt, findings);
    let shares = partial_shares(&findings.iter().collect::<Vec<_>>(), &classes);
    // Report in the grader's resolution order (exact findings first), as before.
    let (exact, rest): (Vec<usize>, Vec<usize>) = (0..findings.len())
        .partition(|&i| matches!(classes[i], Class::Match(_) | Class::Duplicate(_)));
    for i in exact.into_iter().chain(rest) {
        let f = &findings[i];
        match classes[i] {
            Class::Match(_) => {}
            Class::Duplicate(_) => dups.push(key_ref(&f.document_id, &f.error_type)),
            Class::Partial(_) => partials.push(PartialMatch {
                document_id: f.document_id.trim().to_ascii_uppercase(),
                submitted_type: f.error_type.trim().to_ascii_lowercase(),
                expected_types: index.expected_types(&f.document_id),
                credit: round_n(PARTIAL_CREDIT * shares[i], 4),
            }),
            Class::FalsePositive => fps.push(key_ref(&f.document_id, &f.error_type)),
        }
    }
    let n_gt = gt.len();
    let tp = matched.iter().filter(|x| **x).count();
    let np = partials.len();
    let nfp = fps.len();
    // strict
    let fp_strict = nfp + np;
    let p = ratio(tp as f64, (tp + fp_strict) as f64, 0.0);
    let r = ratio(tp as f64, n_gt as f64, 1.0);
    let strict = f1(p, r);
    // partial credit: each near miss earns its share of PARTIAL_CREDIT, the rest is a false positive
    let credit: f64 = shares.iter().map(|s| PARTIAL_CREDIT * s).sum();
    let etp = tp as f64 + credit;
    let efp = nfp as f64 + np as f64 - credit;
    let pc = f1(
        ratio(etp, etp + efp, 0.0),
        ratio(etp, n_gt as f64, 1.0).min(1.0),
    );
    // weighted (partials excluded)
    let wtp: f64 = gt
        .iter()
        .zip(&matched)
        .filter(|(_, x)| **x)
        .map(|(g, _)| g.error_type.weight())
        .sum();
    let wtotal: f64 = gt.iter().map(|g| g.error_type.weight()).sum();
    let wfp: f64 = fps.iter().map(|k| weight_of(&k.error_type)).sum();
    let wf1 = f1(ratio(wtp, wtp + wfp, 0.0), ratio(wtp, wtotal, 1.0));
    let cm = confusion_matrix(gt, &matched, &fps);
    let risk = risk_score(gt, &matched);
    let mut matched_errors: Vec<KeyRef> = gt
        .iter()
        .zip(&matched)
        .filter(|(_, x)| **x)
        .map(|(g, _)| key_ref(&g.document_id, g.error_type.as_str()))
        .collect();
    matched_errors
        .sort_by(|a, b| (&a.document_id, &a.error_type).cmp(&(&b.document_id, &b.error_type)));
    let missed_errors: Vec<KeyRef> = gt
        .iter()
        .zip(&matched)
        .filter(|(_, x)| !**x)
        .map(|(g, _)| key_ref(&g.document_id, g.error_type.as_str()))
        .collect();
    let critical_missed = gt
        .iter()
        .zip(&matched)
        .any(|(g, hit)| !hit && g.error_type.is_critical());
    let mut missed_by_type: BTreeMap<String, usize> = BTreeMap::new();
    for k in &missed_errors {
        *missed_by_type.entry(k.error_type.clone()).or_default() += 1;
    }
    let score = clamp_score(pc);
    GradeResult {
        score,
        partial_credit_score: score,
        partial_credit_f1: score,
        strict_f1: clamp_score(strict),
        precision: clamp_score(p),
        recall: clamp_score(r),
        weighted_score: clamp_score(wf1),
        true_positives: tp,
        false_positives: nfp,
        false_negatives: n_gt - tp,
        weighted_false_negatives: round_n(wtotal - wtp, 2),
        duplicates: dups.len(),
        partial_matches: np,
        total_findings: findings.len(),
        total_errors: n_gt,
        matched_errors,
        missed_errors,
        false_positive_list: fps,
        duplicate_list: dups,
        partial_match_list: partials,
        confusion_matrix: cm,
        risk_score: risk,
        calibration: calibration(gt, findings),
        critical_missed,
        missed_by_type,
        feedback_detail: FeedbackDetail::Full,
    }
}

pub const ECE_BINS: usize = 10;
pub const ECE_MIN_TOTAL: usize = 10;
pub const ECE_MIN_BIN: usize = 3;

/// Expected calibration error over the findings that carry a confidence.
/// A finding is "correct" when it matches a ground-truth item (first match only).
pub fn calibration(gt: &[GtItem], findings: &[Finding]) -> Calibration {
    let (classes, _) = classify_all(gt, findings);
    let mut pts: Vec<(f64, f64)> = vec![];
    for (f, class) in findings.iter().zip(&classes) {
        let hit = matches!(class, Class::Match(_));
        if let Some(c) = f.confidence.filter(|c| c.is_finite()) {
            pts.push((c.clamp(0.0, 1.0), if hit { 1.0 } else { 0.0 }));
        }
    }
    let n = pts.len();
    let empty = |reason: &str, valid| Calibration {
        available: false,
        reason: Some(reason.into()),
        samples: n,
        valid_bins: valid,
        ece: None,
        brier: None,
        sharpness: None,
        bins: vec![],
    };
    if n < ECE_MIN_TOTAL {
        return empty("insufficient_total_samples", 0);
    }
    let mut bins: Vec<Vec<(f64, f64)>> = vec![vec![]; ECE_BINS];
    for (c, y) in &pts {
        let b = ((c * ECE_BINS as f64).floor() as usize).min(ECE_BINS - 1);
        bins[b].push((*c, *y));
    }
    let valid = bins.iter().filter(|b| b.len() >= ECE_MIN_BIN).count();
    if valid < 2 {
        return empty("insufficient_valid_bins", valid);
    }
    let (mut ece, mut sharp) = (0.0, 0.0);
    let mut out = vec![];
    for (i, b) in bins.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
        let w = b.len() as f64 / n as f64;
        let conf = b.iter().map(|x| x.0).sum::<f64>() / b.len() as f64;
        let acc = b.iter().map(|x| x.1).sum::<f64>() / b.len() as f64;
        ece += w * (acc - conf).abs();
        sharp += w * (conf - 0.5).abs();
        out.push(CalibrationBin {
            bin: i,
            count: b.len(),
            confidence_mean: round_n(conf, 4),
            accuracy_mean: round_n(acc, 4),
            gap: round_n((acc - conf).abs(), 4),
        });
    }
    let brier = pts.iter().map(|(c, y)| (c - y) * (c - y)).sum::<f64>() / n as f64;
    Calibration {
        available: true,
        reason: None,
        samples: n,
        valid_bins: valid,
        ece: Some(round_n(ece, 4)),
        brier: Some(round_n(brier, 4)),
        sharpness: Some(round_n(sharp, 4)),
        bins: out,
    }
}

/// Breakdown of one step's reward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RewardBreakdown {
    pub step_penalty: f64,
    pub true_positive_reward: f64,
    pub partial_reward: f64,
    pub false_positive_penalty: f64,
    pub duplicate_penalty: f64,
    pub final_bonus: f64,
    /// Unclamped sum (rounded to 4 places).
    pub raw: f64,
    /// The step reward returned as `reward`: the unclamped sum, so every false positive lowers
    /// it (the reference clamps to [0.01, 0.99], which hid the penalties of a strong step).
    pub reward: f64,
    /// The reference's clamped value, `clamp_score(raw)`, for clients that compare with it.
    pub clamped: f64,
    /// True when this reward says nothing about which findings are true: every step of a
    /// held-out episode and the non-final steps of a campaign episode pay the step penalty
    /// only, and every outcome component is 0 ([`blind_step_reward`]).
    #[serde(default)]
    pub outcome_hidden: bool,
}

/// The outcome-blind reward of step `step`: the step penalty alone, the same for any findings.
pub fn blind_step_reward(step: u32) -> RewardBreakdown {
    let p = round_n(-STEP_PENALTY - STEP_DECAY * step as f64, 4);
    RewardBreakdown {
        step_penalty: p,
        true_positive_reward: 0.0,
        partial_reward: 0.0,
        false_positive_penalty: 0.0,
        duplicate_penalty: 0.0,
        final_bonus: 0.0,
        raw: p,
        reward: p,
        clamped: clamp_score(p),
        outcome_hidden: true,
    }
}

/// Reward of one step: `previous` are findings accepted before this step, `new` this step's.
///
/// Each new finding is rewarded by its class in the grade of all findings so far
/// ([`classify_all`]), so the +0.04 partial reward goes to exactly the near misses the grader
/// credits: not to a wrong-family guess, and not to a guess on an error that is (or becomes, in
/// the same batch) found exactly.
pub fn step_reward(
    gt: &[GtItem],
    previous: &[Finding],
    new: &[Finding],
    step: u32,
    final_grade: Option<&GradeResult>,
) -> RewardBreakdown {
    let all: Vec<&Finding> = previous.iter().chain(new).collect();
    let (classes, _) = classify_refs(gt, &all);
    let shares = partial_shares(&all, &classes);
    let step_pen = -STEP_PENALTY - STEP_DECAY * step as f64;
    let mut r = step_pen;
    let (mut tpr, mut pr, mut fpp, mut dp) = (0.0, 0.0, 0.0, 0.0);
    for (class, share) in classes[previous.len()..]
        .iter()
        .zip(&shares[previous.len()..])
    {
        match *class {
            Class::Match(i) => {
                let v = TP_REWARD * gt[i].error_type.weight();
                r += v;
                tpr += v;
            }
            Class::Duplicate(_) => {
                r -= DUPLICATE_PENALTY;
                dp -= DUPLICATE_PENALTY;
            }
            Class::Partial(_) => {
                r += PARTIAL_REWARD * share;
                pr += PARTIAL_REWARD * share;
            }
            Class::FalsePositive => {
                r -= FP_PENALTY;
                fpp -= FP_PENALTY;
            }
        }
    }
    let mut fb = 0.0;
    if let Some(g) = final_grade {
        if g.recall >= 0.6 {
            fb += RECALL_BONUS;
        }
        if g.precision >= 0.9 {
            fb += PRECISION_BONUS;
        }
        if g.recall < 0.3 {
            fb -= LOW_RECALL_PENALTY;
        }
        r += fb;
    }
    RewardBreakdown {
        step_penalty: round_n(step_pen, 4),
        true_positive_reward: round_n(tpr, 4),
        partial_reward: round_n(pr, 4),
        false_positive_penalty: round_n(fpp, 4),
        duplicate_penalty: round_n(dp, 4),
        final_bonus: round_n(fb, 4),
        raw: round_n(r, 4),
        reward: round_n(r, 4),
        clamped: clamp_score(r),
        outcome_hidden: false,
    }
}

/// Inputs of the campaign score for one period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CampaignScoreInputs {
    /// Weighted F1 of each specialist's final submission (missing role = 0).
    pub specialist_weighted_f1: BTreeMap<String, f64>,
    pub overseer_quality: f64,
    pub instruction_compliance_rate: f64,
    pub memory_score: f64,
    pub schema_adaptation_score: f64,
    pub self_improvement_delta: f64,
    pub efficiency_score: f64,
    pub critical_missed: bool,
    /// Whether the overseer's review of the period was accepted; without one the overseer
    /// component is 0 and the score says so in `warnings`.
    pub overseer_reviewed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CampaignScore {
    pub score: f64,
    pub raw_score: f64,
    pub core_component: f64,
    pub bonus_component: f64,
    pub bonus_component_capped: f64,
    pub quality_multiplier: f64,
    pub avg_specialist_weighted_f1: f64,
    pub specialist_floor_triggered: bool,
    pub critical_missed: bool,
    pub components: BTreeMap<String, f64>,
    /// What the period lost and why (a missing overseer review, the floor, a critical miss).
    pub warnings: Vec<String>,
}

pub const W_SPECIALIST: f64 = 0.35;
pub const W_OVERSEER: f64 = 0.25;
pub const W_COMPLIANCE: f64 = 0.10;
pub const W_MEMORY: f64 = 0.10;
pub const W_ADAPTATION: f64 = 0.08;
pub const W_IMPROVEMENT: f64 = 0.07;
pub const W_EFFICIENCY: f64 = 0.05;
pub const SPECIALIST_FLOOR: f64 = 0.20;
pub const BONUS_CAP_FRACTION: f64 = 0.30;

pub fn campaign_score(i: &CampaignScoreInputs) -> CampaignScore {
    let n = |x: f64| {
        if x.is_finite() {
            x.clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let roles = i.specialist_weighted_f1.len().max(1) as f64;
    let s = i
        .specialist_weighted_f1
        .values()
        .map(|v| n(*v))
        .sum::<f64>()
        / roles;
    let core = W_SPECIALIST * s + W_OVERSEER * n(i.overseer_quality);
    let bonus = W_COMPLIANCE * n(i.instruction_compliance_rate)
        + W_MEMORY * n(i.memory_score)
        + W_ADAPTATION * n(i.schema_adaptation_score)
        + W_IMPROVEMENT * n(i.self_improvement_delta)
        + W_EFFICIENCY * n(i.efficiency_score);
    let raw = core + bonus;
    let capped = bonus.min(BONUS_CAP_FRACTION * raw);
    let floor = i.specialist_weighted_f1.is_empty()
        || i.specialist_weighted_f1
            .values()
            .any(|v| n(*v) < SPECIALIST_FLOOR);
    let mult = if floor {
        0.0
    } else if i.critical_missed {
        0.5
    } else {
        1.0
    };
    let components: BTreeMap<String, f64> = [
        ("specialist_f1", s),
        ("overseer_quality", n(i.overseer_quality)),
        ("instruction_compliance", n(i.instruction_compliance_rate)),
        ("memory", n(i.memory_score)),
        ("schema_policy_adaptation", n(i.schema_adaptation_score)),
        ("self_improvement", n(i.self_improvement_delta)),
        ("efficiency", n(i.efficiency_score)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), round_n(v, 4)))
    .collect();
    let mut warnings = vec![];
    if !i.overseer_reviewed {
        warnings.push(format!("no accepted overseer review this period: overseer quality counts 0 ({:.0}% of the score)", W_OVERSEER * 100.0));
    }
    if floor {
        warnings.push(format!(
            "a specialist weighted F1 is below {SPECIALIST_FLOOR}: the period scores 0.01"
        ));
    } else if i.critical_missed {
        warnings.push(
            "a critical error (severity >= 1.5) was missed: the period score is halved".into(),
        );
    }
    CampaignScore {
        score: clamp_score((core + capped) * mult),
        raw_score: round_n(raw, 4),
        core_component: round_n(core, 4),
        bonus_component: round_n(bonus, 4),
        bonus_component_capped: round_n(capped, 4),
        quality_multiplier: mult,
        avg_specialist_weighted_f1: round_n(s, 4),
        specialist_floor_triggered: floor,
        critical_missed: i.critical_missed,
        components,
        warnings,
    }
}

/// Keys flagged by two or more agents (cross-agent agreement).
pub fn agreements(
    by_agent: &BTreeMap<String, Vec<Finding>>,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (agent, fs) in by_agent {
        for f in fs {
            out.entry(f.key()).or_default().insert(agent.clone());
        }
    }
    out.retain(|_, v| v.len() >= 2);
    out
}

/// True findings for a ground truth (what a perfect auditor submits).
pub fn perfect_findings(gt: &[GtItem]) -> Vec<Finding> {
    gt.iter()
        .map(|g| {
            let mut f = Finding::new(&g.document_id, g.error_type.as_str());
            f.description = g.reason.clone();
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ErrorType::*;

    fn gt7() -> Vec<GtItem> {
        [
            ("EXP-010", OverLimit),
            ("EXP-011", WrongCategory),
            ("EXP-012", DuplicateClaim),
            ("EXP-013", WeekendExpense),
            ("EXP-014", MissingReceipt),
            ("EXP-015", UnapprovedVendor),
            ("EXP-016", CumulativeBreach),
        ]
        .iter()
        .map(|(d, t)| GtItem::new(*d, *t, "x"))
        .collect()
    }

    #[test]
    fn reference_partial_credit_example() {
        let gt = gt7();
        let mut f: Vec<Finding> = gt[..5]
            .iter()
            .map(|g| Finding::new(&g.document_id, g.error_type.as_str()))
            .collect();
        f.push(Finding::new("EXP-016", "over_limit")); // partial (cumulative_breach, same family)
        f.push(Finding::new("EXP-001", "over_limit"));
        f.push(Finding::new("EXP-002", "over_limit"));
        let g = grade(&gt, &f);
        // The reference scores 0.72. Here the near miss's type (over_limit) was also claimed on
        // two clean claims, so its hit rate is 2/4 and it earns half the partial credit.
        assert_eq!(g.score, 0.69);
        assert_eq!(g.precision, 0.62); // 0.625 rounds half to even
        assert_eq!(g.recall, 0.71);
        assert_eq!(
            (g.true_positives, g.partial_matches, g.false_positives),
            (5, 1, 2)
        );
        assert_eq!(g.partial_match_list[0].credit, 0.2);
        // With the two false positives of another type, the near miss keeps the whole credit
        // and the score is the reference's.
        f[6] = Finding::new("EXP-001", "wrong_category");
        f[7] = Finding::new("EXP-002", "wrong_category");
        let g = grade(&gt, &f);
        assert_eq!(g.score, 0.72);
        assert_eq!(g.partial_match_list[0].credit, PARTIAL_CREDIT);
    }

    #[test]
    fn near_miss_credit_is_shared_on_a_sprayed_document_and_by_a_sprayed_type() {
        let gt = gt7();
        // One imprecise claim on EXP-014 (missing_receipt): the whole credit.
        let one = grade(&gt, &[Finding::new("EXP-014", "duplicate_claim")]);
        assert_eq!(one.partial_match_list[0].credit, PARTIAL_CREDIT);
        // The same claim beside three other-family guesses on EXP-014: a quarter of it.
        let sprayed_doc = grade(
            &gt,
            &[
                Finding::new("EXP-014", "duplicate_claim"),
                Finding::new("EXP-014", "over_limit"),
                Finding::new("EXP-014", "wrong_category"),
                Finding::new("EXP-014", "weekend_expense"),
            ],
        );
        assert_eq!(sprayed_doc.partial_match_list[0].credit, 0.1);
        assert!(sprayed_doc.score < one.score);
        // duplicate_claim claimed on every claim: hit rate (1 match + 1 near miss) / 19.
        let ids: Vec<String> = (1..=19).map(|i| format!("EXP-{:03}", i)).collect();
        let every: Vec<Finding> = ids
            .iter()
            .map(|d| Finding::new(d, "duplicate_claim"))
            .collect();
        let g = grade(&gt, &every);
        assert_eq!((g.true_positives, g.partial_matches), (1, 1));
        assert_eq!(
            g.partial_match_list[0].credit,
            round_n(PARTIAL_CREDIT * 2.0 / 19.0, 4)
        );
    }

    #[test]
    fn partial_credit_once_per_unfound_error() {
        let gt = gt7();
        // Three wrong-type guesses on the same erroneous claim: one partial, two false positives.
        let f = vec![
            Finding::new("EXP-016", "over_limit"),
            Finding::new("EXP-016", "missing_receipt"),
            Finding::new("EXP-016", "duplicate_claim"),
        ];
        let g = grade(&gt, &f);
        assert_eq!((g.partial_matches, g.false_positives), (1, 2));
        // A wrong-type guess on an error that is also found exactly earns no partial credit.
        let exact = Finding::new(&gt[6].document_id, gt[6].error_type.as_str());
        let g = grade(
            &gt,
            &[Finding::new(&gt[6].document_id, "over_limit"), exact],
        );
        assert_eq!(
            (g.true_positives, g.partial_matches, g.false_positives),
            (1, 0, 1)
        );
    }

    #[test]
    fn same_family_wrong_type_is_a_near_miss() {
        let gt = gt7();
        // EXP-014 is missing_receipt: duplicate_claim is the same (receipt) family.
        let g = grade(&gt, &[Finding::new("EXP-014", "duplicate_claim")]);
        assert_eq!(
            (g.true_positives, g.partial_matches, g.false_positives),
            (0, 1, 0)
        );
        assert_eq!(
            g.partial_match_list[0].expected_types,
            vec!["missing_receipt".to_string()]
        );
        // Invoice: total_mismatch for a cascading_total, vendor_mismatch for an unmatched invoice.
        let inv = vec![
            GtItem::new("INV-002", CascadingTotal, "x"),
            GtItem::new("INV-012", UnmatchedInvoice, "x"),
        ];
        let g = grade(
            &inv,
            &[
                Finding::new("INV-002", "total_mismatch"),
                Finding::new("INV-012", "vendor_mismatch"),
            ],
        );
        assert_eq!((g.partial_matches, g.false_positives), (2, 0));
        assert_eq!(
            g.score,
            clamp_score({
                let etp: f64 = 0.8;
                let p = etp / (etp + 1.2);
                let r = etp / 2.0;
                2.0 * p * r / (p + r)
            })
        );
    }

    #[test]
    fn other_family_wrong_type_on_an_erroneous_document_is_a_false_positive() {
        let gt = gt7();
        // EXP-014 (missing_receipt) reported as weekend_expense or over_limit: wrong family.
        let g = grade(
            &gt,
            &[
                Finding::new("EXP-014", "weekend_expense"),
                Finding::new("EXP-014", "over_limit"),
            ],
        );
        assert_eq!(
            (g.true_positives, g.partial_matches, g.false_positives),
            (0, 0, 2)
        );
        assert_eq!(g.score, 0.01);
        // A price mismatch reported on an invoice that has no PO at all is a different problem.
        let inv = vec![GtItem::new("INV-012", UnmatchedInvoice, "x")];
        let g = grade(&inv, &[Finding::new("INV-012", "price_mismatch")]);
        assert_eq!((g.partial_matches, g.false_positives), (0, 1));
        // Unknown types never earn partial credit.
        let g = grade(&gt, &[Finding::new("EXP-014", "no_such_type")]);
        assert_eq!((g.partial_matches, g.false_positives), (0, 1));
        // The near miss is spent once: a second same-family guess is a false positive.
        let g = grade(
            &gt,
            &[
                Finding::new("EXP-014", "duplicate_claim"),
                Finding::new("EXP-014", "duplicate_claim"),
            ],
        );
        assert_eq!((g.partial_matches, g.false_positives), (1, 1));
    }

    #[test]
    fn step_reward_partial_uses_the_grader_classification() {
        let gt = gt7();
        let near = [Finding::new("EXP-014", "duplicate_claim")];
        let r = step_reward(&gt, &[], &near, 1, None);
        assert_eq!(
            (r.partial_reward, r.false_positive_penalty),
            (PARTIAL_REWARD, 0.0)
        );
        let far = [Finding::new("EXP-014", "weekend_expense")];
        let r = step_reward(&gt, &[], &far, 1, None);
        assert_eq!(
            (r.partial_reward, r.false_positive_penalty),
            (0.0, -FP_PENALTY)
        );
        // Near miss and exact in one batch: the grader counts the near miss as a false
        // positive (the error is found), and so does the reward, whatever the order.
        let both = [
            Finding::new("EXP-014", "duplicate_claim"),
            Finding::new("EXP-014", "missing_receipt"),
        ];
        let r = step_reward(&gt, &[], &both, 1, None);
        assert_eq!(
            (r.partial_reward, r.false_positive_penalty),
            (0.0, -FP_PENALTY)
        );
        assert_eq!(
            r.true_positive_reward,
            round_n(TP_REWARD * MissingReceipt.weight(), 4)
        );
        let g = grade(&gt, &both);
        assert_eq!(
            (g.true_positives, g.partial_matches, g.false_positives),
            (1, 0, 1)
        );
        // A near miss after the error was found in an earlier step earns nothing.
        let r = step_reward(&gt, &both[1..], &near, 2, None);
        assert_eq!(
            (r.partial_reward, r.false_positive_penalty),
            (0.0, -FP_PENALTY)
        );
        // Credit is spent once across steps.
        let r = step_reward(&gt, &near, &near, 2, None);
        assert_eq!(
            (r.partial_reward, r.false_positive_penalty),
            (0.0, -FP_PENALTY)
        );
    }

    #[test]
    fn perfect_empty_duplicate_and_case() {
        let gt = gt7();
        let perfect = grade(&gt, &perfect_findings(&gt));
        assert_eq!(perfect.score, 0.99);
        assert_eq!(perfect.risk_score.risk_mitigation_pct, 100.0);
        assert_eq!(perfect.risk_score.caught_value, 80_500);
        let empty = grade(&gt, &[]);
        assert_eq!(empty.score, 0.01);
        assert_eq!(empty.weighted_score, 0.01);
        let f = vec![
            Finding::new(" exp-010 ", "OVER_LIMIT"),
            Finding::new("EXP-010", "over_limit"),
        ];
        let g = grade(&gt, &f);
        assert_eq!(
            (g.true_positives, g.duplicates, g.false_positives),
            (1, 1, 0)
        );
    }

    #[test]
    fn aliases_match_once() {
        let gt = vec![
            GtItem::new("TXN-0001", WeekendPattern, "x").with_aliases(vec!["TXN-0002".into()])
        ];
        let g = grade(
            &gt,
            &[
                Finding::new("TXN-0002", "weekend_pattern"),
                Finding::new("TXN-0001", "weekend_pattern"),
            ],
        );
        assert_eq!((g.true_positives, g.duplicates), (1, 1));
        assert_eq!(g.score, 0.99);
    }

    #[test]
    fn step_reward_reference_values() {
        let gt = gt7();
        let one = [Finding::new("EXP-010", "over_limit")];
        assert_eq!(step_reward(&gt, &[], &one, 1, None).clamped, 0.1);
        let perf = perfect_findings(&gt);
        let g = grade(&gt, &perf);
        let best = step_reward(&gt, &[], &perf, 1, Some(&g));
        assert_eq!(best.clamped, 0.99);
        assert_eq!(best.reward, best.raw);
        let empty = grade(&gt, &[]);
        let r = step_reward(&gt, &[], &[], 1, Some(&empty));
        assert_eq!(r.clamped, 0.01);
        assert!(
            r.raw < 0.0 && r.reward == r.raw,
            "the reward is not clamped"
        );
        assert!(
            step_reward(&gt, &[], &one, 5, None).reward
                < step_reward(&gt, &[], &one, 1, None).reward
        );
    }

    #[test]
    fn every_false_positive_lowers_the_step_reward() {
        let gt = gt7();
        let perf = perfect_findings(&gt);
        let mut last = f64::INFINITY;
        for k in 0..=20 {
            let mut f = perf.clone();
            f.extend((0..k).map(|i| Finding::new(&format!("EXP-{:03}", 900 + i), "over_limit")));
            let g = grade(&gt, &f);
            let r = step_reward(&gt, &[], &f, 1, Some(&g));
            assert!(
                r.reward < last,
                "{k} made-up findings: {} not below {last}",
                r.reward
            );
            last = r.reward;
        }
    }

    #[test]
    fn redacted_grades_name_no_documents() {
        let gt = gt7();
        let g = grade(&gt, &[Finding::new("EXP-999", "over_limit")]);
        assert_eq!(g.missed_errors.len(), 7);
        let r = g.redacted();
        assert!(
            r.missed_errors.is_empty()
                && r.matched_errors.is_empty()
                && r.false_positive_list.is_empty()
                && r.partial_match_list.is_empty()
        );
        assert_eq!(r.missed_by_type.values().sum::<usize>(), 7);
        assert_eq!(
            (r.score, r.false_positives, r.false_negatives),
            (g.score, g.false_positives, g.false_negatives)
        );
        let text = serde_json::to_string(&r).unwrap();
        for item in &gt {
            assert!(
                !text.contains(&item.document_id),
                "{} leaked",
                item.document_id
            );
        }
    }

    #[test]
    fn ece_requires_samples_and_measures_gap() {
        let gt = gt7();
        let mut f: Vec<Finding> = vec![];
        for i in 0..12 {
            let mut x = Finding::new(&format!("EXP-{:03}", 100 + i), "over_limit");
            x.confidence = Some(if i < 6 { 0.95 } else { 0.15 });
            f.push(x);
        }
        let c = calibration(&gt, &f);
        assert!(c.available);
        assert!(
            c.ece.unwrap() > 0.5,
            "all wrong with high confidence is badly calibrated"
        );
        assert!(!calibration(&gt, &f[..3]).available);
    }

    #[test]
    fn campaign_guards() {
        let mut spec = BTreeMap::new();
        for r in ["expense", "invoice", "gst", "fraud"] {
            spec.insert(r.to_string(), 0.8);
        }
        let mut i = CampaignScoreInputs {
            specialist_weighted_f1: spec.clone(),
            overseer_quality: 0.8,
            instruction_compliance_rate: 1.0,
            memory_score: 1.0,
            schema_adaptation_score: 1.0,
            self_improvement_delta: 1.0,
            efficiency_score: 1.0,
            critical_missed: false,
            overseer_reviewed: true,
        };
        let full = campaign_score(&i);
        assert!(
            full.bonus_component_capped < full.bonus_component,
            "bonus cap binds"
        );
        assert!(full.bonus_component_capped <= 0.30 * full.raw_score + 1e-9);
        i.critical_missed = true;
        let half = campaign_score(&i);
        assert!(
            (half.score - clamp_score((full.core_component + full.bonus_component_capped) * 0.5))
                .abs()
                < 0.011
        );
        i.critical_missed = false;
        i.specialist_weighted_f1.insert("fraud".into(), 0.1);
        assert_eq!(campaign_score(&i).score, 0.01);
    }
}
