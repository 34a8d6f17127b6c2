//! Agent-side guardrails for the `llm` agent's submissions (an explicit assistance option, off by
//! default, recorded in the run's provenance: `crate::assist`).
//!
//! Two things, both from what the episode showed the agent and nothing else:
//!
//! 1. **Sanitise the submission to the contract.** Every key the submission does not read is
//!    dropped; each field takes its declared JSON type (`ls_core::submission::Submission::FIELDS`:
//!    a number written as text is read, one string where a list is declared becomes a one-item
//!    list, a value of the wrong kind is dropped), so the environment never refuses the payload
//!    for a type error; probabilities are clamped to [0, 1]; the decision word is read leniently
//!    (`escalate fraud` → `ESCALATE_FRAUD`, an unknown word is left for the grade to judge); code
//!    lists are canonical codes, once each, unknown ones dropped; evidence entries keep only token
//!    ids and record ids the episode revealed (at most three tokens an entry, the document, page
//!    and box filled in from the revealed token), and an entry that cites nothing revealed is
//!    dropped.
//! 2. **Attach the evidence ids the episode revealed** where the contract asks for them: a PAY
//!    cites the verification records its family requires (`lookup_policy`'s
//!    `submission_requirements`: the PO and goods receipt looked up for Task B, the vendor master
//!    record a bank comparison *matched* for Tasks C–E), and a claimed `bank_account_mismatch` or
//!    `duplicate_near_match` without evidence cites the record the tool returned (the vendor
//!    record whose comparison failed, the ledger entry a search matched).
//!
//! It never changes the decision or adds a reason the model did not name: a model's miss stays a
//! miss in its grade.

use crate::action::Action;
use crate::client::tool_reply;
use ls_core::enums::Decision;
use ls_core::replies::{
    BankReply, LedgerReply, OcrReply, PoReply, ReceiptReply, ResultHead, ShownToken, ZoomReply,
};
use ls_core::submission::Submission;
use ls_core::ReasonCode;
use ls_env::StepEnvelope;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most token ids one evidence entry keeps (the grade reads no more).
pub const MAX_ENTRY_TOKENS: usize = 3;
/// Least ledger match score for a search hit to count as the same bill.
const LEDGER_MATCH: f64 = 0.8;
/// The submission fields that list reason codes.
const CODE_LISTS: [&str; 4] = [
    "reason_codes",
    "fraud_flags",
    "discrepancies",
    "campaign_signals",
];
/// Record keys an evidence entry may cite instead of tokens.
const RECORD_KEYS: [&str; 5] = [
    "po_id",
    "receipt_id",
    "vendor_key",
    "ledger_id",
    "artifact_id",
];

#[derive(Debug, Clone, PartialEq)]
struct Place {
    doc_id: String,
    page: u32,
    bbox: [f64; 4],
}

/// What the episode revealed that a submission may cite.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Guardrails {
    task_type: String,
    tokens: BTreeMap<String, Place>,
    pos: Vec<String>,
    receipts: Vec<String>,
    matched_vendors: Vec<String>,
    mismatched_vendors: Vec<String>,
    ledger_hits: Vec<String>,
    artifacts: Vec<String>,
}

fn push_new(list: &mut Vec<String>, v: &str) {
    let v = v.trim();
    if !v.is_empty() && !list.iter().any(|x| x == v) {
        list.push(v.to_owned());
    }
}

impl Guardrails {
    /// Fold one reply in: the case's family, the artifacts delivered, and what a successful
    /// tool showed (each reply read once into its type, `ls_core::replies`).
    pub fn observe(&mut self, env: &StepEnvelope) {
        let o = &env.observation;
        if !o.task_type.is_empty() {
            self.task_type = o.task_type.clone();
        }
        for a in &o.revealed_artifacts {
            push_new(&mut self.artifacts, a.artifact_id.as_str());
        }
        match tool_reply::<ResultHead>(env) {
            Some(head) if head.success => self.tool_records(&head.tool_name, env),
            _ => {}
        }
    }

