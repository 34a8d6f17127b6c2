//! The "a case" path of ARCHITECTURE.md's "Where to add things", exercised: a fixture directory
//! holding the curated set plus one extra case loads (`FixtureSet::load_dir`, what `serve
//! --fixtures DIR` reads), passes the consistency validator, and serves whole episodes of the new
//! case: reset by id, a tool that reads its documents, a graded submit. Nothing pins the curated
//! count, so the extra case breaks no count.

use ls_core::fixtures::FixtureSet;
use ls_core::validate::validate_set;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn curated_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/controlbench")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

#[test]
fn a_fixture_directory_with_one_extra_case_loads_validates_and_serves() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("ls-extra-case-{}-{nanos}", std::process::id()));
    copy_dir(&curated_dir(), &dir);
    // The new case: a curated Task A case under a new id (its documents are its own).
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases/CASE-A-001.json")).unwrap())
            .unwrap();
    let mut extra = base.clone();
    extra["case_id"] = json!("CASE-A-900");
    std::fs::write(
        dir.join("cases/CASE-A-900.json"),
        serde_json::to_string_pretty(&extra).unwrap(),
    )
    .unwrap();

    let loaded = FixtureSet::load_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let set = loaded.expect("the directory loads");
    let curated = FixtureSet::embedded().unwrap();
    assert_eq!(set.cases.len(), curated.cases.len() + 1);
    assert!(set.case("CASE-A-900").is_some());
    let issues = validate_set(&set);
    assert!(issues.is_empty(), "{issues:?}");

    let doc_id = base["documents"][0]["doc_id"].as_str().unwrap().to_owned();
    let pool = Arc::new(CasePool::new(set));
    let mut env = Environment::new(pool, EnvConfig::default());
    let reset = env
        .reset(&ResetRequest {
            case_id: Some("CASE-A-900".into()),
            ..Default::default()
        })
        .expect("reset to the new case");
    assert_eq!(reset.observation.case_id, "CASE-A-900");
    let ocr = env
        .step("ocr", json!({"doc_id": doc_id}).as_object().unwrap())
        .unwrap();
    assert_eq!(
        ocr.observation.last_tool_result.get("success"),
        Some(json!(true))
    );
    let done = env
        .step(
            "submit_decision",
            json!({"decision": "PAY", "confidence": 0.5})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert!(done.terminated);
    let score = done
        .info
        .get("final_score")
        .and_then(|v| v.as_f64())
        .unwrap();
    assert!((0.01..=0.99).contains(&score), "{score}");
}
