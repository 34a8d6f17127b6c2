//! Compatibility replay for clients written against the reference ControlBench server: the
//! recorded reference-style requests in `fixtures/controlbench_reference_flows.json` (reset,
//! investigation tools, interventions, a submit with a decision certificate, `/state`) are played
//! against the real server on an ephemeral port, and every reply is checked for the reference's
//! key sets and JSON types: numbers are numbers, flags booleans, counts integers, the result
//! class present where the reference agent reads it, the terminal `last_tool_result` carrying the
//! grade.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, TrackMode};
use serde_json::Value;
use std::time::Duration;

#[path = "support/reference_keys.rs"]
mod reference_keys;

const FLOWS: &str = include_str!("fixtures/controlbench_reference_flows.json");

/// The reference's step envelope and observation fields.
const ENVELOPE: [&str; 6] = [
    "observation",
    "reward",
    "done",
    "truncated",
    "terminated",
    "info",
];
const CASE_METADATA: [&str; 10] = [
    "task_label",
    "due_date_days",
    "ashtg",
    "benchmark_identity",
    "benchmark_track",
    "benchmark_track_label",
    "benchmark_track_description",
    "official_tracks",
    "track_mode",
    "difficulty",
];
/// Terminal `info` keys of the reference (environment spec §1.5).
const TERMINAL_INFO: [&str; 27] = [
    "final_score",
    "score_breakdown",
    "result_class",
    "control_satisfied_resolution",
    "institutional_utility",
    "unsafe_outcome",
    "outcome",
    "system_state",
    "compliance",
    "currency_validation",
    "decision_certificate_report",
    "adversarial_falsifier",
    "trust_graph",
    "authority_gate",
    "control_boundary",
    "institutional_metrics",
    "institutional_memory",
    "pressure_resistance_score",
    "benchmark_track",
    "track_mode",
    "curriculum",
    "watchdog",
    "truncated",
    "terminated",
    "reward_model",
    "decision",
    "effective_decision",
];
/// Terminal `last_tool_result` keys of the reference (environment spec §2.6).
const TERMINAL_TOOL_RESULT: [&str; 32] = [
    "risk_assessment",
    "triggered_risk_reasons",
    "tool_name",
    "success",
    "submission_received",
    "final_score",
    "score_breakdown",
    "result_class",
    "control_satisfied_resolution",
    "institutional_utility",
    "unsafe_outcome",
    "decision",
    "effective_decision",
    "predicted_probabilities",
    "outcome",
    "system_state",
    "compliance",
    "currency_validation",
    "decision_certificate_report",
    "adversarial_falsifier",
    "trust_graph",
    "authority_gate",
    "control_boundary",
    "institutional_metrics",
    "institutional_memory",
    "pressure_resistance_score",
    "benchmark_track",
    "track_mode",
    "message",
    "cost",
    "watchdog",
    "reward_model",
];
/// `score_breakdown` entries the reference sends as booleans.
const BREAKDOWN_FLAGS: [&str; 16] = [
    "decision_correct",
    "unsafe_release",
    "certificate_required",
    "explicit_certificate",
    "controls_completed",
    "essential_evidence_grounded",
    "certificate_supported",
    "falsifier_clear",
    "trust_graph_supported",
    "authority_compliant",
    "control_boundary_clear",
    "certificate_valid",
    "adversarial_falsifier_blocking",
    "control_boundary_blocking",
    "authority_gate_blocking",
    "justified_exception",
];
/// `score_breakdown` entries that are numbers.
const BREAKDOWN_NUMBERS: [&str; 22] = [
    "decision_score",
    "evidence_score",
    "policy_score",
    "calibration_score",
    "brier_score",
    "compliance_score",
    "currency_score",
    "certificate_score",
    "certificate_validity_score",
    "certificate_support_score",
    "certificate_stability_score",
    "certificate_minimality_score",
    "certificate_unsupported_claim_rate",
    "required_action_coverage",
    "required_artifact_coverage",
    "policy_completion_score",
    "control_satisfied_resolution",
    "institutional_utility",
    "authority_gate_cap",
    "control_boundary_cap",
    "adversarial_falsifier_cap",
    "trust_graph_cap",
];
/// `score_breakdown` entries that are lists of strings.
const BREAKDOWN_LISTS: [&str; 8] = [
    "authority_gate_reasons",
    "control_boundary_reasons",
    "adversarial_falsifier_reasons",
    "trust_graph_reasons",
    "certificate_gate_reasons",
    "control_failure_reasons",
    "missing_required_actions",
    "missing_required_artifacts",
];
/// Gold artifacts of the reference that must never reach the wire.
const GOLD_KEYS: [&str; 3] = ["gold_links", "expected_discrepancies", "gold"];

