//! The blind probe: a fixed, evidence-free action sequence whose every reply is read through
//! [`ls_env::channels::structure`], and the numeric features of what it saw.
//!
//! The probe's actions are a function of the reset's public structure only (its document
//! catalogue and the vendor id of the institutional context), so whatever its replies' structure
//! tells apart is a side channel, not evidence the probe chose to read: every document is OCR'd
//! and every e-mail thread inspected (by catalogue position), the vendor is looked up, its history
//! read, its bank account compared and the ledger searched (with the public vendor id and nothing
//! read from a document), the policy and a PO and receipt lookup with no id are asked for, every
//! intervention is taken and then the probe waits (`lookup_policy`). The same probe is the leak
//! test's (`tests/leak.rs`).

use super::arms::blind_env;
use crate::redteam::{count_features, restated_amount, ALL_INTERVENTIONS};
use ls_core::schema::Case;
use ls_env::{CasePool, ResetRequest, StepEnvelope};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Waits after the interventions.
const PROBE_WAITS: usize = 4;

/// The public vendor id of the reset (`portfolio_context.institutional_context.vendor_id`).
fn vendor_id(reset: &StepEnvelope) -> String {
    reset
        .observation
        .portfolio_context
        .to_map()
        .get("institutional_context")
        .and_then(|c| c.get("vendor_id"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The probe's actions for a reset (module docs).
pub fn probe_actions(reset: &StepEnvelope) -> Vec<(&'static str, Map<String, Value>)> {
    let obj = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let vendor = vendor_id(reset);
    let docs = &reset.observation.visible_documents;
    let mut out: Vec<(&'static str, Map<String, Value>)> = docs
        .iter()
        .map(|d| ("ocr", obj(json!({"doc_id": d.doc_id, "mode": "accurate"}))))
        .collect();
    out.extend(
        docs.iter()
            .filter(|d| d.doc_type.contains("email") || d.doc_type.contains("thread"))
            .map(|d| ("inspect_email_thread", obj(json!({"thread_id": d.doc_id})))),
    );
    for (name, payload) in [
        ("lookup_vendor", json!({"vendor_key": vendor})),
        ("lookup_vendor_history", json!({"vendor_key": vendor})),
        ("lookup_policy", json!({})),
        (
            "compare_bank_account",
            json!({"vendor_key": vendor, "proposed_bank_account": ""}),
        ),
        ("search_ledger", json!({"vendor_key": vendor})),
        ("lookup_po", json!({"po_id": ""})),
        ("lookup_receipt", json!({"receipt_id": ""})),
    ] {
        out.push((name, obj(payload)));
    }
    out.extend(
        ALL_INTERVENTIONS
            .iter()
            .map(|a| (*a, obj(json!({"vendor_key": vendor})))),
    );
    out.extend(std::iter::repeat_n(
        ("lookup_policy", Map::new()),
        PROBE_WAITS,
    ));
    out
}

/// What the probe saw of one case: the structure of every reply (the reset, each step, then
/// `GET /state`), and the reset envelope for the gates' counts.
pub struct ProbeRun {
    pub replies: Vec<Value>,
    pub reset: Option<StepEnvelope>,
}

/// Play the probe on `case` (blind, fresh environment).
pub fn probe(pool: &Arc<CasePool>, case: &Case) -> ProbeRun {
    probe_steps(pool, case, usize::MAX)
}

/// The reset and the probe's first `steps` steps (then `GET /state`).
pub fn probe_steps(pool: &Arc<CasePool>, case: &Case, steps: usize) -> ProbeRun {
    let mut planned: Option<std::vec::IntoIter<(&'static str, Map<String, Value>)>> = None;
    drive(pool, case, false, |last| {
        let it = planned.get_or_insert_with(|| {
            probe_actions(last)
                .into_iter()
                .take(steps)
                .collect::<Vec<_>>()
                .into_iter()
        });
        it.next().map(|(name, payload)| (name.to_owned(), payload))
    })
}

/// The family's checks as the strategies play them — the teacher's tool calls with its controls
/// and certificate off, ids read from the documents, until it would submit — every reply read
/// through [`ls_env::channels::structure`] (then `GET /state`). A diagnostic, not the asserted
/// probe: its actions follow what the documents say (which PO it looks up, whether a receipt line
/// exists), so what its structure tells apart includes the answers of lookups made with ids the
/// documents gave (a `success: false` of a PO the invoice names is the lookup's answer).
pub fn probe_checks(pool: &Arc<CasePool>, case: &Case) -> ProbeRun {
    use crate::runner::Agent;
    let mut teacher = crate::teacher::TeacherAgent::with_config(crate::teacher::TeacherConfig {
        interventions: false,
        certificate: false,
        ..Default::default()
    });
    let mut steps = 0u32;
    drive(pool, case, true, |last| {
        if steps == 0 {
            teacher.begin(last, 7);
        }
        steps += 1;
        let a = teacher.next_action(last);
        (steps <= crate::runner::DRIVER_STEP_CAP && a.action_type != "submit_decision")
            .then_some((a.action_type, a.payload))
    })
}

/// One blind episode on `case` in a fresh environment: `next` chooses each action from the last
/// reply (`None` ends the episode); every reply — the reset, each step, then `GET /state` — is
/// kept as its [`ls_env::channels::structure`]. A step the environment refuses ends the episode
/// when `stop_on_error`, else is skipped (the last reply stays the one `next` reads).
fn drive(
    pool: &Arc<CasePool>,
    case: &Case,
    stop_on_error: bool,
    mut next: impl FnMut(&StepEnvelope) -> Option<(String, Map<String, Value>)>,
) -> ProbeRun {
    let mut env = blind_env(pool);
    let Ok(reset) = env.reset(&ResetRequest {
        case_id: Some(case.case_id.clone()),
        ..Default::default()
    }) else {
        return ProbeRun {
            replies: Vec::new(),
            reset: None,
        };
    };
    let structure = |v: &StepEnvelope| {
        ls_env::channels::structure(&serde_json::to_value(v).unwrap_or_default())
    };
    let mut replies = vec![structure(&reset)];
    let mut last = reset.clone();
    while let Some((name, payload)) = next(&last) {
        let Ok(r) = env.step(&name, &payload) else {
            if stop_on_error {
                break;
            }
            continue;
        };
        replies.push(structure(&r));
        let done = r.done;
        last = r;
        if done {
            break;
        }
    }
    if let Some(s) = env.state() {
        replies.push(ls_env::channels::structure(
            &serde_json::to_value(s).unwrap_or_default(),
        ));
    }
    ProbeRun {
        replies,
        reset: Some(reset),
    }
}

/// FNV-1a of a string, scaled to [0, 1): a categorical code for short strings.
fn code(s: &str) -> f64 {
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h % 1_000_003) as f64 / 1_000_003.0
}

/// Every scalar of a structure as a number, keyed by its path: numbers as they are, booleans
/// 0/1, strings by length and (up to 64 characters) a categorical code, arrays by length and
/// their first eight elements.
pub fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        Value::Array(a) => {
            out.insert(format!("{prefix}#len"), a.len() as f64);
            for (i, x) in a.iter().enumerate().take(8) {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        Value::Number(n) => {
            out.insert(prefix.to_owned(), n.as_f64().unwrap_or(0.0));
        }
        Value::Bool(b) => {
            out.insert(prefix.to_owned(), f64::from(u8::from(*b)));
        }
        Value::String(s) => {
            out.insert(format!("{prefix}#chars"), s.len() as f64);
            if s.len() <= 64 {
                out.insert(format!("{prefix}#code"), code(s));
            }
        }
        Value::Null => {}
    }
}

/// The features of a probe run: every field of every reply's structure (`r{i}.…`), the gates'
/// document counts (`count.…`) and the restated amount (`amount`). A later reply's field is kept
/// only where it differs from the reset's value at the same path (most of a reply — the
/// catalogue, the instruction, the case metadata, memory — repeats the reset's): nothing is lost,
/// since the reset's copy is there, and a missing field reads as "as at the reset".
pub fn features(run: &ProbeRun) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut reset = BTreeMap::new();
    if let Some(r0) = run.replies.first() {
        flatten("", r0, &mut reset);
    }
    for (i, r) in run.replies.iter().enumerate() {
        let mut one = BTreeMap::new();
        flatten("", r, &mut one);
        for (path, v) in one {
            if i == 0 || reset.get(&path) != Some(&v) {
                out.insert(format!("r{i}{path}"), v);
            }
        }
    }
    if let Some(reset) = &run.reset {
        for (k, v) in count_features(reset) {
            out.insert(format!("count.{k}"), v);
        }
        out.insert("amount".into(), restated_amount(reset));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatten_keeps_every_scalar_by_path() {
        let mut out = BTreeMap::new();
        flatten(
            "r0",
            &json!({"a": 1.5, "b": [true, "x"], "c": {"d": null}}),
            &mut out,
        );
        assert_eq!(out["r0.a"], 1.5);
        assert_eq!(out["r0.b#len"], 2.0);
        assert_eq!(out["r0.b[0]"], 1.0);
        assert_eq!(out["r0.b[1]#chars"], 1.0);
        assert!((0.0..1.0).contains(&out["r0.b[1]#code"]));
        assert!(!out.keys().any(|k| k.contains(".c")));
    }
}
