//! Proper scoring of the reported distribution over the 12 latent hypotheses.
//!
//! composite = 0.40·Brier + 0.30·Log + 0.30·PenalizedBrier where
//! * Brier = 1 − ½·Σ(p_i − y_i)² ∈ [0, 1] (no clamp needed: the squared error is at most 2);
//! * Log = clamp(1 − ln(max(p_t, ε)) / ln(ε), 0, 1) with ε = 1e-9 (affine in ln p_t);
//! * PenalizedBrier: the reference subtracted 0.3·max(0, max_{i≠t} p_i − p_t), which rewards
//!   hedging and breaks propriety; here the slot keeps its 0.30 weight on the Brier term and the
//!   gap is reported only as the diagnostic `overconfidence_gap`.
//!
//! A positive combination of strictly proper scores is strictly proper (tested by proptest).

use ls_core::{Decision, Hypothesis};
use serde::Serialize;
use std::collections::BTreeMap;

pub const EPSILON: f64 = 1e-9;
pub const W_BRIER: f64 = 0.40;
pub const W_LOG: f64 = 0.30;
pub const W_PENALIZED: f64 = 0.30;

pub type Dist = [f64; Hypothesis::COUNT];

/// How the distribution was obtained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedProbabilities {
    pub distribution: BTreeMap<String, f64>,
    /// `submitted`, `default_from_decision` or `default_after_rejected_input`.
    pub source: String,
    /// Keys that are not one of the 12 hypotheses (reported, not silently dropped).
    pub unknown_keys: Vec<String>,
    pub diagnostics: Vec<String>,
    #[serde(skip)]
    pub vector: Dist,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProperScore {
    pub true_class: String,
    pub brier_score: f64,
    pub log_score: f64,
    pub penalized_brier_score: f64,
    pub composite: f64,
    /// max_{i≠t} p_i − p_t, floored at 0 (diagnostic only).
    pub overconfidence_gap: f64,
}

pub fn uniform() -> Dist {
    [1.0 / Hypothesis::COUNT as f64; Hypothesis::COUNT]
}

/// Normalise to sum 1 with every entry at least ε (then renormalised so the sum stays exactly 1).
pub fn normalize(v: &Dist) -> Option<Dist> {
    let clean: Vec<f64> = v
        .iter()
        .map(|x| if x.is_finite() { x.max(0.0) } else { 0.0 })
        .collect();
    let sum: f64 = clean.iter().sum();
    if sum.is_nan() || sum <= 0.0 || !sum.is_finite() {
        return None;
    }
    let mut out = [0.0; Hypothesis::COUNT];
    for (o, c) in out.iter_mut().zip(&clean) {
        *o = (c / sum).max(EPSILON);
    }
    let s2: f64 = out.iter().sum();
    for o in &mut out {
        *o /= s2;
    }
    Some(out)
}

/// Default distribution from decision + confidence. PAY puts `c` on safe; any other decision puts
/// `1 − c` on safe and splits `c` over the risky hypotheses: 70 % on the hypothesis the agent's own
/// codes name (when they name one), the rest by the SPRT posterior.
pub fn default_distribution(
    decision: Option<Decision>,
    confidence: Option<f64>,
    hint: &Dist,
    named: Option<Hypothesis>,
) -> Dist {
    let c = confidence
        .filter(|c| c.is_finite())
        .unwrap_or(0.5)
        .clamp(0.0, 1.0);
    let hint = normalize(hint).unwrap_or_else(uniform);
    let risky_sum: f64 = hint[1..].iter().sum();
    let w = |i: usize| {
        if risky_sum > 0.0 {
            hint[i] / risky_sum
        } else {
            1.0 / 11.0
        }
    };
    let named = named.filter(|h| *h != Hypothesis::Safe);
    let mut out = [0.0; Hypothesis::COUNT];
    let (safe, risky_mass) = if decision == Some(Decision::Pay) {
        (c, 1.0 - c)
    } else {
        (1.0 - c, c)
    };
    out[0] = safe;
    for (i, o) in out.iter_mut().enumerate().skip(1) {
        *o = match named {
            Some(h) => risky_mass * (0.3 * w(i) + if i == h.index() { 0.7 } else { 0.0 }),
            None => risky_mass * w(i),
        };
    }
    normalize(&out).unwrap_or_else(uniform)
}

