//! `python/ledgershield/action_schemas.json` is generated from the one action declaration
//! (`ls_core::enums::ActionName` and `ls_env::action::payload_schema`): the Python ToolEnv builds
//! its tool methods from it. This test fails when the file is stale; `LS_WRITE_ACTION_SCHEMAS=1`
//! rewrites it.

use ls_core::enums::{ActionKind, ActionName};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The tool's one-line description (as the MCP tool list words it).
fn description(a: ActionName) -> String {
    let kind = match a.kind() {
        ActionKind::Investigation => "Investigation tool",
        ActionKind::Intervention => "Intervention",
        ActionKind::Final => "Final action: ends the episode and grades it",
    };
    format!(
        "{kind} `{}` (cost {} budget units).",
        a.as_str(),
        a.base_cost()
    )
}

fn generated() -> String {
    let actions: Vec<Value> = ActionName::ALL
        .iter()
        .map(|a| {
            json!({
                "name": a.as_str(),
                "kind": format!("{:?}", a.kind()).to_lowercase(),
                "description": description(*a),
                "schema": ls_env::action::payload_schema(*a),
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({
        "generated_by": "cargo test -p ls-agents --test action_schemas (LS_WRITE_ACTION_SCHEMAS=1 rewrites)",
        "actions": actions,
    }))
    .unwrap()
        + "\n"
}

#[test]
fn the_python_action_schemas_are_the_declaration() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/ledgershield/action_schemas.json");
    let want = generated();
    if std::env::var("LS_WRITE_ACTION_SCHEMAS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run LS_WRITE_ACTION_SCHEMAS=1 cargo test -p ls-agents --test action_schemas",
        path.display()
    );
    // Every catalogued action, once, in catalogue order.
    let v: Value = serde_json::from_str(&have).unwrap();
    let names: Vec<&str> = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    let catalogue: Vec<&str> = ActionName::ALL.iter().map(|a| a.as_str()).collect();
    assert_eq!(names, catalogue);
}
