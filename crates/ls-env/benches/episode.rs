//! In-process benchmark of a fixed, realistic CASE-D-001 episode: reset + 6 actions
//! (the last one a graded submission), on a warm environment.

use criterion::{criterion_group, criterion_main, Criterion};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use serde_json::{json, Map, Value};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn actions() -> Vec<(&'static str, Map<String, Value>)> {
    let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
    vec![
        (
            "ocr",
            obj(json!({"doc_id": "INV-D-001", "mode": "accurate"})),
        ),
        ("inspect_email_thread", obj(json!({"thread_id": "THR-100"}))),
        (
            "compare_bank_account",
            obj(
                json!({"vendor_key": "northwind-industrial", "proposed_bank_account": "IN31NW000884120"}),
            ),
        ),
        ("request_callback_verification", obj(json!({}))),
        (
            "search_ledger",
            obj(
                json!({"vendor_key": "northwind-industrial", "invoice_number": "INV-2048-A", "amount": 2478}),
            ),
        ),
        (
            "submit_decision",
            obj(json!({
                "decision": "ESCALATE_FRAUD", "confidence": 0.92,
                "reason_codes": ["bank_override_attempt", "sender_domain_spoof", "policy_bypass_attempt", "duplicate_near_match"],
                "policy_checks": {"three_way_match": "pass", "bank_change_verification": "fail", "duplicate_check": "fail", "approval_threshold_check": "pass"},
                "evidence_map": {"sender_domain_spoof": {"doc_id": "THR-100", "page": 1, "bbox": [10, 10, 300, 24], "token_ids": []}},
                "counterfactual": "Would PAY if the sender domain matched the vendor master, the bank account matched, and no duplicate existed."
            })),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
    for (name, mode) in [
        ("case_d_001_episode_blind", TrackMode::Blind),
        ("case_d_001_episode_instrumented", TrackMode::Instrumented),
    ] {
        let mut env = Environment::new(pool.clone(), EnvConfig { track_mode: mode });
        let reset = ResetRequest {
            case_id: Some("CASE-D-001".into()),
            ..Default::default()
        };
        let script = actions();
        c.bench_function(name, |b| {
            b.iter(|| {
                env.reset(&reset).expect("reset");
                let mut last = None;
                for (a, p) in &script {
                    last = Some(env.step(a, p).expect("step"));
                }
                let last = last.expect("steps ran");
                assert!(last.done);
                last.reward
            })
        });
    }
    // What a server does per episode: the same episode plus serializing every reply to JSON (into
    // a buffer sized for an observation, as the server does).
    let reply = |e: &ls_env::StepEnvelope| {
        let mut buf = Vec::with_capacity(16 * 1024);
        ls_json::to_writer(&mut buf, e).expect("json");
        buf.len()
    };
    let mut env = Environment::new(
        pool.clone(),
        EnvConfig {
            track_mode: TrackMode::Blind,
        },
    );
    let reset = ResetRequest {
        case_id: Some("CASE-D-001".into()),
        ..Default::default()
    };
    let script = actions();
    c.bench_function("case_d_001_episode_blind_with_json_replies", |b| {
        b.iter(|| {
            let mut bytes = reply(&env.reset(&reset).expect("reset"));
            for (a, p) in &script {
                bytes += reply(&env.step(a, p).expect("step"));
            }
            assert!(bytes > 10_000);
            bytes
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
