//! `ledgershield compare` against a mock OpenAI-compatible endpoint playing two scripted
//! policies of different strength, then `report --agents llm` putting the stored runs on the
//! leaderboard.

mod support;

use ls_core::FixtureSet;
use serde_json::{json, Value};
use std::process::Command;

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ls-compare-{name}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The scripted policy's reply to one chat-completions request. A model whose name contains
/// `strong` looks a vendor up once and submits the case's gold decision with its reason codes
/// (a planner suggestion in its prompt would be followed, but compare shows none: every model is
/// prompted alike); any other model submits PAY at once.
fn reply(body: &Value, set: &FixtureSet) -> String {
    let model = body["model"].as_str().unwrap_or_default();
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    let case_id = user
        .strip_prefix("Case ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default();
    let looked = user.contains("Previous actions: lookup_vendor");
    let hint = user
        .lines()
        .find_map(|l| l.strip_prefix("A heuristic planner suggests: "))
        .and_then(|h| serde_json::from_str::<Value>(h).ok());
    let action = if !model.contains("strong") {
        json!({"action_type": "submit_decision", "payload": {"decision": "PAY", "confidence": 0.9}})
    } else if let Some(h) = hint {
        h
    } else if !looked {
        json!({"action_type": "lookup_vendor", "payload": {"vendor_key": "unknown"}})
    } else {
        let gold = set
            .cases
            .iter()
            .find(|c| c.case_id == case_id)
            .map(|c| c.gold.clone())
            .unwrap_or_default();
        json!({"action_type": "submit_decision", "payload": {
            "decision": gold.decision.map(|d| d.as_str()).unwrap_or("NEEDS_REVIEW"),
            "confidence": 0.9,
            "reason_codes": gold.reason_codes,
            "fraud_flags": gold.fraud_flags,
        }})
    };
    json!({"choices": [{"message": {"role": "assistant", "content": action.to_string()}, "finish_reason": "stop"}]})
        .to_string()
}

/// The scripted policies' endpoint.
fn mock_endpoint() -> String {
    let set = FixtureSet::embedded().unwrap();
    support::mock_chat(move |v| reply(v, &set))
}

fn ledgershield(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("LEDGERSHIELD_DB_PATH")
        .env_remove("API_BASE_URL")
        .output()
        .unwrap()
}

const CASES: &str = "CASE-B-001,CASE-B-003,CASE-C-003,CASE-D-001";

#[test]
fn compare_ranks_two_policies_and_the_runs_reach_the_leaderboard() {
    let api = mock_endpoint();
    let dir = temp("ok");
    let db = dir.join("ls.db");
    let out = dir.join("summary.json");
    let o = ledgershield(&[
        "compare",
        "--model",
        "gpt-4o-strong",
        "--model",
        "gpt-4o-mini",
        "--api-base",
        &api,
        "--cases",
        CASES,
        "--retries",
        "0",
        "--headline-seeds",
        "2026",
        "--out",
        out.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(s["case_count"], 4);
    let results = s["results"].as_array().unwrap();
    let by = |m: &str| results.iter().find(|r| r["model"] == m).unwrap().clone();
    let (strong, weak) = (by("gpt-4o-strong"), by("gpt-4o-mini"));
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap();
    assert!(
        f(&strong, "average_score") > f(&weak, "average_score"),
        "strong {} weak {}",
        strong["average_score"],
        weak["average_score"]
    );
    assert_eq!(strong["model_profile"]["tier"], "strong");
    assert_eq!(weak["model_profile"]["tier"], "standard");
    // Two calls per case for the strong policy (a lookup, then the decision), one for the weak.
    assert_eq!(strong["api_calls"], 8, "{}", strong["api_calls"]);
    assert_eq!(weak["api_calls"], 4);
    // Both were played alike: the unassisted harness, the same reply cap, no planner hint.
    assert_eq!(strong["harness"], weak["harness"]);
    assert_eq!(strong["harness"]["track"], "unassisted");
    assert_eq!(strong["model_calls"]["answered"], 8);
    // Per-family profiles, certificate and institutional metrics, per-case traces.
    for t in ["task_b", "task_c", "task_d"] {
        assert!(
            strong["task_families"][t]["case_count"].as_u64().unwrap() >= 1,
            "{t}"
        );
    }
    assert!(f(&weak["institutional"], "unsafe_release_rate") > 0.0);
    assert!(weak["institutional"]["institutional_loss_score"].is_number());
    assert!(strong["average_certificate_score"].is_number());
    let traces = weak["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 4);
    assert!(traces.iter().all(|t| t["decision"] == "PAY"));
    let actions = strong["traces"][0]["actions"].as_array().unwrap();
    assert_eq!(
        actions,
        &vec![json!("lookup_vendor"), json!("submit_decision")]
    );
    // Both models played the headline's twelve pairs of seed 2026; paying everything tells no
    // pair apart.
    assert_eq!(s["headline_seeds"], json!([2026]));
    for r in [&strong, &weak] {
        assert_eq!(r["headline"]["pairs"], 12, "{}", r["headline"]);
    }
    assert_eq!(weak["headline"]["headline"], 0.0);
    assert_eq!(weak["headline"]["same_side"], 12);
    let order = &s["capability_order"];
    assert_eq!(
        order["ordered_models"],
        json!(["gpt-4o-mini", "gpt-4o-strong"])
    );
    assert_eq!(order["monotonic_by_capability"], true, "{order}");

    // The stored runs go on the leaderboard with their model names and provenance.
    let art = dir.join("art");
    let o = ledgershield(&[
        "report",
        "--agents",
        "naive-pay,llm",
        "--holdout-seeds",
        "2026",
        "--headline-seeds",
        "2026",
        "--no-gaming",
        "--controlbench-sequence-length",
        "4",
        "--no-timestamp",
        "--format",
        "json",
        "--out",
        art.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lb: Value =
        serde_json::from_str(&std::fs::read_to_string(art.join("leaderboard.json")).unwrap())
            .unwrap();
    let entries = lb["entries"].as_array().unwrap();
    let llm: Vec<&Value> = entries.iter().filter(|e| e["agent"] == "llm").collect();
    assert_eq!(llm.len(), 2, "{lb}");
    let strong_entry = llm.iter().find(|e| e["model"] == "gpt-4o-strong").unwrap();
    assert_eq!(strong_entry["public_mean"], strong["average_score"]);
    assert!(strong_entry["provenance"]
        .as_str()
        .unwrap()
        .starts_with("stored-run: compare-"));
    assert_eq!(strong_entry["runs"][0]["case_count"], 4);
    assert_eq!(strong_entry["track"], "unassisted");
    assert_eq!(strong_entry["runs"][0]["model_calls"]["calls"], 8);
    assert_eq!(strong_entry["runs"][0]["pass_k"], 1);
    assert_eq!(
        strong_entry["runs"][0]["seeds"],
        json!([2026, 2027, 2028, 2029])
    );
    assert!(entries.iter().any(|e| e["agent"] == "naive-pay"));
    // The compare's pairs run gives each model's entry its headline.
    for m in ["gpt-4o-strong", "gpt-4o-mini"] {
        let e = llm.iter().find(|e| e["model"] == m).unwrap();
        let r = by(m);
        assert_eq!(e["headline"], r["headline"]["headline"], "{m}");
        assert_eq!(e["headline_pairs"], 12, "{m}");
        assert!(
            e["runs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["suite"] == "pairs"),
            "{m}: {}",
            e["runs"]
        );
    }

    // An agent name that is neither scripted nor stored is refused, naming it.
    let o = ledgershield(&[
        "report",
        "--agents",
        "teacher,nosuch",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown agent 'nosuch'"), "{err}");
    assert!(err.contains("stored-run agents: compare, llm"), "{err}");
}

#[test]
fn an_inverted_pair_is_reported_as_a_violation_and_bad_arguments_are_refused() {
    let api = mock_endpoint();
    let dir = temp("inv");
    let out = dir.join("s.json");
    let o = ledgershield(&[
        "compare",
        "--model",
        "gpt-5.4",
        "--model",
        "gpt-4o-mini-strong",
        "--api-base",
        &api,
        "--cases",
        "CASE-B-001,CASE-D-001",
        "--retries",
        "0",
        "--no-headline",
        "--out",
        out.to_str().unwrap(),
        "--no-store",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let order = &s["capability_order"];
    assert_eq!(order["monotonic_by_capability"], false, "{order}");
    assert!(order["violations"][0]
        .as_str()
        .unwrap()
        .starts_with("gpt-5.4 "));
    assert_eq!(order["pairwise"][0]["ordering_ok"], false);

    let one = ledgershield(&["compare", "--model", "gpt-4o", "--api-base", &api]);
    assert!(!one.status.success());
    assert!(String::from_utf8_lossy(&one.stderr).contains("at least two --model"));
    let bad_case = ledgershield(&[
        "compare",
        "--model",
        "a",
        "--model",
        "b",
        "--api-base",
        &api,
        "--cases",
        "CASE-Z-9",
    ]);
    assert!(String::from_utf8_lossy(&bad_case.stderr).contains("unknown case id 'CASE-Z-9'"));
    // A dead endpoint: every call fails, nothing is written.
    let dead = dir.join("dead.json");
    let o = ledgershield(&[
        "compare",
        "--model",
        "a",
        "--model",
        "b",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--cases",
        "CASE-B-001",
        "--retries",
        "0",
        "--timeout-secs",
        "1",
        "--no-headline",
        "--out",
        dead.to_str().unwrap(),
        "--no-store",
    ]);
    assert!(!o.status.success());
    assert!(!dead.exists());
}
