//! The composed submission: the `submit_decision` payload a [`Composer`] writes from the rows it
//! points at, in the shape of the case family's contract.

use crate::factored::Composer;
use crate::ledger::{Ledger, Row, MAX_DOCS};
use ls_core::{CodeKind, Decision, ReasonCode, TaskType};
use serde_json::{json, Map, Value};

impl Composer {
    /// The composed `submit_decision` payload: the decision and confidence, the reasons or the
    /// Task A extraction, the family's own fields, and the evidence map of every row pointed at.
    pub fn submission(&self, l: &Ledger) -> Map<String, Value> {
        let decision = self.decision.unwrap_or(Decision::NeedsReview);
        let mut p = Map::new();
        p.insert("decision".into(), json!(decision.as_str()));
        p.insert("confidence".into(), json!(confidence(decision)));
        let mut evidence = Map::new();
        for (c, i) in &self.codes {
            evidence.insert(c.as_str().into(), reference(l, *i));
        }
        for (v, i) in &self.verifications {
            evidence.insert(v.key().into(), reference(l, *i));
        }
        if l.task == Some(TaskType::TaskA) {
            self.extraction(l, &mut p, &mut evidence);
        } else {
            self.reasons(l, decision, &mut p);
        }
        self.family_fields(l, decision, &mut p);
        p.insert("evidence_map".into(), Value::Object(evidence));
        debug_assert!(p.contains_key("decision") && p.contains_key("evidence_map"));
        p
    }

    /// Task A: the extracted fields (each cited), the line items, no reasons.
    fn extraction(
        &self,
        l: &Ledger,
        p: &mut Map<String, Value>,
        evidence: &mut Map<String, Value>,
    ) {
        let mut fields = Map::new();
        for (f, i) in &self.fields {
            let value = l.rows[*i].value.clone().unwrap_or_default();
            let v = if f.numeric() {
                ls_core::text::parse_decimal(&value)
                    .map_or(json!(value), |d| json!(d.normalize().to_string()))
            } else {
                json!(value)
            };
            fields.insert(f.key().into(), v);
            evidence.insert(f.key().into(), reference(l, *i));
        }
        let items: Vec<Value> = self
            .items
            .iter()
            .filter_map(|i| line_item(&l.rows[*i]))
            .collect();
        p.insert("extracted_fields".into(), Value::Object(fields));
        p.insert("line_items".into(), Value::Array(items));
        p.insert("reason_codes".into(), json!([]));
    }

    /// Tasks B–E: the reason codes (Task B names its match discrepancies in `discrepancies`, its
    /// contract, and any other reason here), the policy checks and the counterfactual.
    fn reasons(&self, l: &Ledger, decision: Decision, p: &mut Map<String, Value>) {
        let three_way = l.task == Some(TaskType::TaskB);
        let named: Vec<&str> = self
            .codes
            .keys()
            .filter(|c| !three_way || c.kind() != CodeKind::Discrepancy)
            .map(|c| c.as_str())
            .collect();
        p.insert("reason_codes".into(), json!(named));
        let checks: Map<String, Value> = self
            .checks
            .iter()
            .map(|(c, pass)| {
                (
                    c.as_str().to_owned(),
                    json!(if *pass { "pass" } else { "fail" }),
                )
            })
            .collect();
        p.insert("policy_checks".into(), Value::Object(checks));
        p.insert(
            "counterfactual".into(),
            json!(counterfactual(decision, self, l)),
        );
    }

    /// The family's own fields: Task B's discrepancies, Task C's fraud flags and links, the
    /// duplicate links of D and E, Task E's campaign signals and cross-invoice links.
    fn family_fields(&self, l: &Ledger, decision: Decision, p: &mut Map<String, Value>) {
        let values = |rows: &[usize]| -> Vec<String> {
            rows.iter()
                .filter_map(|i| l.rows[*i].value.clone())
                .collect()
        };
        let (dup, cross) = (values(&self.duplicate_links), values(&self.cross_links));
        let codes = |keep: fn(ReasonCode) -> bool| -> Vec<&str> {
            self.codes
                .keys()
                .filter(|c| keep(**c))
                .map(|c| c.as_str())
                .collect()
        };
        match l.task {
            Some(TaskType::TaskB) => {
                let d = codes(|c| c.kind() == CodeKind::Discrepancy);
                p.insert("discrepancies".into(), json!(d));
            }
            Some(TaskType::TaskC) => {
                p.insert("fraud_flags".into(), json!(codes(|_| true)));
                p.insert("duplicate_links".into(), json!(dup));
                p.insert("discrepancies".into(), json!([]));
            }
            Some(TaskType::TaskD) if !dup.is_empty() => {
                p.insert("duplicate_links".into(), json!(dup));
            }
            Some(TaskType::TaskE) => {
                p.insert("campaign_signals".into(), json!(codes(campaign_code)));
                let links = if decision == Decision::Pay {
                    Vec::new()
                } else {
                    cross
                };
                p.insert("cross_invoice_links".into(), json!(links));
                if !dup.is_empty() {
                    p.insert("duplicate_links".into(), json!(dup));
                }
            }
            _ => {}
        }
    }
}

