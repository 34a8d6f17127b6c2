//! The report's tables as rows of cells, shared by the Markdown ([`crate::render`]) and HTML
//! ([`crate::html`]) renderings: agent ladder, per-case rows, ablations, falsification tests,
//! gaming resistance; and the number formats both use.

use crate::report::{BenchmarkReport, ExperimentSuite};

pub(crate) fn f4(x: f64) -> String {
    format!("{x:.4}")
}

pub(crate) fn o4(x: Option<f64>) -> String {
    x.map(f4).unwrap_or_else(|| "n/a".into())
}

/// The agent ladder: agent, headline, public mean, unsafe release rate, control-satisfied resolution,
/// holdout mean, contrastive joint, quarter accuracy, quarter rating, certificate-required mean.
pub(crate) fn ladder_rows(r: &BenchmarkReport) -> Vec<Vec<String>> {
    r.agents
        .iter()
        .map(|a| {
            vec![
                a.agent.clone(),
                o4(a.headline.as_ref().map(|h| h.headline)),
                f4(a.public.public_mean),
                f4(a.public.public_unsafe_release_rate),
                f4(a.public.public_control_satisfied_resolution),
                o4(a.holdout_mean),
                o4(a.contrastive_joint_mean),
                o4(a.quarter.as_ref().map(|q| q.accuracy)),
                a.quarter
                    .as_ref()
                    .map(|q| q.deployability_rating.clone())
                    .unwrap_or_else(|| "n/a".into()),
                o4(a.certificate_required_mean),
            ]
        })
        .collect()
}

/// The public benchmark's cases: case, score, result class, decision, steps.
pub(crate) fn case_rows(r: &BenchmarkReport) -> Vec<Vec<String>> {
    r.public_benchmark
        .results
        .iter()
        .map(|c| {
            vec![
                c.case_id.clone(),
                f4(c.score),
                c.result_class.clone(),
                c.final_decision.clone(),
                c.steps.to_string(),
            ]
        })
        .collect()
}

/// The ablations: name, component, with, without, delta (n/a when not run), note.
pub(crate) fn ablation_rows(e: &ExperimentSuite) -> Vec<Vec<String>> {
    e.ablations
        .iter()
        .map(|a| {
            let (w, wo, d) = if a.available {
                (
                    f4(a.with_component_score),
                    f4(a.without_component_score),
                    f4(a.delta),
                )
            } else {
                ("n/a".into(), "n/a".into(), "n/a".into())
            };
            vec![
                a.name.clone(),
                a.component.clone(),
                w,
                wo,
                d,
                a.note.clone(),
            ]
        })
        .collect()
}

/// The falsification tests: test, threshold, observed, falsified.
pub(crate) fn falsification_rows(e: &ExperimentSuite) -> Vec<Vec<String>> {
    e.falsification_tests
        .iter()
        .map(|t| {
            vec![
                t.test.clone(),
                f4(t.threshold),
                f4(t.observed),
                t.falsified.to_string(),
            ]
        })
        .collect()
}

/// The pool kinds of the attacker table, in column order.
pub(crate) const GAMING_KINDS: [&str; 5] = ["curated", "holdout", "challenge", "twins", "quarter"];

/// The attacker table's header.
pub(crate) fn gaming_header() -> Vec<String> {
    let mut h: Vec<String> = vec!["policy".into(), "kind".into(), "headline".into()];
    h.extend(GAMING_KINDS.iter().map(|k| format!("{k} mean")));
    h.extend(["benign mean", "risky mean", "within bounds"].map(str::to_owned));
    h
}

/// The attacker table: policy, kind, headline, mean per pool kind, benign and risky means over
/// every pool, within bounds.
pub(crate) fn gaming_rows(g: &crate::gaming::GamingResistance) -> Vec<Vec<String>> {
    g.policies
        .iter()
        .map(|p| {
            let mut row = vec![p.policy.clone(), p.kind.clone(), o4(p.headline)];
            row.extend(
                GAMING_KINDS
                    .iter()
                    .map(|k| o4(p.pools.get(*k).map(|f| f.mean))),
            );
            let all = p.pools.get("all");
            row.push(o4(all.and_then(|f| f.benign_mean)));
            row.push(o4(all.and_then(|f| f.risky_mean)));
            row.push(p.within_bounds.to_string());
            row
        })
        .collect()
}