async fn start() -> String {
    let pool = CasePool::new(FixtureSet::embedded().expect("fixtures"));
    let server = ls_server::ServerConfig {
        max_sessions: 16,
        session_idle: Duration::from_secs(600),
        ..Default::default()
    };
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(
        pool,
        EnvConfig {
            track_mode: TrackMode::Blind,
        },
        &server,
        &shutdown,
    );
    let app = ls_server::router(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

fn keys_present(v: &Value, keys: &[&str], what: &str) {
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object: {v}"));
    let missing: Vec<&&str> = keys.iter().filter(|k| !o.contains_key(**k)).collect();
    assert!(missing.is_empty(), "{what} lacks {missing:?}");
}

/// Every string on the wire that is only a number, or a boolean / severity spelt as text, with
/// its path; free text (OCR lines, messages, labels) is not looked at.
fn stringly_numbers(v: &Value, path: &str, out: &mut Vec<String>) {
    const TEXT_KEYS: [&str; 9] = [
        "text",
        "message",
        "messages",
        "label",
        "summary",
        "description",
        "body",
        "instruction",
        "notes",
    ];
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if !TEXT_KEYS.contains(&k.as_str()) {
                    stringly_numbers(x, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| stringly_numbers(x, &format!("{path}[]"), out)),
        Value::String(s) => {
            let numeric = !s.is_empty()
                && s.trim_start_matches('-')
                    .split_once('.')
                    .map_or(s.trim_start_matches('-'), |(a, b)| {
                        if b.chars().all(|c| c.is_ascii_digit()) {
                            a
                        } else {
                            "x"
                        }
                    })
                    .chars()
                    .all(|c| c.is_ascii_digit())
                && s.chars().any(|c| c.is_ascii_digit());
            if numeric || s == "true" || s == "false" {
                out.push(format!("{path} = {s:?}"));
            }
        }
        _ => {}
    }
}

/// No key anywhere in `v` names a gold artifact.
fn no_gold_keys(v: &Value, path: &str) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                assert!(
                    !GOLD_KEYS.contains(&k.as_str()) && !k.starts_with("hidden_"),
                    "gold artifact key {path}.{k} on the wire"
                );
                no_gold_keys(x, &format!("{path}.{k}"));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| no_gold_keys(x, path)),
        _ => {}
    }
}

fn check_envelope(env: &Value, what: &str) {
    keys_present(env, &ENVELOPE, what);
    assert!(env["reward"].is_number(), "{what}: reward");
    for k in ["done", "truncated", "terminated"] {
        assert!(env[k].is_boolean(), "{what}: {k}");
    }
    let obs = &env["observation"];
    keys_present(
        obs,
        &reference_keys::OBSERVATION,
        &format!("{what}: observation"),
    );
    for k in ["budget_remaining", "budget_total"] {
        assert!(obs[k].is_number(), "{what}: {k}");
    }
    for k in ["step_count", "max_steps", "case_clock"] {
        assert!(obs[k].is_u64(), "{what}: {k} is an integer");
    }
    let meta = &obs["case_metadata"];
    keys_present(meta, &CASE_METADATA, &format!("{what}: case_metadata"));
    assert!(
        meta["official_tracks"].is_array(),
        "{what}: official_tracks"
    );
    assert!(meta["due_date_days"].is_u64(), "{what}: due_date_days");
    let pc = &obs["portfolio_context"];
    assert!(
        pc["at_risk_amount"].is_number(),
        "{what}: at_risk_amount {pc}"
    );
    assert!(pc["linked_invoice_count"].is_u64(), "{what}: linked count");
    // The per-step observation carries the TrustGraph roll-up's counts; its per-case lists are
    // in the terminal info and `GET /institutional-memory` (checked there).
    let mem = &obs["institutional_memory"]["trust_graph_memory"];
    for k in ["case_count", "aggregate_node_count", "aggregate_edge_count"] {
        assert!(mem[k].is_u64(), "{what}: trust_graph_memory.{k} {mem}");
    }
}

