//! The agent ladder: one summary row per ladder agent over every track it was played on.

use super::certificate::CertificateRun;
use super::contrastive::ContrastiveRun;
use super::holdout::HoldoutRun;
use super::pairs::PairsRun;
use super::quarter::{QuarterProfile, QuarterRun};
use super::Ctx;
use crate::headline::Headline;
use crate::metrics::SectionSummary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An agent's figures on the public suite, as the ladder and the leaderboard show them (both
/// flatten it: the fields are top-level keys of their rows).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PublicFigures {
    pub public_mean: f64,
    pub public_control_satisfied_resolution: f64,
    pub public_institutional_utility: f64,
    pub public_unsafe_release_rate: f64,
    pub public_trial_pass_rate: f64,
    pub public_pass_k_consistent: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSummary {
    pub agent: String,
    pub model: String,
    pub agent_type: String,
    /// The headline (paired discrimination over twin pairs) with its inputs.
    #[serde(default)]
    pub headline: Option<Headline>,
    #[serde(flatten)]
    pub public: PublicFigures,
    pub holdout_mean: Option<f64>,
    pub holdout_unsafe_release_rate: Option<f64>,
    pub holdout_control_satisfied_resolution: Option<f64>,
    pub holdout_institutional_utility: Option<f64>,
    pub holdout_trial_pass_rate: Option<f64>,
    pub holdout_pass_k_consistent: Option<f64>,
    pub contrastive_joint_mean: Option<f64>,
    pub quarter: Option<QuarterProfile>,
    pub certificate_required_mean: Option<f64>,
    pub certificate_required_missing_rate: Option<f64>,
    pub public_task_e_mean: Option<f64>,
    pub holdout_task_e_mean: Option<f64>,
}

/// The earlier stages the ladder reads.
pub struct Stages<'a> {
    pub public: &'a BTreeMap<String, SectionSummary>,
    pub holdout: &'a HoldoutRun,
    pub contrastive: &'a ContrastiveRun,
    pub quarter: &'a QuarterRun,
    pub certificate: &'a CertificateRun,
    pub pairs: &'a PairsRun,
}

pub fn run(ctx: &Ctx<'_>, st: &Stages<'_>) -> Vec<AgentSummary> {
    let (public, holdout, contrastive, quarter, certificate) = (
        st.public,
        st.holdout,
        st.contrastive,
        st.quarter,
        st.certificate,
    );
    let task_e = |s: &SectionSummary| s.task_breakdown.get("task_e").map(|m| m.score_stats.mean);
    ctx.agents
        .iter()
        .map(|a| {
            let (model, kind) = ctx.model_of(a);
            let p = public.get(a).cloned().unwrap_or_default();
            let h = holdout.sections.get(a);
            let hm = h.map(|h| &h.summary.metrics);
            let cert = certificate.by_agent.get(a);
            AgentSummary {
                agent: a.clone(),
                model,
                agent_type: kind,
                headline: st.pairs.by_agent.get(a).cloned(),
                public: PublicFigures {
                    public_mean: p.average_score,
                    public_control_satisfied_resolution: p
                        .metrics
                        .control_satisfied_resolution_rate,
                    public_institutional_utility: p.metrics.institutional_utility_stats.mean,
                    public_unsafe_release_rate: p.metrics.unsafe_release_rate,
                    public_trial_pass_rate: p.metrics.trial_pass_rate,
                    public_pass_k_consistent: p.metrics.consistent_pass_rate,
                },
                holdout_mean: h.map(|h| h.average_score),
                holdout_unsafe_release_rate: hm.map(|m| m.unsafe_release_rate),
                holdout_control_satisfied_resolution: hm
                    .map(|m| m.control_satisfied_resolution_rate),
                holdout_institutional_utility: hm.map(|m| m.institutional_utility_stats.mean),
                holdout_trial_pass_rate: hm.map(|m| m.trial_pass_rate),
                holdout_pass_k_consistent: hm.map(|m| m.consistent_pass_rate),
                contrastive_joint_mean: contrastive
                    .sections
                    .get(a)
                    .map(|c| c.joint_score_stats.mean),
                quarter: quarter.profiles.get(a).cloned(),
                certificate_required_mean: cert.map(|c| c.summary.average_score),
                certificate_required_missing_rate: cert
                    .map(|c| c.certificate_required_missing_rate),
                public_task_e_mean: task_e(&p),
                holdout_task_e_mean: h.and_then(|h| task_e(&h.summary)),
            }
        })
        .collect()
}
