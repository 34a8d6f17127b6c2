//! Value of information from the current belief and a decision utility table, and the tool
//! ranking built from it.
//!
//! VoI(channel) = Σ_o P(o) · max_d E[U(d,h) | o] − max_d E[U(d,h)], with P(o) normalised over the
//! channel's outcomes. A channel that already produced its evidence has no value left (the SPRT
//! ignores repeats), and stopping compares gross VoI with the cheapest real action, not with the
//! free submit action.

use crate::sprt::{table, Sprt};
use ls_core::text::round4;
use ls_core::{ActionName, Decision, Hypothesis};
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::BTreeMap;

const N: usize = Hypothesis::COUNT;

/// U(decision, hypothesis); rows in [`Decision::ALL`] order, columns in hypothesis order.
pub const UTILITY: [[f64; N]; 4] = [
    [
        1.0, -1.0, -0.7, -1.0, -1.0, -1.0, -1.0, -0.9, -1.0, -1.0, -0.8, -0.6,
    ],
    [
        0.25, 0.5, 0.9, 0.45, 0.45, 0.4, 0.4, 0.55, 0.35, 0.35, 0.85, 0.8,
    ],
    [
        0.35, 0.65, 0.8, 0.65, 0.6, 0.55, 0.65, 0.6, 0.7, 0.72, 0.78, 0.84,
    ],
    [
        -0.6, 1.0, 0.6, 1.0, 1.0, 1.0, 1.0, 0.95, 1.0, 1.0, 0.55, 0.45,
    ],
];

/// Best expected utility and its decision under a belief (first decision wins ties).
pub fn best_decision(post: &[f64; N]) -> (Decision, f64) {
    let mut best = (Decision::Pay, f64::NEG_INFINITY);
    for (d, row) in Decision::ALL.iter().zip(UTILITY.iter()) {
        let eu: f64 = row.iter().zip(post).map(|(u, p)| u * p).sum();
        if eu > best.1 + 1e-12 {
            best = (*d, eu);
        }
    }
    best
}

/// Gross value of one more observation on the action's channel (0 for table-less actions).
pub fn gross_voi(action: ActionName, sprt: &Sprt) -> f64 {
    let Some(channel) = action.channel() else {
        return 0.0;
    };
    if sprt.observed_channels.contains(&channel) {
        return 0.0;
    }
    let post = sprt.posterior();
    let (_, u0) = best_decision(&post);
    let rows = table(channel);
    let probs: Vec<f64> = rows
        .iter()
        .map(|r| r.likelihood.iter().zip(&post).map(|(l, p)| l * p).sum())
        .collect();
    let z: f64 = probs.iter().sum();
    if z <= 0.0 {
        return 0.0;
    }
    let expected: f64 = rows
        .iter()
        .zip(&probs)
        .map(|(r, p)| (p / z) * best_decision(&sprt.posterior_after(r)).1)
        .sum();
    (expected - u0).max(0.0)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankingEntry {
    pub channel: Option<&'static str>,
    pub voi: f64,
    pub cost: f64,
    pub voi_cost_ratio: f64,
    pub affordable: bool,
}

/// `tool_rankings` payload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRankings {
    pub recommended_tool: &'static str,
    pub voi: f64,
    pub voi_cost_ratio: f64,
    pub should_stop: bool,
    pub rankings: BTreeMap<&'static str, RankingEntry>,
}

/// Posterior mass at which a belief counts as concentrated for the stopping rule.
pub const CONFIDENT_POSTERIOR: f64 = 0.86;

/// Cheapest non-submit action cost (the stopping rule's reference price).
pub fn min_action_cost() -> f64 {
    ActionName::ALL
        .iter()
        .filter(|a| **a != ActionName::SubmitDecision)
        .map(|a| ls_core::text::decimal_to_f64(a.base_cost()))
        .fold(f64::INFINITY, f64::min)
}

/// Rank the 20 non-submit actions by net VoI per unit cost.
pub fn rank_tools(sprt: &Sprt, budget_remaining: Decimal) -> ToolRankings {
    let budget = ls_core::text::decimal_to_f64(budget_remaining);
    let mut rankings = BTreeMap::new();
    let mut best: Option<(&'static str, f64, f64)> = None;
    let mut best_gross = 0.0f64;
    for a in ActionName::ALL
        .into_iter()
        .filter(|a| *a != ActionName::SubmitDecision)
    {
        let cost = ls_core::text::decimal_to_f64(a.base_cost());
        let entry = if cost > budget + 1e-9 {
            RankingEntry {
                channel: a.channel().map(|c| c.as_str()),
                voi: round4(-cost),
                cost,
                voi_cost_ratio: 0.0,
                affordable: false,
            }
        } else {
            let gross = gross_voi(a, sprt);
            best_gross = best_gross.max(gross);
            let voi = gross - cost;
            let ratio = if cost > 0.0 { voi / cost } else { 0.0 };
            if best.is_none_or(|(_, _, r)| ratio > r + 1e-12) {
                best = Some((a.as_str(), voi, ratio));
            }
            RankingEntry {
                channel: a.channel().map(|c| c.as_str()),
                voi: round4(voi),
                cost,
                voi_cost_ratio: round4(ratio),
                affordable: true,
            }
        };
        rankings.insert(a.as_str(), entry);
    }
    let min_cost = min_action_cost();
    // Myopic VoI understates a sequence of observations, so low VoI alone stops only once the
    // belief is already concentrated.
    let confident = sprt.posterior().iter().cloned().fold(0.0, f64::max) >= CONFIDENT_POSTERIOR;
    let should_stop =
        sprt.accepted().is_some() || budget <= min_cost || (confident && best_gross < min_cost);
    let (tool, voi, ratio) = best.unwrap_or(("submit_decision", 0.0, 0.0));
    ToolRankings {
        recommended_tool: tool,
        voi: round4(voi),
        voi_cost_ratio: round4(ratio),
        should_stop,
        rankings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ls_core::Channel;

    #[test]
    fn voi_is_non_negative_and_zero_after_observation() {
        let mut s = Sprt::default();
        for a in ActionName::ALL {
            assert!(gross_voi(a, &s) >= 0.0);
        }
        let before = gross_voi(ActionName::RequestCallbackVerification, &s);
        assert!(
            before > 0.05,
            "callback is informative at the uniform prior: {before}"
        );
        s.observe(
            Channel::CallbackVerificationResult,
            "callback_clean",
            "cb",
            "request_callback_verification",
        );
        assert_eq!(gross_voi(ActionName::RequestCallbackVerification, &s), 0.0);
    }

    #[test]
    fn rankings_prefer_informative_tools() {
        let s = Sprt::default();
        let r = rank_tools(&s, Decimal::from(16));
        assert_eq!(r.rankings.len(), 20);
        let cb = &r.rankings["request_callback_verification"];
        let zoom = &r.rankings["zoom"];
        assert!(
            cb.voi + cb.cost > zoom.voi + zoom.cost,
            "callback carries information, zoom none"
        );
        assert!(
            r.rankings["compare_bank_account"].voi
                > r.rankings["request_callback_verification"].voi
        );
        assert!(
            !r.should_stop,
            "at the uniform prior more evidence is worth its price"
        );
    }

    #[test]
    fn unaffordable_tools_are_marked() {
        let r = rank_tools(&Sprt::default(), Decimal::new(10, 2));
        assert!(r.rankings.values().all(|e| !e.affordable));
        assert!(r.should_stop);
    }
}
