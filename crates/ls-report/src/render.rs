//! Rendering: markdown (readable in a terminal) and the HTML page ([`crate::html`]: tables and
//! inline SVG charts with labelled axes).
//! The tables both formats show are built once in [`crate::tables`]; markdown writes them as pipe
//! tables, HTML as `<table>`s.

use crate::report::{BenchmarkReport, ExperimentSuite};
use crate::tables::{
    ablation_rows, case_rows, f4, falsification_rows, gaming_rows, ladder_rows, o4,
};
use std::fmt::Write;

/// Markdown table rows (`| a | b |`), one line each.
fn md_rows(s: &mut String, rows: &[Vec<String>]) {
    for row in rows {
        let _ = writeln!(s, "| {} |", row.join(" | "));
    }
}

/// A section that may be missing: its body, else `missing`.
fn md_optional<T>(
    s: &mut String,
    x: Option<&T>,
    missing: &str,
    body: impl FnOnce(&mut String, &T),
) {
    match x {
        Some(x) => body(s, x),
        None => {
            let _ = writeln!(s, "{missing}");
        }
    }
}

pub fn markdown(r: &BenchmarkReport) -> String {
    let mut s = String::new();
    md_header(&mut s, r);
    md_stored_runs(&mut s, r);
    md_aging(&mut s, r);
    md_public(&mut s, r);
    md_sections(&mut s, r);
    md_experiments(&mut s, &r.experiment_suite);
    md_official(&mut s, r);
    if let Some(g) = &r.gaming_resistance {
        let h = crate::tables::gaming_header();
        let _ = writeln!(
            s,
            "\n## Gaming Resistance\n\n{}\n\n| {} |\n|{}",
            g.note,
            h.join(" | "),
            "---|".repeat(h.len())
        );
        md_rows(&mut s, &gaming_rows(g));
    }
    if !r.unavailable_tracks.is_empty() {
        let _ = writeln!(s, "\n## Unavailable tracks\n");
        for u in &r.unavailable_tracks {
            let _ = writeln!(s, "- {}: {}", u.track, u.reason);
        }
    }
    s
}

/// Title, identity, evaluation protocol and the agent ladder.
fn md_header(s: &mut String, r: &BenchmarkReport) {
    let p = &r.evaluation_protocol;
    let _ = writeln!(s, "# LedgerShield ControlBench benchmark report\n");
    let _ = writeln!(
        s,
        "{}\n\n- Primary theme: {}\n- Secondary theme: {}\n- Generated at: {}\n- Generator: {}\n",
        r.benchmark_identity,
        r.primary_theme,
        r.secondary_theme,
        if r.generated_at.is_empty() {
            "(not stamped)"
        } else {
            &r.generated_at
        },
        p.generator
    );
    let _ = writeln!(s, "## Evaluation Protocol\n");
    let _ = writeln!(s, "| field | value |\n|---|---|\n| model | {} |\n| agent type | {} |\n| observation mode | {} |\n| temperature | {:.2} |\n| pass^k trials | {} |\n| pass threshold | {:.2} |\n| ControlBench length | {} (standard {}) |\n", p.model_name, p.agent_type, p.track_mode, p.temperature, p.pass_k, p.pass_threshold, p.controlbench_sequence_length, p.controlbench_standard_sequence_length);
    if let Some(h) = &r.headline {
        let _ = writeln!(s, "## Headline\n\n{}\n\n{} pairs (seeds {:?}); evidence-independent policies <= {}, an analyst's bar {}.\n", h.definition, h.pair_count, h.seeds, h.evidence_independent_bound, h.analyst_bar);
    }
    let _ = writeln!(s, "## Agent ladder\n\n| agent | headline | public mean | unsafe rate | CSR | holdout mean | contrastive joint | quarter accuracy | quarter rating | cert-required mean |\n|---|---|---|---|---|---|---|---|---|---|");
    md_rows(s, &ladder_rows(r));
}

fn md_stored_runs(s: &mut String, r: &BenchmarkReport) {
    if r.stored_runs.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Stored runs on the leaderboard\n\nRuns on the assisted track (a model run with a teacher hint, repair, guardrails or another assistance option) are ranked on their own.\n\n| agent | model | track | suite | cases | seeds | pass^k | mean | unsafe rate | source | run |\n|---|---|---|---|---|---|---|---|---|---|---|");
    for x in &r.stored_runs {
        let p = &x.provenance;
        let track = if p.assistance.is_empty() {
            p.track.clone()
        } else {
            format!("{} ({})", p.track, p.assistance.join(", "))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.agent,
            x.model,
            track,
            p.suite,
            p.case_count,
            p.seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            p.pass_k,
            f4(x.mean_score),
            f4(x.unsafe_release_rate),
            p.server.clone().unwrap_or_else(|| p.source.clone()),
            p.run_id
        );
    }
}