/// Resolve the distribution to score: the submitted map when usable, else the default.
pub fn resolve(
    submitted: Option<&BTreeMap<String, f64>>,
    decision: Option<Decision>,
    confidence: Option<f64>,
    hint: &Dist,
    named: Option<Hypothesis>,
) -> ResolvedProbabilities {
    let mut diagnostics = Vec::new();
    let mut unknown_keys = Vec::new();
    let mut source = "default_from_decision";
    let mut vector = None;
    if let Some(map) = submitted.filter(|m| !m.is_empty()) {
        let mut v = [0.0; Hypothesis::COUNT];
        for (k, p) in map {
            match Hypothesis::parse(k) {
                Some(h) => {
                    if !p.is_finite() || *p < 0.0 {
                        diagnostics.push(format!("probability_invalid:{k}"));
                    } else {
                        v[h.index()] += p;
                    }
                }
                None => unknown_keys.push(k.clone()),
            }
        }
        let sum: f64 = v.iter().sum();
        if sum > 0.0 && (sum - 1.0).abs() > 1e-6 {
            diagnostics.push(format!(
                "probabilities_renormalized_from_sum:{}",
                crate::round4(sum)
            ));
        }
        if !unknown_keys.is_empty() {
            diagnostics.push(format!("unknown_hypothesis_keys:{}", unknown_keys.len()));
        }
        match normalize(&v) {
            Some(n) => {
                vector = Some(n);
                source = "submitted";
            }
            None => {
                diagnostics.push("probabilities_rejected_no_mass_on_known_hypotheses".to_owned());
                source = "default_after_rejected_input";
            }
        }
    }
    let vector = vector.unwrap_or_else(|| default_distribution(decision, confidence, hint, named));
    let distribution = Hypothesis::ALL
        .iter()
        .map(|h| (h.as_str().to_owned(), crate::round4(vector[h.index()])))
        .collect();
    ResolvedProbabilities {
        distribution,
        source: source.to_owned(),
        unknown_keys,
        diagnostics,
        vector,
    }
}

pub fn brier(p: &Dist, t: usize) -> f64 {
    let sq: f64 = p
        .iter()
        .enumerate()
        .map(|(i, pi)| (pi - if i == t { 1.0 } else { 0.0 }).powi(2))
        .sum();
    1.0 - 0.5 * sq
}

pub fn log_score(p: &Dist, t: usize) -> f64 {
    (1.0 - p[t].max(EPSILON).ln() / EPSILON.ln()).clamp(0.0, 1.0)
}

/// Composite proper score of `p` against true class `t` (unrounded).
pub fn composite(p: &Dist, t: usize) -> f64 {
    let b = brier(p, t);
    W_BRIER * b + W_LOG * log_score(p, t) + W_PENALIZED * b
}

