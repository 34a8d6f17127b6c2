//! Stored live model comparisons on the real server: keyless callers get the public aggregate
//! (no per-case rows), the operator gets the whole summary, bad ids and queries are 4xx.

#[path = "support/servers.rs"]
mod servers;

use ls_agents::{offline_agent, Agent};
use ls_core::FixtureSet;
use ls_env::TrackMode;
use ls_product::ReportStore;
use ls_report::compare::{compare_models, CompareSetup, ModelUnderTest};
use ls_report::eval::{pool_of, EvalConfig};
use ls_store::{RunRow, Store};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

const OP_KEY: &str = "op-key";

async fn spawn(db: PathBuf) -> String {
    servers::controlbench_with(TrackMode::Blind, ReportStore::at(db), Some(OP_KEY)).await
}

/// A real comparison of two scripted agents on two curated cases, stored as the CLI stores it.
fn store_comparison(db: &std::path::Path) -> String {
    let set = FixtureSet::embedded().unwrap();
    let cases: Vec<_> = set
        .cases
        .iter()
        .filter(|c| c.case_id == "CASE-B-001" || c.case_id == "CASE-D-001")
        .cloned()
        .collect();
    let pool = pool_of(&Arc::new(set.master.clone()), &cases);
    let teacher = || offline_agent("teacher").unwrap();
    let pay = || offline_agent("naive-pay").unwrap();
    let models = [
        ModelUnderTest {
            model: "gpt-5.4".into(),
            factory: &teacher as &dyn Fn() -> Box<dyn Agent>,
        },
        ModelUnderTest {
            model: "gpt-4o-mini".into(),
            factory: &pay as &dyn Fn() -> Box<dyn Agent>,
        },
    ];
    let setup = CompareSetup {
        pool: &pool,
        cases: &cases,
        cfg: EvalConfig {
            pass_k: 1,
            threshold: 0.85,
            seed: 7,
            track_mode: TrackMode::Blind,
        },
        api_base: "http://127.0.0.1:1".into(),
        generated_at: "2026-01-01T00:00:00Z".into(),
        pairs: &[],
        headline_seeds: &[],
    };
    let (summary, _) = compare_models(&models, &setup);
    assert!(summary.results[0].average_score > summary.results[1].average_score);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let mut store = Store::open(db).unwrap();
    let id = "compare-test-1".to_owned();
    let mut v = serde_json::to_value(&summary).unwrap();
    v["run_ids"] = serde_json::json!(["compare-test-1-1", "compare-test-1-2"]);
    store
        .insert_run(
            &RunRow {
                run_id: id.clone(),
                kind: "compare".into(),
                agent: "compare".into(),
                model: "gpt-5.4 vs gpt-4o-mini".into(),
                agent_type: "comparison".into(),
                seed: 7,
                created_at: summary.generated_at_utc.clone(),
                case_count: 2,
                mean_score: 0.0,
                summary: v,
            },
            &[],
        )
        .unwrap();
    id
}

async fn get(base: &str, path: &str, key: bool) -> (u16, Value) {
    let mut r = reqwest::Client::new().get(format!("{base}{path}"));
    if key {
        r = r.header("x-api-key", OP_KEY);
    }
    let resp = r.send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

#[tokio::test]
async fn comparisons_are_public_aggregates_unless_the_operator_asks() {
    let dir =
        std::env::temp_dir().join(format!("ls-product-cmp-{}", uuid::Uuid::new_v4().simple()));
    let db = dir.join("ls.db");
    let empty = spawn(dir.join("none.db")).await;
    let (code, v) = get(&empty, "/comparisons", false).await;
    assert_eq!(code, 200);
    assert_eq!(v["comparisons"], serde_json::json!([]));
    assert!(v["note"].as_str().unwrap().contains("ledgershield compare"));

    let id = tokio::task::spawn_blocking({
        let db = db.clone();
        move || store_comparison(&db)
    })
    .await
    .unwrap();
    let base = spawn(db).await;

    let (code, public) = get(&base, "/comparisons", false).await;
    assert_eq!(code, 200);
    let c = &public["comparisons"][0];
    assert_eq!(c["comparison_id"], id.as_str());
    assert_eq!(c["capability_order"]["ordered_models"][1], "gpt-5.4");
    assert_eq!(c["capability_order"]["monotonic_by_capability"], true);
    assert!(c["results"][0]["task_families"]["task_d"]["average_score"].is_number());
    let text = public.to_string();
    assert!(!text.contains("CASE-"), "keyless view names a case: {text}");
    assert_eq!(c["results"][0]["traces"], serde_json::json!([]));

    let (code, full) = get(&base, &format!("/comparisons/{id}"), true).await;
    assert_eq!(code, 200);
    assert_eq!(full["results"][0]["traces"].as_array().unwrap().len(), 2);
    assert_eq!(full["cases"].as_array().unwrap().len(), 2);
    assert!(full.get("per_case_withheld").is_none());
    let (_, one_public) = get(&base, &format!("/comparisons/{id}"), false).await;
    assert!(!one_public.to_string().contains("CASE-"));

    let (code, e) = get(&base, "/comparisons/nope", true).await;
    assert_eq!(code, 404, "{e}");
    assert!(e.to_string().contains("no stored comparison 'nope'"));
    let (code, _) = get(&base, "/comparisons?limit=zero", false).await;
    assert_eq!(code, 422);
}