    fn saw_tokens(&mut self, doc_id: &str, tokens: &[ShownToken<'_>]) {
        for t in tokens {
            let place = Place {
                doc_id: doc_id.to_owned(),
                page: t.page.max(1),
                bbox: t.bbox,
            };
            self.tokens.insert(t.token_id.to_string(), place);
        }
    }

    fn tool_records(&mut self, tool: &str, env: &StepEnvelope) {
        match tool {
            "ocr" => {
                if let Some(r) = tool_reply::<OcrReply>(env) {
                    self.saw_tokens(&r.doc_id, &r.tokens);
                }
            }
            "zoom" => {
                if let Some(r) = tool_reply::<ZoomReply>(env) {
                    self.saw_tokens(&r.doc_id, &r.focus_tokens);
                }
            }
            "lookup_po" => {
                if let Some(r) = tool_reply::<PoReply>(env) {
                    push_new(&mut self.pos, &r.po.po_id);
                }
            }
            "lookup_receipt" => {
                if let Some(r) = tool_reply::<ReceiptReply>(env) {
                    push_new(&mut self.receipts, &r.receipt.receipt_id);
                }
            }
            "compare_bank_account" => {
                if let Some(r) = tool_reply::<BankReply>(env) {
                    let list = if r.matched {
                        &mut self.matched_vendors
                    } else {
                        &mut self.mismatched_vendors
                    };
                    push_new(list, &r.vendor_key);
                }
            }
            "search_ledger" => {
                for h in tool_reply::<LedgerReply>(env)
                    .into_iter()
                    .flat_map(|r| r.hits)
                {
                    if h.match_score >= LEDGER_MATCH {
                        push_new(&mut self.ledger_hits, &h.ledger_id);
                    }
                }
            }
            _ => {}
        }
    }

    fn record_revealed(&self, key: &str, id: &str) -> bool {
        let list = match key {
            "po_id" => &self.pos,
            "receipt_id" => &self.receipts,
            "vendor_key" => {
                return self
                    .matched_vendors
                    .iter()
                    .chain(&self.mismatched_vendors)
                    .any(|v| v == id)
            }
            "ledger_id" => &self.ledger_hits,
            _ => &self.artifacts,
        };
        list.iter().any(|x| x == id)
    }

    /// Apply the guardrails to `action` when it is a submission; returns what changed (empty for
    /// any other action, or a submission already within the contract).
    pub fn apply(&self, action: &mut Action) -> Vec<String> {
        if action.action_type != "submit_decision" {
            return Vec::new();
        }
        let mut notes = Vec::new();
        let mut p = sanitize(std::mem::take(&mut action.payload), &mut notes);
        if let Some(Value::Object(ev)) = p.remove("evidence_map") {
            let kept = self.grounded(ev, &mut notes);
            p.insert("evidence_map".into(), Value::Object(kept));
        }
        self.attach(&mut p, &mut notes);
        action.payload = p;
        notes
    }

    /// The evidence entries that cite something the episode revealed.
    fn grounded(&self, ev: Map<String, Value>, notes: &mut Vec<String>) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, v) in ev {
            let key = ReasonCode::canonical(&key)
                .map(|c| c.as_str().to_owned())
                .unwrap_or(key);
            let entry = match v {
                Value::Array(a) => a.into_iter().find(Value::is_object),
                o @ Value::Object(_) => Some(o),
                _ => None,
            };
            match entry.and_then(|e| self.ground_entry(e)) {
                Some(e) => {
                    out.insert(key, e);
                }
                None => notes.push(format!("evidence {key}: cites nothing revealed, dropped")),
            }
        }
        out
    }

    fn ground_entry(&self, e: Value) -> Option<Value> {
        let Value::Object(mut o) = e else { return None };
        let mut tokens: Vec<String> = Vec::new();
        for t in o
            .get("token_ids")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|t| self.tokens.contains_key(*t))
        {
            if tokens.len() < MAX_ENTRY_TOKENS {
                push_new(&mut tokens, t);
            }
        }
        o.remove("token_ids");
        for k in RECORD_KEYS {
            let keep = o
                .get(k)
                .and_then(Value::as_str)
                .is_some_and(|id| self.record_revealed(k, id.trim()));
            if !keep {
                o.remove(k);
            }
        }
        let has_record = RECORD_KEYS.iter().any(|k| o.contains_key(*k));
        if let Some(first) = tokens.first().and_then(|t| self.tokens.get(t)) {
            o.insert("doc_id".into(), json!(first.doc_id));
            o.insert("page".into(), json!(first.page));
            o.insert("bbox".into(), json!(first.bbox));
            o.insert("token_ids".into(), json!(tokens));
        } else if !has_record {
            return None;
        }
        Some(Value::Object(o))
    }

    /// Attach the records the contract asks for (see the module documentation).
    fn attach(&self, p: &mut Map<String, Value>, notes: &mut Vec<String>) {
        let decision = p
            .get("decision")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let claimed: Vec<String> = CODE_LISTS
            .iter()
            .filter_map(|k| p.get(*k).and_then(Value::as_array))
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let ev = p
            .entry("evidence_map")
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(ev) = ev else { return };
        let cites = |ev: &Map<String, Value>, key: &str| {
            ev.values()
                .any(|v| v.get(key).and_then(Value::as_str).is_some())
        };
        let mut add = |ev: &mut Map<String, Value>, name: &str, key: &str, id: Option<&String>| {
            if let (false, Some(id)) = (cites(ev, key), id) {
                ev.insert(name.into(), json!({ key: id }));
                notes.push(format!("evidence {name}: attached {key} {id}"));
            }
        };
        if decision == Decision::Pay.as_str() {
            match self.task_type.as_str() {
                "task_b" => {
                    add(ev, "three_way_match_po", "po_id", self.pos.first());
                    add(
                        ev,
                        "three_way_match_receipt",
                        "receipt_id",
                        self.receipts.first(),
                    );
                }
                "task_c" | "task_d" | "task_e" => add(
                    ev,
                    "bank_account_verified",
                    "vendor_key",
                    self.matched_vendors.first(),
                ),
                _ => {}
            }
            return;
        }
        for code in claimed {
            if ev.contains_key(&code) {
                continue;
            }
            let (key, id) = match ReasonCode::canonical(&code) {
                Some(ReasonCode::BankAccountMismatch) => {
                    ("vendor_key", self.mismatched_vendors.first())
                }
                Some(ReasonCode::DuplicateNearMatch) => ("ledger_id", self.ledger_hits.first()),
                _ => continue,
            };
            if let Some(id) = id {
                ev.insert(code.clone(), json!({ key: id }));
                notes.push(format!("evidence {code}: attached {key} {id}"));
            }
        }
    }
}