/// A code Task E reports among its campaign signals.
fn campaign_code(c: ReasonCode) -> bool {
    matches!(
        c,
        ReasonCode::ApprovalThresholdEvasion
            | ReasonCode::SharedBankAccount
            | ReasonCode::CoordinatedTiming
    )
}

/// How a submission cites row `i` (its reference), `null` past the rows.
fn reference(l: &Ledger, i: usize) -> Value {
    l.rows
        .get(i)
        .map(|r| r.reference.clone())
        .unwrap_or(Value::Null)
}

/// The confidence a decision is submitted with (the teacher's).
pub fn confidence(d: Decision) -> f64 {
    match d {
        Decision::Pay | Decision::Hold => 0.9,
        Decision::NeedsReview => 0.88,
        Decision::EscalateFraud => 0.95,
    }
}

/// A line item from an item row (`description | qty | unit price | amount`).
fn line_item(r: &Row) -> Option<Value> {
    let parts: Vec<&str> = r.text.split('|').map(str::trim).collect();
    let [desc, qty, unit, total] = parts[..] else {
        return None;
    };
    let n = |s: &str| ls_core::text::parse_decimal(s).map(|d| d.normalize().to_string());
    Some(
        json!({"description": desc, "qty": n(qty)?, "unit_price": n(unit)?, "line_total": n(total)?}),
    )
}

/// A one-sentence counterfactual from the decision, its codes and links (the conditions that
/// would have to differ for the opposite decision, naming the records and invoices they rest on).
pub fn counterfactual(decision: Decision, c: &Composer, l: &Ledger) -> String {
    if decision == Decision::Pay {
        return "If the bank account had not matched the vendor master, the sender domain had been spoofed or a duplicate payment had existed in the ledger, we would hold the invoice instead of paying it.".to_owned();
    }
    let mut conds: Vec<String> = Vec::new();
    for s in c
        .codes
        .keys()
        .filter_map(|code| condition(*code))
        .chain(link_conditions(c, l))
    {
        if !conds.contains(&s) {
            conds.push(s);
        }
    }
    if conds.is_empty() {
        conds.push("every control check had passed".to_owned());
    }
    let verb = match decision {
        Decision::Hold => "holding it",
        Decision::NeedsReview => "routing it to review",
        _ => "escalating it",
    };
    format!(
        "If {}, we would pay the invoice instead of {verb}.",
        conds.join(", and ")
    )
}

/// What would have to differ for a code not to hold (`None`: said by the links instead).
fn condition(code: ReasonCode) -> Option<String> {
    use ReasonCode as C;
    Some(match code {
        C::SenderDomainSpoof => "the sender domain had matched the approved vendor domain".to_owned(),
        C::BankOverrideAttempt | C::BankAccountMismatch | C::VendorAccountTakeoverSuspected => {
            "the bank account had matched the vendor master and the callback had verified the request".to_owned()
        }
        C::PolicyBypassAttempt | C::InstructionOverrideAttempt => {
            "the request had not asked to skip verification or the approval workflow".to_owned()
        }
        C::DuplicateNearMatch => "no duplicate payment existed in the ledger".to_owned(),
        C::ApprovalThresholdEvasion => "the amounts had not been split to stay under the approval threshold".to_owned(),
        C::SharedBankAccount | C::CoordinatedTiming => return None,
        other => format!("there had been no {}", other.as_str().replace('_', " ")),
    })
}

/// The conditions the links name: the earlier payments repeated, the invoices linked (with
/// their totals), or a shared account without named invoices.
fn link_conditions(c: &Composer, l: &Ledger) -> Vec<String> {
    let value = |i: &usize| {
        l.rows
            .get(*i)
            .and_then(|r| r.value.clone())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    if !c.duplicate_links.is_empty() {
        let ids: Vec<String> = c.duplicate_links.iter().map(value).collect();
        out.push(format!(
            "no duplicate payment such as {} existed in the ledger",
            ids.join(", ")
        ));
    }
    if !c.cross_links.is_empty() {
        let docs: Vec<String> = c
            .cross_links
            .iter()
            .map(|i| {
                let id = value(i);
                let total = l
                    .invoices()
                    .find(|inv| inv.doc_id == id)
                    .and_then(|inv| inv.total_value())
                    .map(|t| format!(" ({})", t.round_dp(2)))
                    .unwrap_or_default();
                format!("{id}{total}")
            })
            .collect();
        out.push(format!(
            "the linked invoices {} had not shared one unverified remittance account within days of each other",
            docs.join(", ")
        ));
    } else if c.codes.contains_key(&ReasonCode::SharedBankAccount)
        || c.codes.contains_key(&ReasonCode::CoordinatedTiming)
    {
        out.push(
            "the invoices had not shared one remittance account within days of each other"
                .to_owned(),
        );
    }
    out
}

/// How many documents a pointer can name (catalogue slots); re-exported for the observation.
pub const DOC_SLOTS: usize = MAX_DOCS;
