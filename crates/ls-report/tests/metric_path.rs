//! The path of a report metric, end to end: an episode's terminal `info` (read as
//! `ls_env::terminal_info::TerminalInfo`) → its `CaseRow` (`eval::case_row`) → the section's
//! `AggregateMetrics` (`metrics::aggregate`) → the rendered Markdown and HTML. A new per-case
//! metric follows the same path (ARCHITECTURE.md, "Where to add things: a report metric"); add its
//! assertions here.

use ls_core::FixtureSet;
use ls_env::terminal_info::TerminalInfo;
use ls_env::TrackMode;
use ls_report::eval::{evaluate_cases, pool_of, EvalConfig};
use ls_report::metrics::{r4, section, CaseRow};
use ls_report::{render, BenchmarkReport};
use std::sync::Arc;

fn agent(name: &str) -> impl Fn() -> Box<dyn ls_agents::Agent> + '_ {
    move || ls_agents::offline_agent(name).expect("a scripted agent")
}

fn share(rows: &[CaseRow], f: fn(&CaseRow) -> bool) -> f64 {
    r4(rows.iter().filter(|r| f(r)).count() as f64 / rows.len() as f64)
}

#[test]
fn episode_figures_reach_the_row_the_aggregate_and_the_rendered_report() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        % 5000;
    println!("agent seed {seed}");
    let set = FixtureSet::embedded().unwrap();
    let cases: Vec<_> = set
        .cases
        .iter()
        .filter(|c| c.case_id.ends_with("-001") || c.case_id.ends_with("-002"))
        .cloned()
        .collect();
    let pool = pool_of(&Arc::new(set.master.clone()), &cases);
    let cfg = EvalConfig {
        pass_k: 1,
        threshold: 0.85,
        seed,
        track_mode: TrackMode::Blind,
    };
    for name in ["teacher", "naive-pay"] {
        let (rows, records) = evaluate_cases(&agent(name), &pool, &cases, None, &cfg);
        assert_eq!(rows.len(), cases.len());
        assert_eq!(records.len(), cases.len(), "pass_k 1: one record per case");
        for (row, rec) in rows.iter().zip(&records) {
            assert!(rec.terminated, "{name} {}: {:?}", row.case_id, rec.errors);
            let t = TerminalInfo::from_map(&rec.terminal_info);
            let id = &row.case_id;
            assert_eq!(row.result_class, t.result_class_str(), "{name} {id}");
            assert_eq!(row.final_decision, t.decision_str(), "{name} {id}");
            assert_eq!(
                row.score,
                r4(t.final_score.clamp(0.01, 0.99)),
                "{name} {id}"
            );
            assert_eq!(row.certificate_valid, rec.certificate_valid, "{name} {id}");
            assert_eq!(row.trust_graph_supported, t.trust_graph_supported());
            assert_eq!(row.authority_gate_blocking, t.authority_gate_blocking());
            assert_eq!(
                row.falsifier_blocking,
                t.falsifier_blocking(),
                "{name} {id}"
            );
            assert_eq!(row.benchmark_track, t.benchmark_track, "{name} {id}");
            assert_eq!(row.unsafe_release, t.result_class_str() == "unsafe_release");
        }
        let s = section(rows.clone(), cfg.threshold);
        let m = &s.metrics;
        assert_eq!(m.unsafe_release_rate, share(&rows, |r| r.unsafe_release));
        assert_eq!(
            m.certificate_validity_rate,
            share(&rows, |r| r.certificate_valid)
        );
        assert_eq!(
            m.consistent_pass_rate,
            share(&rows, |r| r.pass_k_consistent)
        );
        if name == "naive-pay" {
            assert!(
                m.unsafe_release_rate > 0.0,
                "paying every case releases a fraud"
            );
        } else {
            assert_eq!(
                m.unsafe_release_rate, 0.0,
                "the teacher releases nothing unsafe"
            );
        }
        let report = BenchmarkReport {
            public_benchmark: s.clone(),
            ..Default::default()
        };
        let md = render::markdown(&report);
        let line = format!("- unsafe release rate: {:.4}", m.unsafe_release_rate);
        assert!(md.contains(&line), "{name}: markdown lacks {line:?}");
        for row in &rows {
            let md_row = format!(
                "| {} | {:.4} | {} |",
                row.case_id, row.score, row.result_class
            );
            assert!(md.contains(&md_row), "{name}: markdown lacks {md_row:?}");
        }
        let html = render::html(&report);
        let cell = format!("<td class=\"num\">{:.4}</td>", m.unsafe_release_rate);
        assert!(html.contains(&cell), "{name}: HTML lacks {cell:?}");
    }
}