pub fn score(p: &Dist, truth: Hypothesis) -> ProperScore {
    let t = truth.index();
    let b = brier(p, t);
    let l = log_score(p, t);
    let gap = p
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != t)
        .map(|(_, v)| *v)
        .fold(0.0, f64::max)
        - p[t];
    ProperScore {
        true_class: truth.as_str().to_owned(),
        brier_score: crate::round4(b),
        log_score: crate::round4(l),
        penalized_brier_score: crate::round4(b),
        composite: crate::round4(composite(p, t)),
        overconfidence_gap: crate::round4(gap.max(0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn two(a: Hypothesis, pa: f64, b: Hypothesis, pb: f64) -> Dist {
        let mut v = [0.0; 12];
        v[a.index()] = pa;
        v[b.index()] = pb;
        normalize(&v).unwrap()
    }

    #[test]
    fn documented_examples_and_monotonicity() {
        let p = two(Hypothesis::BankFraud, 0.85, Hypothesis::Safe, 0.15);
        let right = score(&p, Hypothesis::BankFraud).composite;
        let wrong = score(&p, Hypothesis::Safe).composite;
        assert!(right > 0.95, "{right}");
        assert!(wrong < 0.5, "{wrong}");
        // Monotone in the probability on the truth (the reference was not).
        let mut last = 0.0;
        for k in 0..=10 {
            let pt = f64::from(k) / 10.0;
            let s = composite(
                &two(
                    Hypothesis::BankFraud,
                    pt.max(1e-12),
                    Hypothesis::Safe,
                    (1.0 - pt).max(1e-12),
                ),
                1,
            );
            assert!(s >= last - 1e-12);
            last = s;
        }
    }

    #[test]
    fn unknown_keys_reported_and_zero_mass_rejected() {
        let m = BTreeMap::from([("bank_fraud".to_owned(), 0.6), ("alien".to_owned(), 0.4)]);
        let r = resolve(
            Some(&m),
            Some(Decision::EscalateFraud),
            Some(0.9),
            &uniform(),
            None,
        );
        assert_eq!(r.unknown_keys, vec!["alien".to_owned()]);
        assert_eq!(r.source, "submitted");
        assert!((r.vector[1] - 1.0).abs() < 1e-6);
        let z = BTreeMap::from([("nope".to_owned(), 1.0)]);
        let r = resolve(Some(&z), Some(Decision::Pay), Some(0.9), &uniform(), None);
        assert_eq!(r.source, "default_after_rejected_input");
        assert!((r.vector[0] - 0.9).abs() < 1e-6);
    }

    #[test]
    fn default_names_the_agents_hypothesis() {
        let d = default_distribution(
            Some(Decision::EscalateFraud),
            Some(0.9),
            &uniform(),
            Some(Hypothesis::CeoBec),
        );
        assert!(d[Hypothesis::CeoBec.index()] > 0.6);
        assert!(composite(&d, Hypothesis::CeoBec.index()) > 0.75);
        // The agent's own codes name the hypothesis by the hidden world's rule chain.
        use ls_core::enums::ReasonCode::*;
        use ls_core::world::hypothesis_from_codes;
        assert_eq!(
            hypothesis_from_codes(&[SenderDomainSpoof, BankOverrideAttempt], None),
            Hypothesis::CeoBec
        );
        assert_eq!(
            hypothesis_from_codes(&[PriceMismatch], Some(Decision::Hold)),
            Hypothesis::DuplicateBilling
        );
    }

    fn arb_dist() -> impl Strategy<Value = Dist> {
        proptest::array::uniform12(0.01f64..1.0).prop_map(|v| normalize(&v).unwrap())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Strict propriety: the expected score under belief q is maximised by reporting q.
        #[test]
        fn truthful_report_maximises_expected_score(q in arb_dist(), noise in proptest::array::uniform12(-0.5f64..0.5), mix in 0.05f64..1.0) {
            let expected = |r: &Dist| (0..12).map(|t| q[t] * composite(r, t)).sum::<f64>();
            let perturbed: Dist = {
                let mut v = [0.0; 12];
                for i in 0..12 { v[i] = (q[i] * (1.0 + mix * noise[i] * 2.0)).max(0.0); }
                normalize(&v).unwrap_or_else(uniform)
            };
            let truthful = expected(&q);
            prop_assert!(truthful + 1e-12 >= expected(&perturbed), "truthful {} < perturbed {}", truthful, expected(&perturbed));
            // Over-confident report (all mass on the mode) never beats the truth either.
            let mode = (0..12).max_by(|a, b| q[*a].total_cmp(&q[*b])).unwrap();
            let mut sharp = [0.0; 12];
            sharp[mode] = 1.0;
            let sharp = normalize(&sharp).unwrap();
            prop_assert!(truthful + 1e-12 >= expected(&sharp));
        }
    }
}
