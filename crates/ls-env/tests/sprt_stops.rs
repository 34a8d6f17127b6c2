//! The instrumented SPRT stops at Wald's boundary after a careful investigation: every curated
//! case's required controls (the teacher's plan in `careful.rs`), then `decision_ready` and
//! `should_stop` are read from the real environment's `sprt_state`.

mod support;

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, TrackMode};
use std::sync::Arc;
use support::investigate;

/// Cases whose careful investigation observes at least this many distinct evidence channels, and
/// whose observed signals agree with the label (none on a benign case, some on a risky one), are
/// the clear-cut ones: enough independent controls ran for a decision to be forced. A benign case
/// that shows a surface signal (CASE-C-002's recurring bill, CASE-D-002's and CASE-D-006's
/// deadline beside bank wording) is ambiguous to the test by design: it leans risky until a
/// reader clears the signal, so it need not stop.
const CLEAR_CUT_CHANNELS: usize = 5;

#[test]
fn should_stop_fires_at_walds_boundary_after_a_careful_investigation() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let mut stopped = Vec::new();
    let mut clear_cut = 0;
    let mut stopped_safe = Vec::new();
    for case in &set.cases {
        let (env, _, _) = investigate(
            &pool,
            case,
            EnvConfig {
                track_mode: TrackMode::Instrumented,
            },
        );
        let sprt = &env.episode().unwrap().sprt;
        let state = serde_json::to_value(env.state().unwrap()).unwrap();
        let payload = &state["sprt_state"];
        let ready = payload["decision_ready"].as_bool().unwrap();
        let should_stop = payload["optimal_stopping_reached"].as_bool().unwrap();
        let pending = payload["pending_required_checks"].as_array().unwrap();
        assert_eq!(
            ready,
            sprt.accepted_decision().is_some() && pending.is_empty(),
            "{}",
            case.case_id
        );
        if ready {
            assert!(
                should_stop,
                "{}: decision_ready implies should_stop",
                case.case_id
            );
            // It stops only at a boundary, and only on the right decision.
            let risk = sprt.risk_llr();
            assert!(
                risk <= ls_env::sprt::lower() || risk >= ls_env::sprt::upper(),
                "{}: {risk}",
                case.case_id
            );
            assert_eq!(
                payload["recommended_decision"].as_str(),
                case.gold.decision.map(|d| d.as_str()),
                "{}: stopped on the wrong decision",
                case.case_id
            );
            stopped.push(case.case_id.clone());
        }
        let signals_seen = !env.state().unwrap().observed_risk_signals.is_empty();
        let consistent = signals_seen == case.gold.unsafe_if_pay;
        if !case.gold.unsafe_if_pay && ready {
            stopped_safe.push(case.case_id.clone());
        }
        if consistent && sprt.observed_channels.len() >= CLEAR_CUT_CHANNELS {
            clear_cut += 1;
            assert!(
                ready && should_stop,
                "{}: clear-cut case ({} channels) did not stop: risk LLR {:.3}, posterior {:?}",
                case.case_id,
                sprt.observed_channels.len(),
                sprt.risk_llr(),
                sprt.posterior()
            );
        }
        if sprt.observations_used < 2 {
            assert!(!ready, "{}: no stop without evidence", case.case_id);
        }
    }
    assert!(
        clear_cut >= 7,
        "the curated set has at least 7 clear-cut cases, found {clear_cut}"
    );
    // No curated benign case is clear-cut any more (the two that reached the lower boundary,
    // CASE-D-002 and CASE-D-006, now show a deadline beside bank wording), so the lower boundary
    // is covered by the unit test `sprt::tests::consistent_evidence_reaches_walds_boundaries`;
    // whatever stops on a benign case must still have stopped on PAY (asserted above).
    eprintln!(
        "should_stop on {} of {} cases: {stopped:?} (PAY accepted on {stopped_safe:?})",
        stopped.len(),
        set.cases.len()
    );
}
