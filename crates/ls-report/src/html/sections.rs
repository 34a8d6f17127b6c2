//! The report's sections as tables (the same figures the Markdown report lists).

use super::{esc, f4, metrics, money, o4, table};
use crate::report::BenchmarkReport;
use crate::tables;
use std::fmt::Write;

/// Evaluation protocol and the agent ladder.
pub fn protocol_and_agents(r: &BenchmarkReport) -> String {
    let p = &r.evaluation_protocol;
    let mut s = String::from("<h2>Evaluation protocol</h2>");
    s.push_str(&metrics(&[
        ("model", p.model_name.clone()),
        ("agent type", p.agent_type.clone()),
        ("observation mode", p.track_mode.clone()),
        ("temperature", format!("{:.2}", p.temperature)),
        ("pass^k trials", p.pass_k.to_string()),
        ("pass threshold", format!("{:.2}", p.pass_threshold)),
        (
            "ControlBench length",
            format!(
                "{} (standard {})",
                p.controlbench_sequence_length, p.controlbench_standard_sequence_length
            ),
        ),
    ]));
    if let Some(h) = &r.headline {
        let _ = write!(s, "<h2>Headline</h2><p>{}</p>", esc(&h.definition));
        s.push_str(&metrics(&[
            ("pairs", h.pair_count.to_string()),
            (
                "seeds",
                h.seeds
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "evidence-independent bound",
                f4(h.evidence_independent_bound),
            ),
            ("analyst bar", f4(h.analyst_bar)),
        ]));
    }
    s.push_str("<h2>Agent ladder</h2>");
    let rows = tables::ladder_rows(r);
    s.push_str(&table(
        &[
            "agent",
            "headline",
            "public mean",
            "unsafe release rate",
            "control-satisfied resolution",
            "holdout mean",
            "contrastive joint",
            "quarter accuracy",
            "quarter rating",
            "certificate-required mean",
        ],
        &rows,
    ));
    s
}

/// The public benchmark (with its per-case table), the holdout challenge, contrastive pairs.
pub fn benchmark(r: &BenchmarkReport) -> String {
    let pb = &r.public_benchmark;
    let m = &pb.metrics;
    let mut s = String::from("<h2>Public benchmark</h2>");
    let mut rows = vec![
        ("cases", pb.case_count.to_string()),
        ("average score", f4(pb.average_score)),
        (
            "control-satisfied resolution",
            f4(m.control_satisfied_resolution_rate),
        ),
        (
            "institutional utility",
            f4(m.institutional_utility_stats.mean),
        ),
        ("unsafe release rate", f4(m.unsafe_release_rate)),
        ("pass rate", f4(m.pass_rate)),
        ("trial pass rate", f4(m.trial_pass_rate)),
        ("pass^k consistent", f4(m.consistent_pass_rate)),
        ("score standard deviation", f4(m.score_stats.stdev)),
    ];
    if let Some(e) = pb.task_breakdown.get("task_e") {
        rows.push(("Task E mean", f4(e.score_stats.mean)));
    }
    s.push_str(&metrics(&rows));
    let cases = tables::case_rows(r);
    let _ = write!(
        s,
        "<details><summary>Every case ({})</summary>{}</details>",
        cases.len(),
        table(
            &["case", "score", "result class", "decision", "steps"],
            &cases
        )
    );
    s.push_str("<h2>Holdout challenge</h2>");
    match &r.holdout_challenge {
        Some(h) => {
            let hm = &h.summary.metrics;
            s.push_str(&metrics(&[
                ("seeds", h.seed_count.to_string()),
                ("variants per case", h.variants_per_case.to_string()),
                ("total cases", h.total_case_count.to_string()),
                ("mean score", f4(h.average_score)),
                (
                    "control-satisfied resolution",
                    f4(hm.control_satisfied_resolution_rate),
                ),
                (
                    "institutional utility",
                    f4(hm.institutional_utility_stats.mean),
                ),
                ("unsafe release rate", f4(hm.unsafe_release_rate)),
                ("pass rate", f4(hm.pass_rate)),
                ("trial pass rate", f4(hm.trial_pass_rate)),
                ("pass^k consistent", f4(hm.consistent_pass_rate)),
                ("any-pass", f4(hm.any_pass_rate)),
                (
                    "seed-average standard deviation",
                    f4(h.suite_average_stats.stdev),
                ),
            ]));
        }
        None => s.push_str("<p class=\"muted\">Not available (see Unavailable tracks).</p>"),
    }
    s.push_str("<h2>Contrastive calibration</h2>");
    match &r.contrastive_pairs {
        Some(c) => s.push_str(&metrics(&[
            ("pairs", c.pair_count.to_string()),
            ("joint mean", f4(c.joint_score_stats.mean)),
            ("joint standard deviation", f4(c.joint_score_stats.stdev)),
        ])),
        None => s.push_str("<p class=\"muted\">Not available.</p>"),
    }
    s
}

