//! Every investigation tool's reply is its declared type in `ls_core::replies`: played on every
//! curated case and on generated ones of every kind with the arguments an analyst would use, each reply's
//! own fields (the result without its structure keys) read into the type from the reply's JSON
//! text and written back are the same JSON. A field the environment adds, drops, renames or
//! retypes fails here, naming the tool, the case and the field.

use ls_core::replies::{
    BankReply, CropReply, HistoryReply, LedgerReply, OcrReply, PoReply, PolicyReply, ReceiptReply,
    ThreadReply, VendorReply, ZoomReply,
};
use ls_core::FixtureSet;
use ls_env::channels::RESULT_STRUCTURE_KEYS;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One tool call and the type its reply must be.
struct Call {
    tool: &'static str,
    payload: Value,
    check: fn(&str) -> Result<Value, String>,
}

/// Read the reply text into `T` and write it back as JSON.
fn through<T: Serialize + DeserializeOwned>(text: &str) -> Result<Value, String> {
    let typed: T = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let back = serde_json::to_string(&typed).map_err(|e| e.to_string())?;
    serde_json::from_str(&back).map_err(|e| e.to_string())
}

fn call(tool: &'static str, payload: Value, check: fn(&str) -> Result<Value, String>) -> Call {
    Call {
        tool,
        payload,
        check,
    }
}

/// The calls an analyst makes on `case`: every vendor, PO, receipt, thread and policy it names.
fn calls(set: &FixtureSet, case: &ls_core::Case) -> Vec<Call> {
    let world = set.world(case);
    let mut out = vec![
        call("lookup_policy", json!({}), through::<PolicyReply>),
        call("lookup_vendor_history", json!({}), through::<HistoryReply>),
    ];
    if let Some(rule) = world.policy_rules.first() {
        out.push(call(
            "lookup_policy",
            json!({"rule_id": rule.rule_id}),
            through::<PolicyReply>,
        ));
    }
    for v in world.vendors.iter().take(4) {
        let key = &v.vendor_key;
        out.push(call(
            "lookup_vendor",
            json!({"vendor_key": key}),
            through::<VendorReply>,
        ));
        out.push(call(
            "lookup_vendor_history",
            json!({"vendor_key": key}),
            through::<HistoryReply>,
        ));
        out.push(call(
            "compare_bank_account",
            json!({"vendor_key": key, "proposed_bank_account": v.bank_account}),
            through::<BankReply>,
        ));
        out.push(call(
            "compare_bank_account",
            json!({"vendor_key": key, "proposed_bank_account": "GB00 0000 0000 0000"}),
            through::<BankReply>,
        ));
        out.push(call(
            "compare_bank_account",
            json!({"vendor_key": key}),
            through::<BankReply>,
        ));
        out.push(call(
            "search_ledger",
            json!({"vendor_key": key}),
            through::<LedgerReply>,
        ));
    }
    for row in world.ledger_index.iter().take(3) {
        out.push(call(
            "search_ledger",
            json!({"vendor_key": row.vendor_key, "invoice_number": row.invoice_number,
                "amount": row.amount.to_string()}),
            through::<LedgerReply>,
        ));
    }
    for po in world.po_records.iter().take(4) {
        out.push(call(
            "lookup_po",
            json!({"po_id": po.po_id}),
            through::<PoReply>,
        ));
    }
    for r in world.receipts.iter().take(4) {
        out.push(call(
            "lookup_receipt",
            json!({"receipt_id": r.receipt_id}),
            through::<ReceiptReply>,
        ));
    }
    for d in &case.documents {
        let id = &d.doc_id;
        for payload in [
            json!({"doc_id": id, "mode": "fast"}),
            json!({"doc_id": id, "mode": "accurate"}),
            json!({"doc_id": id, "mode": "accurate", "page": 1}),
            json!({"doc_id": id, "page": 1, "bbox": [0, 0, 400, 400]}),
        ] {
            out.push(call("ocr", payload, through::<OcrReply>));
        }
        let region = json!({"doc_id": id, "page": 1, "bbox": [0, 0, 600, 800]});
        out.push(call("zoom", region.clone(), through::<ZoomReply>));
        out.push(call("get_doc_crop", region, through::<CropReply>));
        out.push(call(
            "get_doc_crop",
            json!({"doc_id": id}),
            through::<CropReply>,
        ));
    }
    let threads = world.email_threads.iter().map(|t| t.thread_id.clone());
    let mails = case
        .documents
        .iter()
        .filter(|d| d.doc_type == "email")
        .map(|d| d.doc_id.clone());
    for id in threads.take(4).chain(mails) {
        out.push(call(
            "inspect_email_thread",
            json!({"thread_id": id}),
            through::<ThreadReply>,
        ));
    }
    out
}

/// The reply's own fields: the result without its structure keys and its message.
fn own_fields(result: &Map<String, Value>) -> Value {
    let mut own = result.clone();
    for k in RESULT_STRUCTURE_KEYS {
        own.shift_remove(k);
    }
    own.shift_remove("message");
    Value::Object(own)
}

#[test]
fn every_tool_reply_is_its_declared_type() {
    let set = FixtureSet::embedded().unwrap();
    let cases = ls_gen::pool::curated_and_every_pool_kind(&set, 11, 4);
    let pool = Arc::new(CasePool::from_parts(
        cases.iter().cloned().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ));
    let mut played: BTreeMap<&str, usize> = BTreeMap::new();
    for case in &cases {
        for c in calls(&set, case) {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            env.reset(&ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            })
            .unwrap();
            let payload = c.payload.as_object().unwrap();
            let reply = env.step(c.tool, payload).unwrap();
            let result = reply.observation.last_tool_result.to_map();
            if result.get("success") != Some(&json!(true)) {
                continue;
            }
            let text = serde_json::to_string(&reply.observation.last_tool_result).unwrap();
            let typed = (c.check)(&text).unwrap_or_else(|e| {
                panic!("{} {} {}: {e}\n{text}", case.case_id, c.tool, c.payload)
            });
            assert_eq!(
                typed,
                own_fields(&result),
                "{} {} {}: the reply's fields are not its type's",
                case.case_id,
                c.tool,
                c.payload
            );
            *played.entry(c.tool).or_default() += 1;
        }
    }
    // Every tool with a reply type was played successfully, and more than once.
    for tool in [
        "ocr",
        "zoom",
        "get_doc_crop",
        "lookup_policy",
        "lookup_vendor",
        "lookup_vendor_history",
        "compare_bank_account",
        "search_ledger",
        "lookup_po",
        "lookup_receipt",
        "inspect_email_thread",
    ] {
        assert!(
            played.get(tool).copied().unwrap_or(0) > 5,
            "{tool}: {played:?}"
        );
    }
}

#[test]
fn a_reply_of_another_tool_is_not_read_as_this_one() {
    // The types are told apart by their fields: a vendor lookup is not a purchase order.
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let case = &set.cases[0];
    let key = &set.world(case).vendors[0].vendor_key;
    let mut env = Environment::new(pool, EnvConfig::default());
    env.reset(&ResetRequest {
        case_id: Some(case.case_id.clone()),
        ..Default::default()
    })
    .unwrap();
    let reply = env
        .step(
            "lookup_vendor",
            json!({"vendor_key": key}).as_object().unwrap(),
        )
        .unwrap();
    let text = serde_json::to_string(&reply.observation.last_tool_result).unwrap();
    assert!(through::<VendorReply>(&text).is_ok());
    assert!(through::<PoReply>(&text).unwrap_err().contains("po"));
    assert!(through::<BankReply>(&text).is_err());
}