fn md_aging(s: &mut String, r: &BenchmarkReport) {
    let Some(a) = &r.aging_report else {
        return;
    };
    let b = &a.bucket_totals;
    let _ = writeln!(s, "\n## Accounts-payable aging ({} as of {})\n\n| currency | items | 0-30 | 31-60 | 61-90 | 90+ | total | total in {} |\n|---|---|---|---|---|---|---|---|", a.base_currency, a.as_of, a.base_currency);
    for (c, x) in &a.per_currency {
        let t = &x.bucket_totals;
        let _ = writeln!(
            s,
            "| {c} | {} | {} | {} | {} | {} | {} | {} |",
            x.item_count, t.d0_30, t.d31_60, t.d61_90, t.d90_plus, x.total, x.base_total
        );
    }
    let _ = writeln!(
        s,
        "| all ({}) | {} | {} | {} | {} | {} | {} | {} |",
        a.base_currency, a.item_count, b.d0_30, b.d31_60, b.d61_90, b.d90_plus, a.total, a.total
    );
}

fn md_public(s: &mut String, r: &BenchmarkReport) {
    let pb = &r.public_benchmark;
    let m = &pb.metrics;
    let _ = writeln!(s, "\n## Public Benchmark\n\n- cases: {}\n- average score: {}\n- control-satisfied resolution: {}\n- institutional utility: {}\n- unsafe release rate: {}\n- pass rate: {}\n- trial pass rate: {}\n- pass^k consistent: {}\n- score stddev: {}", pb.case_count, f4(pb.average_score), f4(m.control_satisfied_resolution_rate), f4(m.institutional_utility_stats.mean), f4(m.unsafe_release_rate), f4(m.pass_rate), f4(m.trial_pass_rate), f4(m.consistent_pass_rate), f4(m.score_stats.stdev));
    if let Some(e) = pb.task_breakdown.get("task_e") {
        let _ = writeln!(s, "- Task E mean: {}", f4(e.score_stats.mean));
    }
    let _ = writeln!(
        s,
        "\n| case | score | class | decision | steps |\n|---|---|---|---|---|"
    );
    md_rows(s, &case_rows(r));
}