/// The ControlBench quarter, the certificate-required and two-agent sections, the official tracks.
pub fn tracks(r: &BenchmarkReport) -> String {
    let mut s = String::from("<h2>ControlBench institutional sequence</h2>");
    match &r.controlbench_quarter {
        Some(q) => {
            let p = &q.profile;
            s.push_str(&metrics(&[
                ("length", q.sequence_length.to_string()),
                ("accuracy", f4(p.accuracy)),
                ("fraud recall", f4(p.fraud_recall)),
                ("false positive rate", f4(p.false_positive_rate)),
                ("institutional loss score", o4(p.institutional_loss_score)),
                (
                    "institutional loss total (amount)",
                    p.institutional_loss_total
                        .map(money)
                        .unwrap_or_else(|| "n/a".into()),
                ),
                ("deployability", p.deployability_rating.clone()),
                ("certificate validity", f4(p.certificate_validity_rate)),
                (
                    "authority restriction rate",
                    f4(p.authority_restriction_rate),
                ),
                (
                    "sleeper detection (submitted decision)",
                    format!(
                        "{} over {} activations",
                        f4(p.sleeper_detection_rate),
                        p.sleeper_activation_count
                    ),
                ),
                (
                    "catastrophic events",
                    p.catastrophic_event_count
                        .map(|x| x.to_string())
                        .unwrap_or_else(|| "n/a".into()),
                ),
                (
                    "accuracy/loss disagreement",
                    o4(p.accuracy_loss_disagreement),
                ),
            ]));
            let _ = write!(s, "<p class=\"muted\">{}</p>", esc(&q.memory_note));
        }
        None => s.push_str("<p class=\"muted\">Not available.</p>"),
    }
    s.push_str("<h2>Certificate-required track</h2>");
    match &r.certificate_required_track {
        Some(c) => s.push_str(&metrics(&[
            ("mean score", f4(c.summary.average_score)),
            (
                "certificate missing rate",
                f4(c.certificate_required_missing_rate),
            ),
        ])),
        None => s.push_str("<p class=\"muted\">Not available.</p>"),
    }
    s.push_str("<h2>Two-agent control profile</h2>");
    match &r.controlbench_two_agent_demo {
        Some(d) => s.push_str(&metrics(&[
            ("thesis", d.thesis.clone()),
            ("agents", format!("{} vs {}", d.agent_a, d.agent_b)),
            (
                "accuracy/loss disagreement",
                o4(d.accuracy_loss_disagreement),
            ),
            ("punchline", d.punchline.clone()),
        ])),
        None => s.push_str("<p class=\"muted\">Not available.</p>"),
    }
    let b = &r.blind_control_track;
    s.push_str("<h2>Official tracks</h2>");
    s.push_str(&metrics(&[
        (
            "case track: control-satisfied resolution",
            f4(r.official_tracks
                .case_track
                .summary
                .metrics
                .control_satisfied_resolution_rate),
        ),
        (
            "adversarial data track: unsafe release rate",
            f4(r.official_tracks
                .adversarial_data_track
                .summary
                .metrics
                .unsafe_release_rate),
        ),
        (
            "portfolio track: institutional utility",
            f4(r.official_tracks
                .portfolio_track
                .institutional_utility_stats
                .mean),
        ),
        (
            "generated holdout: mean score",
            o4(r.holdout_challenge.as_ref().map(|h| h.average_score)),
        ),
        (
            "ControlBench: institutional loss score",
            o4(r.controlbench_quarter
                .as_ref()
                .and_then(|q| q.profile.institutional_loss_score)),
        ),
        (
            "sleeper vigilance: detection rate",
            o4(r.sleeper_vigilance_track
                .as_ref()
                .map(|t| t.sleeper_detection_rate)),
        ),
        (
            "blind control: mean score",
            format!(
                "{} (instrumented {})",
                f4(b.average_score),
                f4(b.instrumented_average_score)
            ),
        ),
        (
            "certificate required: mean score",
            o4(r.certificate_required_track
                .as_ref()
                .map(|c| c.summary.average_score)),
        ),
        (
            "human baseline: accuracy",
            if r.human_baseline_track.available {
                f4(r.human_baseline_track.figures.accuracy)
            } else {
                "no data supplied".into()
            },
        ),
    ]));
    s
}

/// The experiment suite (ablations, falsification tests), gaming resistance, unavailable tracks.
pub fn experiments(r: &BenchmarkReport) -> String {
    let e = &r.experiment_suite;
    let mut s = String::from("<h2>Experiment suite</h2>");
    s.push_str(&metrics(&[
        (
            "accuracy/loss correlation",
            o4(e.accuracy_vs_loss_correlation),
        ),
        ("top by accuracy", e.top_by_accuracy.clone()),
        (
            "top by institutional loss score",
            e.top_by_institutional_loss_score.clone(),
        ),
        (
            "cost-sensitivity ranking stable",
            if e.cost_sensitivity.available {
                e.cost_sensitivity.ranking_stable.to_string()
            } else {
                "n/a".into()
            },
        ),
        ("TrustGraph support rate", f4(e.trust_graph_support_rate)),
        ("TrustGraph cap-hit rate", f4(e.trust_graph_cap_hit_rate)),
        ("human baseline", e.human_baseline_status.clone()),
    ]));
    let ablations = tables::ablation_rows(e);
    s.push_str("<h3>Ablations</h3>");
    s.push_str(&table(
        &["ablation", "component", "with", "without", "delta", "note"],
        &ablations,
    ));
    let tests = tables::falsification_rows(e);
    s.push_str("<h3>Falsification tests</h3>");
    s.push_str(&table(
        &["test", "threshold", "observed", "falsified"],
        &tests,
    ));
    if let Some(g) = &r.gaming_resistance {
        let rows = tables::gaming_rows(g);
        let bounded = g.policies.iter().filter(|r| r.within_bounds).count();
        let _ = write!(
            s,
            "<h2>Gaming resistance</h2><p>{}</p><p>{bounded} of {} policies within bounds.</p>",
            esc(&g.note),
            g.policies.len()
        );
        let header = tables::gaming_header();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        s.push_str(&table(&header, &rows));
    }
    if !r.unavailable_tracks.is_empty() {
        let rows: Vec<Vec<String>> = r
            .unavailable_tracks
            .iter()
            .map(|u| vec![u.track.clone(), u.reason.clone()])
            .collect();
        s.push_str("<h2>Unavailable tracks</h2>");
        s.push_str(&table(&["track", "reason"], &rows));
    }
    s
}