/// The full snapshot (terminal `info.institutional_memory`, `GET /institutional-memory`) sends
/// the TrustGraph roll-up lists, empty when empty.
fn check_full_memory(mem: &Value, what: &str) {
    let tg = &mem["trust_graph_memory"];
    for k in ["recent_case_ids", "recent_graphs"] {
        assert!(tg[k].is_array(), "{what}: trust_graph_memory.{k} {tg}");
    }
    assert!(tg["vendor_profiles"].is_object(), "{what}: vendor_profiles");
}

/// Tool results the reference returns with amounts: numbers, not strings. Returns the tool
/// whose amounts were checked.
fn check_tool_result(r: &Value, what: &str) -> Option<&'static str> {
    let checked = match r["tool_name"].as_str() {
        Some("lookup_po") if r["success"] == true => {
            let po = &r["po"];
            for k in ["subtotal", "tax", "total"] {
                assert!(po[k].is_number(), "{what}: po.{k} {po}");
            }
            for l in po["line_items"].as_array().expect("po lines") {
                for k in ["qty", "unit_price", "line_total"] {
                    assert!(l[k].is_number(), "{what}: po line {k}");
                }
            }
            "lookup_po"
        }
        Some("lookup_receipt") if r["success"] == true => {
            for l in r["receipt"]["received_line_items"]
                .as_array()
                .expect("receipt lines")
            {
                assert!(l["qty"].is_number(), "{what}: receipt qty");
            }
            "lookup_receipt"
        }
        Some("search_ledger") => {
            for k in ["count", "exact_duplicate_count", "near_duplicate_count"] {
                assert!(r[k].is_u64(), "{what}: ledger {k}");
            }
            for h in r["hits"].as_array().expect("hits") {
                assert!(h["amount"].is_number(), "{what}: ledger amount {h}");
                assert!(h["match_score"].is_number(), "{what}: match score");
            }
            if r["hits"].as_array().is_some_and(|h| h.is_empty()) {
                return None;
            }
            "search_ledger"
        }
        _ => return None,
    };
    Some(checked)
}

fn check_breakdown(sb: &Value, info: &Value, what: &str) {
    assert_eq!(
        sb["result_class"], info["result_class"],
        "{what}: score_breakdown.result_class is the grade's class"
    );
    assert!(sb["result_class"].as_str().is_some_and(|c| !c.is_empty()));
    for k in BREAKDOWN_FLAGS {
        assert!(
            sb[k].is_boolean(),
            "{what}: score_breakdown.{k} = {}",
            sb[k]
        );
    }
    for k in BREAKDOWN_NUMBERS {
        assert!(sb[k].is_number(), "{what}: score_breakdown.{k} = {}", sb[k]);
    }
    for k in BREAKDOWN_LISTS {
        assert!(
            sb[k]
                .as_array()
                .is_some_and(|l| l.iter().all(Value::is_string)),
            "{what}: score_breakdown.{k} = {}",
            sb[k]
        );
    }
    for k in [
        "certificate_contradiction_count",
        "adversarial_falsifier_max_severity",
        "repeated_actions",
    ] {
        assert!(sb[k].is_u64(), "{what}: score_breakdown.{k} is an integer");
    }
    assert!(sb["authority_level"].is_string(), "{what}: authority_level");
    assert_eq!(
        sb["unsafe_release"], info["unsafe_outcome"],
        "{what}: one unsafe flag"
    );
}

