//! Information design: which tool discriminates best between the hypotheses *under the current
//! belief*. For every SPRT channel not yet observed, with prior `p(h)` and likelihoods `L(o|h)`:
//!
//! * `mutual_information_bits` = Σ_o P(o) · KL(p(·|o) ‖ p) — the expected KL divergence between
//!   the outcome-conditioned posterior and the current belief (expected information gain);
//! * `js_divergence_risky_vs_safe` = Jensen–Shannon divergence (bits) between the outcome
//!   distribution under `safe` and under the belief-weighted mixture of the risky hypotheses.
//!
//! Exposed beside the VoI rankings in instrumented mode (`tool_rankings.information_design`).

use crate::sprt::{table, Sprt};
use ls_core::text::round4;
use ls_core::{ActionName, Channel, Hypothesis};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDiscrimination {
    pub action: &'static str,
    pub mutual_information_bits: f64,
    pub js_divergence_risky_vs_safe: f64,
    pub already_observed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InformationDesign {
    pub belief_entropy_bits: f64,
    pub priority_tools: Vec<&'static str>,
    pub tools: BTreeMap<&'static str, ToolDiscrimination>,
}

fn kl_bits(p: &[f64], q: &[f64]) -> f64 {
    p.iter()
        .zip(q)
        .filter(|(a, b)| **a > 0.0 && **b > 0.0)
        .map(|(a, b)| a * (a / b).log2())
        .sum()
}

/// Jensen–Shannon divergence in bits (0 ≤ JS ≤ 1).
pub fn js_bits(p: &[f64], q: &[f64]) -> f64 {
    let m: Vec<f64> = p.iter().zip(q).map(|(a, b)| 0.5 * (a + b)).collect();
    (0.5 * kl_bits(p, &m) + 0.5 * kl_bits(q, &m)).max(0.0)
}

fn channel_action(c: Channel) -> &'static str {
    ActionName::ALL
        .iter()
        .find(|a| a.channel() == Some(c))
        .map_or(c.as_str(), |a| a.as_str())
}

/// Discriminative power of every tool under the current belief, best first.
pub fn rank(sprt: &Sprt) -> InformationDesign {
    let post = sprt.posterior();
    let entropy: f64 = -post
        .iter()
        .filter(|p| **p > 0.0)
        .map(|p| p * p.log2())
        .sum::<f64>();
    let mut channels: Vec<Channel> = ActionName::ALL.iter().filter_map(|a| a.channel()).collect();
    channels.sort();
    channels.dedup();
    let safe = Hypothesis::Safe.index();
    let mut tools = BTreeMap::new();
    let mut order: Vec<(&'static str, f64, f64)> = Vec::new();
    for c in channels {
        let rows = table(c);
        let observed = sprt.observed_channels.contains(&c);
        let p_o: Vec<f64> = rows
            .iter()
            .map(|r| r.likelihood.iter().zip(&post).map(|(l, p)| l * p).sum())
            .collect();
        let z: f64 = p_o.iter().sum();
        let mut mi = 0.0;
        if z > 0.0 && !observed {
            for (r, po) in rows.iter().zip(&p_o) {
                if *po <= 0.0 {
                    continue;
                }
                let cond: Vec<f64> = r
                    .likelihood
                    .iter()
                    .zip(&post)
                    .map(|(l, p)| l * p / po)
                    .collect();
                mi += (po / z) * kl_bits(&cond, &post);
            }
        }
        let risky_mass: f64 = 1.0 - post[safe];
        let norm = |v: Vec<f64>| {
            let s: f64 = v.iter().sum();
            if s > 0.0 {
                v.iter().map(|x| x / s).collect()
            } else {
                v
            }
        };
        let under_safe = norm(rows.iter().map(|r| r.likelihood[safe]).collect());
        let under_risky = norm(
            rows.iter()
                .map(|r| {
                    r.likelihood
                        .iter()
                        .enumerate()
                        .filter(|(h, _)| *h != safe)
                        .map(|(h, l)| l * post[h] / risky_mass.max(1e-12))
                        .sum()
                })
                .collect(),
        );
        let js = if observed {
            0.0
        } else {
            js_bits(&under_safe, &under_risky)
        };
        let action = channel_action(c);
        order.push((action, mi, js));
        tools.insert(
            action,
            ToolDiscrimination {
                action,
                mutual_information_bits: round4(mi),
                js_divergence_risky_vs_safe: round4(js),
                already_observed: observed,
            },
        );
    }
    order.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.2.total_cmp(&a.2))
            .then(a.0.cmp(b.0))
    });
    InformationDesign {
        belief_entropy_bits: round4(entropy),
        priority_tools: order.iter().take(4).map(|o| o.0).collect(),
        tools,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn information_is_non_negative_and_vanishes_after_observation() {
        let mut s = Sprt::default();
        let d = rank(&s);
        assert!(d.tools.values().all(|t| t.mutual_information_bits >= 0.0
            && (0.0..=1.0).contains(&t.js_divergence_risky_vs_safe)));
        assert_eq!(d.priority_tools.len(), 4);
        let top = d.priority_tools[0];
        assert!(d.tools[top].mutual_information_bits > 0.05);
        s.observe(
            Channel::CompareBankAccount,
            "mismatch",
            "k",
            "compare_bank_account",
        );
        let after = rank(&s);
        assert_eq!(
            after.tools["compare_bank_account"].mutual_information_bits,
            0.0
        );
        assert!(after.belief_entropy_bits < d.belief_entropy_bits);
    }
}
