//! Per-action timing of the CASE-D-001 benchmark episode including JSON serialization of each
//! reply (a quick profiling aid).
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::{json, Map, Value};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;

/// Serialize a reply as the server does (one buffer sized for an observation, or for a terminal
/// reply).
fn reply(e: &ls_env::StepEnvelope) -> Vec<u8> {
    let mut buf = Vec::with_capacity(if e.done { 40 * 1024 } else { 16 * 1024 });
    ls_json::to_writer(&mut buf, e).unwrap();
    buf
}

fn main() {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
    let mut env = Environment::new(pool, EnvConfig::default());
    let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
    // PROFILE_SCRIPT=load plays the `ledgershield load` episode instead (CASE-D-001 only).
    let script: Vec<(&str, Map<String, Value>)> = if std::env::var("PROFILE_SCRIPT").as_deref()
        == Ok("load")
    {
        vec![
            ("ocr", obj(json!({"doc_id": "INV-D-001", "mode": "fast"}))),
            (
                "zoom",
                obj(json!({"doc_id": "INV-D-001", "page": 1, "bbox": [0, 0, 300, 200]})),
            ),
            ("lookup_policy", obj(json!({}))),
            ("search_ledger", obj(json!({"amount": 2478}))),
            ("request_callback_verification", obj(json!({}))),
            (
                "submit_decision",
                obj(
                    json!({"decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}}),
                ),
            ),
        ]
    } else {
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
                obj(json!({"vendor_key": "northwind-industrial", "amount": 2478})),
            ),
            (
                "submit_decision",
                obj(json!({"decision": "ESCALATE_FRAUD", "confidence": 0.9})),
            ),
        ]
    };
    let reset = ResetRequest {
        case_id: Some("CASE-D-001".into()),
        ..Default::default()
    };
    // PROFILE_N=200 keeps runs under valgrind (callgrind instruction counts) short.
    let n: u32 = std::env::var("PROFILE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut t = vec![0u128; script.len() + 1];
    for _ in 0..n {
        let s = Instant::now();
        let e = env.reset(&reset).unwrap();
        std::hint::black_box(reply(&e));
        t[0] += s.elapsed().as_nanos();
        for (i, (a, p)) in script.iter().enumerate() {
            let s = Instant::now();
            let e = env.step(a, p).unwrap();
            std::hint::black_box(reply(&e));
            t[i + 1] += s.elapsed().as_nanos();
        }
    }
    println!("reset: {:.1} us", t[0] as f64 / f64::from(n) / 1000.0);
    for (i, (a, _)) in script.iter().enumerate() {
        println!("{a}: {:.1} us", t[i + 1] as f64 / f64::from(n) / 1000.0);
    }
}