/// The payload with every field in its declared type (see the module documentation).
fn sanitize(payload: Map<String, Value>, notes: &mut Vec<String>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in payload {
        let Some(spec) = Submission::FIELDS.iter().find(|f| f.name == k) else {
            notes.push(format!("{k}: not a submission field, dropped"));
            continue;
        };
        let typed = match spec.json_type {
            Some("number") => number(&v).map(|x| {
                if matches!(k.as_str(), "confidence" | "risk_score") {
                    json!(x.clamp(0.0, 1.0))
                } else {
                    json!(x)
                }
            }),
            Some("strings") => strings(&v).map(|s| json!(s)),
            Some("object") => v.is_object().then_some(v.clone()),
            Some("array") => v.is_array().then_some(v.clone()),
            Some("string") => match &v {
                Value::String(_) => Some(v.clone()),
                Value::Number(_) | Value::Bool(_) => Some(json!(v.to_string())),
                _ => None,
            },
            _ => Some(v.clone()),
        };
        match typed {
            Some(t) => {
                out.insert(k, t);
            }
            None => notes.push(format!("{k}: not of its declared type, dropped")),
        }
    }
    if let Some(d) = out.get("decision").and_then(Value::as_str) {
        if let Some(dec) = Decision::parse_lenient(d) {
            out.insert("decision".into(), json!(dec.as_str()));
        }
    }
    for k in CODE_LISTS {
        if let Some(Value::Array(items)) = out.get(k) {
            let mut codes: Vec<&'static str> = Vec::new();
            for c in items.iter().filter_map(Value::as_str) {
                match ReasonCode::canonical(c) {
                    Some(code) if !codes.contains(&code.as_str()) => codes.push(code.as_str()),
                    Some(_) => {}
                    None => notes.push(format!("{k}: unknown code {c:?} dropped")),
                }
            }
            out.insert(k.into(), json!(codes));
        }
    }
    out
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().trim_end_matches('%').trim().parse().ok(),
        _ => None,
    }
    .filter(|x: &f64| x.is_finite())
}