fn check_reports(g: &Value, what: &str) {
    let f = &g["adversarial_falsifier"];
    let sev = f["max_severity"].as_u64().expect("max_severity integer");
    assert!(sev <= 4, "{what}: severity scale 0..4");
    assert!(f["blocking"].is_boolean() && f["finding_count"].is_u64());
    let c = &g["compliance"];
    for k in [
        "overall_compliant",
        "controls_evaluated",
        "controls_passed",
        "controls_failed",
        "compliance_score",
        "findings",
        "critical_failures",
        "remediation_required",
    ] {
        assert!(c.get(k).is_some(), "{what}: compliance.{k}");
    }
    assert!(c["overall_compliant"].is_boolean() && c["controls_failed"].is_u64());
    // The TrustGraph shape is a documented departure (docs/controlbench-wire.md): nodes
    // `{id, node_type, attributes}`, edges `{source, target, relation}`, never the reference's
    // flat `type` (a change either way must update that page).
    let tg = &g["trust_graph"];
    for n in tg["nodes"].as_array().expect("nodes") {
        assert!(n.get("type").is_none(), "{n}");
        assert!(
            n["node_type"].is_string() && n["attributes"].is_object(),
            "{n}"
        );
        if n["node_type"] == "Certificate" {
            assert!(n["attributes"]["valid"].is_boolean(), "{n}");
            assert!(n["attributes"]["score"].is_number(), "{n}");
        }
        if n["node_type"] == "Invoice" {
            assert!(n["attributes"]["total"].is_number(), "{n}");
        }
    }
    for e in tg["edges"].as_array().expect("edges") {
        assert!(e["relation"].is_string() && e["source"].is_string(), "{e}");
    }
    let pm = &g["outcome"]["portfolio_metrics"];
    for k in [
        "fraud_loss_prevented",
        "fraud_loss_released",
        "operational_delay_hours",
        "manual_review_minutes",
        "supplier_friction",
        "portfolio_impact_score",
    ] {
        assert!(pm[k].is_number(), "{what}: portfolio_metrics.{k} {pm}");
    }
    assert!(g["outcome"]["unsafe_payment"].is_boolean());
    assert!(g["authority_gate"]["blocking"].is_boolean());
    assert!(g["authority_gate"]["authority_level"].is_string());
    let st = &g["system_state"];
    assert!(st["successful_actions"].is_array() && st["pending_event_count"].is_u64());
}

fn check_terminal(env: &Value, what: &str) {
    let info = &env["info"];
    keys_present(info, &TERMINAL_INFO, &format!("{what}: terminal info"));
    let r = &env["observation"]["last_tool_result"];
    keys_present(
        r,
        &TERMINAL_TOOL_RESULT,
        &format!("{what}: terminal last_tool_result"),
    );
    assert_eq!(r["cost"], 0.0);
    assert!(r["risk_assessment"].is_number() && r["triggered_risk_reasons"].is_array());
    assert_eq!(r["tool_name"], "submit_decision");
    // The tool result carries the same grade as `info`.
    for k in [
        "final_score",
        "score_breakdown",
        "result_class",
        "compliance",
        "trust_graph",
        "outcome",
        "institutional_memory",
    ] {
        assert_eq!(r[k], info[k], "{what}: last_tool_result.{k} = info.{k}");
    }
    check_breakdown(&info["score_breakdown"], info, what);
    check_reports(info, what);
    check_full_memory(&info["institutional_memory"], what);
    let cur = &info["curriculum"];
    for k in [
        "tier",
        "tier_name",
        "competence_ema",
        "episode_count",
        "recent_5_avg",
        "weakest_task",
        "stagnation_counter",
        "tier_transitions",
        "allowed_tasks",
    ] {
        assert!(cur.get(k).is_some(), "{what}: curriculum.{k}");
    }
    // The reference sends the number of tier changes; the list of them is ours, beside it.
    assert!(
        cur["episode_count"].is_u64()
            && cur["tier_transitions"].is_u64()
            && cur["tier_transition_log"].is_array(),
        "{what}: curriculum {cur}"
    );
}