/// Holdout, contrastive, quarter, certificate-required and two-agent sections.
fn md_sections(s: &mut String, r: &BenchmarkReport) {
    let _ = writeln!(s, "\n## Holdout Challenge\n");
    md_optional(
        s,
        r.holdout_challenge.as_ref(),
        "Not available (see Unavailable tracks).",
        |s, h| {
            let hm = &h.summary.metrics;
            let _ = writeln!(s, "- seeds: {}\n- variants per case: {}\n- total cases: {}\n- mean: {}\n- CSR: {}\n- utility: {}\n- unsafe release rate: {}\n- pass rate: {}\n- trial pass rate: {}\n- pass^k consistent: {}\n- any-pass: {}\n- seed-average stddev: {}", h.seed_count, h.variants_per_case, h.total_case_count, f4(h.average_score), f4(hm.control_satisfied_resolution_rate), f4(hm.institutional_utility_stats.mean), f4(hm.unsafe_release_rate), f4(hm.pass_rate), f4(hm.trial_pass_rate), f4(hm.consistent_pass_rate), f4(hm.any_pass_rate), f4(h.suite_average_stats.stdev));
        },
    );
    let _ = writeln!(s, "\n## Contrastive Calibration\n");
    md_optional(s, r.contrastive_pairs.as_ref(), "Not available.", |s, c| {
        let _ = writeln!(
            s,
            "- pairs: {}\n- joint mean: {}\n- joint stddev: {}",
            c.pair_count,
            f4(c.joint_score_stats.mean),
            f4(c.joint_score_stats.stdev)
        );
    });
    let _ = writeln!(s, "\n## ControlBench Institutional Sequence\n");
    md_optional(
        s,
        r.controlbench_quarter.as_ref(),
        "Not available.",
        |s, q| {
            let p = &q.profile;
            let _ = writeln!(s, "- length: {}\n- accuracy: {}\n- fraud recall: {}\n- false positive rate: {}\n- institutional loss score: {}\n- institutional loss total: {}\n- deployability: {}\n- certificate validity: {}\n- authority restriction rate: {}\n- sleeper detection (submitted decision): {} over {} activations\n- catastrophic events: {}\n- accuracy/loss disagreement: {}\n- note: {}", q.sequence_length, f4(p.accuracy), f4(p.fraud_recall), f4(p.false_positive_rate), o4(p.institutional_loss_score), p.institutional_loss_total.map(|x| format!("{x:.2}")).unwrap_or_else(|| "n/a".into()), p.deployability_rating, f4(p.certificate_validity_rate), f4(p.authority_restriction_rate), f4(p.sleeper_detection_rate), p.sleeper_activation_count, p.catastrophic_event_count.map(|x| x.to_string()).unwrap_or_else(|| "n/a".into()), o4(p.accuracy_loss_disagreement), q.memory_note);
        },
    );
    let _ = writeln!(s, "\n## Certificate-Required Track\n");
    md_optional(
        s,
        r.certificate_required_track.as_ref(),
        "Not available.",
        |s, c| {
            let _ = writeln!(
                s,
                "- mean: {}\n- missing rate: {}",
                f4(c.summary.average_score),
                f4(c.certificate_required_missing_rate)
            );
        },
    );
    let _ = writeln!(s, "\n## Two-Agent Control Profile\n");
    md_optional(
        s,
        r.controlbench_two_agent_demo.as_ref(),
        "Not available.",
        |s, d| {
            let _ = writeln!(
                s,
                "- thesis: {}\n- agents: {} vs {}\n- disagreement: {}\n- punchline: {}",
                d.thesis,
                d.agent_a,
                d.agent_b,
                o4(d.accuracy_loss_disagreement),
                d.punchline
            );
        },
    );
}

fn md_experiments(s: &mut String, e: &ExperimentSuite) {
    let _ = writeln!(s, "\n## Experiment Suite\n\n- accuracy/loss correlation: {}\n- top by accuracy: {}; top by institutional loss score: {}\n- cost-sensitivity ranking stable: {}\n- TrustGraph support rate: {}; cap-hit rate: {}\n- human baseline: {}\n\n| ablation | component | with | without | delta | note |\n|---|---|---|---|---|---|", o4(e.accuracy_vs_loss_correlation), e.top_by_accuracy, e.top_by_institutional_loss_score, if e.cost_sensitivity.available { e.cost_sensitivity.ranking_stable.to_string() } else { "n/a".into() }, f4(e.trust_graph_support_rate), f4(e.trust_graph_cap_hit_rate), e.human_baseline_status);
    md_rows(s, &ablation_rows(e));
    let _ = writeln!(
        s,
        "\n| falsification test | threshold | observed | falsified |\n|---|---|---|---|"
    );
    md_rows(s, &falsification_rows(e));
}

fn md_official(s: &mut String, r: &BenchmarkReport) {
    let b = &r.blind_control_track;
    let _ = writeln!(s, "\n## Official Tracks\n\n- case CSR: {}\n- adversarial unsafe rate: {}\n- portfolio utility: {}\n- holdout mean: {}\n- ControlBench loss score: {}\n- sleeper detection: {}\n- blind mean: {} (instrumented {})\n- certificate-required mean: {}\n- human accuracy: {}", f4(r.official_tracks.case_track.summary.metrics.control_satisfied_resolution_rate), f4(r.official_tracks.adversarial_data_track.summary.metrics.unsafe_release_rate), f4(r.official_tracks.portfolio_track.institutional_utility_stats.mean), o4(r.holdout_challenge.as_ref().map(|h| h.average_score)), o4(r.controlbench_quarter.as_ref().and_then(|q| q.profile.institutional_loss_score)), o4(r.sleeper_vigilance_track.as_ref().map(|t| t.sleeper_detection_rate)), f4(b.average_score), f4(b.instrumented_average_score), o4(r.certificate_required_track.as_ref().map(|c| c.summary.average_score)), if r.human_baseline_track.available { f4(r.human_baseline_track.figures.accuracy) } else { "none supplied".into() });
}

/// The HTML report: a readable offline page (see [`crate::html`]).
pub fn html(r: &BenchmarkReport) -> String {
    crate::html::page(r)
}