fn strings(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::String(s) => Some(
            s.split([',', ';'])
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(|x| match x {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guardrails that watched `actions` played on the curated case `case`, with the replies.
    fn played(case: &str, actions: &[(&str, Value)]) -> (Guardrails, Vec<StepEnvelope>) {
        use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
        let pool = std::sync::Arc::new(CasePool::new(ls_core::FixtureSet::embedded().unwrap()));
        let mut env = Environment::new(pool, EnvConfig::default());
        let reset = env
            .reset(&ResetRequest {
                case_id: Some(case.into()),
                ..Default::default()
            })
            .unwrap();
        let mut g = Guardrails::default();
        g.observe(&reset);
        let mut replies = Vec::new();
        for (name, payload) in actions {
            let r = env.step(name, payload.as_object().unwrap()).unwrap();
            g.observe(&r);
            replies.push(r);
        }
        (g, replies)
    }

    fn submit(payload: Value) -> Action {
        Action::new("submit_decision", payload)
    }

    #[test]
    fn a_submission_is_put_in_its_declared_types() {
        let g = Guardrails::default();
        let mut a = submit(json!({
            "decision": "escalate fraud", "confidence": "1.7", "reason_codes": "bank override, made_up_code, bank_override_attempt",
            "policy_checks": "all good", "rationale": "extra", "notes": 7
        }));
        let notes = g.apply(&mut a);
        let p = &a.payload;
        assert_eq!(p["decision"], "ESCALATE_FRAUD");
        assert_eq!(p["confidence"], 1.0);
        assert_eq!(p["reason_codes"], json!(["bank_override_attempt"]));
        assert!(p.get("policy_checks").is_none() && p.get("rationale").is_none());
        assert_eq!(p["notes"], "7");
        assert!(Submission::from_payload(p).is_ok());
        assert!(
            notes.iter().any(|n| n.contains("made_up_code")),
            "{notes:?}"
        );
        // An unknown decision word is left for the grade: the guardrail never picks a decision.
        let mut b = submit(json!({"decision": "APPROVE"}));
        g.apply(&mut b);
        assert_eq!(b.payload["decision"], "APPROVE");
        // Other actions pass untouched.
        let mut o = Action::new("ocr", json!({"doc_id": "X", "junk": 1}));
        assert!(g.apply(&mut o).is_empty());
        assert_eq!(o.payload["junk"], 1);
    }

    #[test]
    fn evidence_keeps_only_what_the_episode_revealed() {
        let (g, replies) = played(
            "CASE-D-001",
            &[("ocr", json!({"doc_id": "INV-D-001", "mode": "accurate"}))],
        );
        let read: ls_core::replies::OcrReply = tool_reply(&replies[0]).unwrap();
        let (t1, t2) = (&read.tokens[0], &read.tokens[1]);
        let mut a = submit(
            json!({"decision": "HOLD", "reason_codes": ["bank_account_mismatch"], "evidence_map": {
            "bank account mismatch": {"token_ids": [t1.token_id, "t-never-shown", t2.token_id, t1.token_id]},
            "sender_domain_spoof": {"doc_id": "THR-100", "token_ids": ["nope"]},
            "vendor_master_mismatch": {"vendor_key": "never-looked-up"}}}),
        );
        g.apply(&mut a);
        let ev = a.payload["evidence_map"].as_object().unwrap();
        assert_eq!(ev.len(), 1, "{ev:?}");
        let e = &ev["bank_account_mismatch"];
        assert_eq!(e["token_ids"], json!([t1.token_id, t2.token_id]));
        assert_eq!(e["doc_id"], "INV-D-001");
        assert_eq!(e["page"], t1.page);
        assert_eq!(e["bbox"], json!(t1.bbox));
    }

    #[test]
    fn a_pay_cites_the_verification_records_its_family_requires() {
        let (b, _) = played(
            "CASE-B-001",
            &[
                ("lookup_po", json!({"po_id": "PO-2048"})),
                ("lookup_receipt", json!({"receipt_id": "GRN-2048"})),
            ],
        );
        let mut a = submit(json!({"decision": "pay", "confidence": 0.9}));
        b.apply(&mut a);
        let ev = &a.payload["evidence_map"];
        assert_eq!(ev["three_way_match_po"]["po_id"], "PO-2048");
        assert_eq!(ev["three_way_match_receipt"]["receipt_id"], "GRN-2048");
        // Tasks C-E: only a comparison that matched verifies the account.
        let wrong = json!({"vendor_key": "northwind-industrial", "proposed_bank_account": "XX00"});
        let (d, _) = played("CASE-D-001", &[("compare_bank_account", wrong)]);
        let mut a = submit(json!({"decision": "PAY"}));
        d.apply(&mut a);
        assert_eq!(a.payload["evidence_map"], json!({}));
        let mut h = submit(
            json!({"decision": "HOLD", "reason_codes": ["bank_account_mismatch", "urgent_payment_pressure"]}),
        );
        d.apply(&mut h);
        assert_eq!(
            h.payload["evidence_map"],
            json!({"bank_account_mismatch": {"vendor_key": "northwind-industrial"}}),
            "the failed comparison is the mismatch's record; nothing is invented for the other code"
        );
        let right = json!({"vendor_key": "northwind-industrial",
            "proposed_bank_account": "IN55NW000111222"});
        let (ok, _) = played("CASE-C-001", &[("compare_bank_account", right)]);
        let mut a = submit(json!({"decision": "PAY"}));
        ok.apply(&mut a);
        assert_eq!(
            a.payload["evidence_map"]["bank_account_verified"]["vendor_key"],
            "northwind-industrial"
        );
        // A failed lookup reveals nothing.
        let (failed, replies) = played("CASE-B-001", &[("lookup_po", json!({"po_id": "PO-0000"}))]);
        let head: ResultHead = tool_reply(&replies[0]).unwrap();
        assert!(!head.success);
        let mut a = submit(json!({"decision": "PAY"}));
        failed.apply(&mut a);
        assert_eq!(a.payload["evidence_map"], json!({}));
    }
}