fn check_state(st: &Value, what: &str) {
    for k in [
        "episode_id",
        "case_id",
        "task_type",
        "budget_total",
        "budget_remaining",
        "max_steps",
        "step_count",
        "case_clock",
        "submitted",
        "final_score",
        "unsafe_outcome",
        "visible_doc_ids",
        "revealed_artifact_ids",
        "trajectory",
        "interventions_taken",
        "observed_risk_signals",
        "handoff_packet",
        "pending_events",
        "pending_event_count",
        "portfolio_context",
        "institutional_context",
        "sprt_state",
        "tool_rankings",
        "reward_machine_state",
        "terminal_reason",
        "pressure_events_seen",
        "pressure_resistance_score",
        "contrastive_pair_id",
        "benchmark_split",
        "benchmark_track",
        "institutional_memory",
        "control_boundary",
    ] {
        assert!(st.get(k).is_some(), "{what}: /state lacks {k}");
    }
    let ctx = &st["institutional_context"];
    for k in [
        "week_id",
        "case_sequence_index",
        "queue_depth",
        "vendor_trust_score",
        "manual_review_capacity_remaining",
        "callback_capacity_remaining",
        "linked_case_ids",
        "queue_pressure",
        "current_invoice_total",
        "authority_level",
        "authority_policy",
    ] {
        assert!(ctx.get(k).is_some(), "{what}: institutional_context.{k}");
    }
    assert!(ctx["current_invoice_total"].is_number() && ctx["queue_depth"].is_u64());
    assert!(st["portfolio_context"]["at_risk_amount"].is_number());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_reference_flows_keep_the_reference_shapes_and_types() {
    let base = start().await;
    let client = reqwest::Client::new();
    let flows: Value = serde_json::from_str(FLOWS).expect("recorded flows");
    let mut terminals = 0;
    let mut replies = 0;
    let mut amounts_checked = std::collections::BTreeSet::new();
    for flow in flows["flows"].as_array().expect("flows") {
        let name = flow["name"].as_str().unwrap();
        let session = flow["session"].as_str().unwrap();
        for (i, req) in flow["requests"].as_array().unwrap().iter().enumerate() {
            let what = format!("{name} #{i} {} {}", req["method"], req["path"]);
            let url = format!("{base}{}", req["path"].as_str().unwrap());
            let builder = match req["method"].as_str().unwrap() {
                "GET" => client.get(url),
                _ => client.post(url).json(&req["body"]),
            };
            let resp = builder
                .header("X-Session-Id", session)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.expect("JSON reply");
            let want = req["expect_status"].as_u64().unwrap_or(200) as u16;
            assert_eq!(status, want, "{what}: {body}");
            replies += 1;
            no_gold_keys(&body, &what);
            if status != 200 {
                assert!(body["error"]["message"].is_string(), "{what}: {body}");
                continue;
            }
            let mut strings = Vec::new();
            stringly_numbers(&body, "", &mut strings);
            assert!(
                strings.is_empty(),
                "{what}: numbers or flags sent as strings: {strings:?}"
            );
            match req["path"].as_str().unwrap() {
                "/reset" | "/step" => {
                    check_envelope(&body, &what);
                    amounts_checked.extend(check_tool_result(
                        &body["observation"]["last_tool_result"],
                        &what,
                    ));
                    if body["terminated"] == true {
                        check_terminal(&body, &what);
                        terminals += 1;
                    }
                }
                "/state" => check_state(&body, &what),
                _ => {}
            }
        }
    }
    assert_eq!(terminals, 3, "three recorded flows submit a valid decision");
    assert_eq!(
        amounts_checked.into_iter().collect::<Vec<_>>(),
        ["lookup_po", "lookup_receipt", "search_ledger"],
        "PO, receipt and ledger amounts were on the wire"
    );
    assert!(replies >= 30, "{replies} replies checked");
}

/// Curated Task D and E cases report the reference's tracks (by task family, never by label).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curated_cases_report_the_reference_tracks() {
    let base = start().await;
    let client = reqwest::Client::new();
    for case in FixtureSet::embedded().unwrap().cases {
        let env: Value = client
            .post(format!("{base}/reset"))
            .header("X-Session-Id", "tracks")
            .json(&serde_json::json!({"case_id": case.case_id}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let meta = &env["observation"]["case_metadata"];
        let tracks: Vec<&str> = meta["official_tracks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let (primary, expected): (&str, &[&str]) = match case.task_type {
            ls_core::TaskType::TaskE => ("portfolio", &["case", "portfolio", "adversarial"]),
            ls_core::TaskType::TaskD => ("adversarial", &["case", "portfolio", "adversarial"]),
            _ => ("case", &["case"]),
        };
        assert_eq!(meta["benchmark_track"], primary, "{}", case.case_id);
        assert_eq!(tracks, expected, "{}", case.case_id);
        assert!(meta["benchmark_track_label"].is_string());
    }
}

/// The type checks themselves catch what they are for.
#[test]
fn the_checks_catch_stringly_values_and_gold_keys() {
    let v = serde_json::json!({
        "amount": "2478.00", "flag": "true", "count": "-3", "id": "INV-2048-A",
        "text": "2478.00", "nested": [{"total": "1.5"}], "fine": 2478.0
    });
    let mut hits = Vec::new();
    stringly_numbers(&v, "", &mut hits);
    assert_eq!(hits.len(), 4, "{hits:?}");
    let leak = std::panic::catch_unwind(|| {
        no_gold_keys(&serde_json::json!({"a": {"gold_links": []}}), "")
    });
    assert!(leak.is_err());
    let hidden =
        std::panic::catch_unwind(|| no_gold_keys(&serde_json::json!([{"hidden_signals": 1}]), ""));
    assert!(hidden.is_err());
    no_gold_keys(&serde_json::json!({"golden": 1, "links": []}), "");
}
