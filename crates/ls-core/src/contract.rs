//! The `submit_decision` output contract of each task family: which payload fields the family's
//! grade reads, each with its wire type and vocabulary.
//!
//! One source for everything that has to agree on the payload: [`crate::Submission::from_payload`]
//! parses exactly these fields (the tests below send every field of every family through it), the
//! validator reads the Task A extraction keys from [`EXTRACTION_FIELDS`], and the workbench builds
//! its decision form from [`output_contract`] (served as JSON by `/ui/catalog.json`).

use crate::enums::{Decision, Hypothesis, PolicyCheck, TaskType};
use crate::text::{DISCREPANCY_CODES, FRAUD_CODES};
use serde::Serialize;
use serde_json::{json, Value};

/// The ten Task A extraction targets, in the order the documentation lists them.
pub const EXTRACTION_FIELDS: [&str; 10] = [
    "vendor_name",
    "invoice_number",
    "invoice_date",
    "currency",
    "subtotal",
    "tax",
    "total",
    "po_id",
    "receipt_id",
    "bank_account",
];

/// Extraction fields whose values are amounts (a JSON number on the wire).
pub const EXTRACTION_AMOUNTS: [&str; 3] = ["subtotal", "tax", "total"];

/// The policy checks a submission reports, each `pass` or `fail`: the wire spellings of
/// [`PolicyCheck::ALL`], in table order.
pub const POLICY_CHECKS: [&str; PolicyCheck::ALL.len()] = {
    let mut names = [""; PolicyCheck::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = PolicyCheck::ALL[i].as_str();
        i += 1;
    }
    names
};

/// The two statuses of a policy check.
pub const CHECK_STATUSES: [&str; 2] = ["pass", "fail"];

/// The columns of one line item (`qty`, `unit_price` and `line_total` are numbers).
pub const LINE_ITEM_COLUMNS: [&str; 4] = ["description", "qty", "unit_price", "line_total"];

/// What kind of value a payload field holds, with its vocabulary where it has one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FieldKind {
    /// One of the four decisions (a string).
    Decision { values: Vec<&'static str> },
    /// A number in `[0, 1]`.
    Probability,
    /// A distribution over the latent hypotheses (object of hypothesis → non-negative number).
    Probabilities { hypotheses: Vec<&'static str> },
    /// A list of canonical reason codes (strings).
    Codes { values: Vec<&'static str> },
    /// A list of record ids the agent found (ledger ids, invoice numbers), free strings.
    Ids { placeholder: &'static str },
    /// An object of check → status.
    Checks {
        checks: Vec<&'static str>,
        statuses: Vec<&'static str>,
    },
    /// An object of field → value (strings, amounts as numbers).
    Fields {
        fields: Vec<&'static str>,
        amounts: Vec<&'static str>,
    },
    /// A list of line-item objects.
    LineItems { columns: Vec<&'static str> },
    /// An object of claim → `{doc_id, page, bbox, token_ids}` (chosen on the documents).
    Evidence,
    /// Free text.
    Text,
    /// A JSON object (the decision certificate graph).
    Object,
}

/// One payload field of a family's contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContractField {
    pub name: &'static str,
    #[serde(flatten)]
    pub kind: FieldKind,
    /// The family's grade reads it (a score dimension or a gate depends on it).
    pub graded: bool,
    /// The submission is malformed without it.
    pub required: bool,
    pub description: &'static str,
}

/// A family's whole contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputContract {
    pub task_type: &'static str,
    pub fields: Vec<ContractField>,
}

fn codes(list: &[&'static str]) -> FieldKind {
    FieldKind::Codes {
        values: list.to_vec(),
    }
}

fn all_codes() -> FieldKind {
    codes(&[&DISCREPANCY_CODES[..], &FRAUD_CODES[..]].concat())
}

fn field(
    name: &'static str,
    kind: FieldKind,
    graded: bool,
    description: &'static str,
) -> ContractField {
    ContractField {
        name,
        kind,
        graded,
        required: name == "decision",
        description,
    }
}

/// The fields every family shares: decision, confidence, hypotheses, evidence, certificate, notes.
fn backbone(task: TaskType) -> Vec<ContractField> {
    let extraction = task == TaskType::TaskA;
    vec![
        field(
            "decision",
            FieldKind::Decision {
                values: Decision::ALL.iter().map(|d| d.as_str()).collect(),
            },
            !extraction,
            "what happens to the payment",
        ),
        field("confidence", FieldKind::Probability, true, "how sure you are, 0 to 1 (calibration)"),
        field(
            "predicted_probabilities",
            FieldKind::Probabilities {
                hypotheses: Hypothesis::ALL.iter().map(|h| h.as_str()).collect(),
            },
            true,
            "optional: a distribution over the hypotheses; without it one is implied by decision and confidence",
        ),
        field(
            "evidence_map",
            FieldKind::Evidence,
            true,
            "claim -> the tokens that show it (click tokens in the documents)",
        ),
    ]
}

fn tail(task: TaskType) -> Vec<ContractField> {
    let mut v = Vec::new();
    if task != TaskType::TaskA {
        v.push(field(
            "counterfactual",
            FieldKind::Text,
            matches!(task, TaskType::TaskD | TaskType::TaskE),
            "what would have to be different for the opposite decision",
        ));
    }
    v.push(field(
        "decision_certificate",
        FieldKind::Object,
        true,
        "optional: your decision graph {certificate_version, nodes, edges} (JSON); without it one is synthesized",
    ));
    v.push(field(
        "handoff_packet",
        FieldKind::Object,
        true,
        "optional: the packet handed to a human reviewer (the conduct grade reads it when no create_human_handoff was made)",
    ));
    v.push(field(
        "risk_score",
        FieldKind::Probability,
        false,
        "optional: your risk score, 0..1 (recorded, not graded)",
    ));
    v.push(field(
        "recommended_next_action",
        FieldKind::Text,
        false,
        "optional: what should happen next (recorded, not graded)",
    ));
    v.push(field(
        "notes",
        FieldKind::Text,
        false,
        "free text for the reviewer",
    ));
    v
}

fn policy() -> ContractField {
    field(
        "policy_checks",
        FieldKind::Checks {
            checks: POLICY_CHECKS.to_vec(),
            statuses: CHECK_STATUSES.to_vec(),
        },
        true,
        "each control check you ran: pass or fail",
    )
}

/// The fields only this family's grade reads.
fn specific(task: TaskType) -> Vec<ContractField> {
    let ids = |name, placeholder, description| {
        field(name, FieldKind::Ids { placeholder }, true, description)
    };
    match task {
        TaskType::TaskA => vec![
            field(
                "extracted_fields",
                FieldKind::Fields {
                    fields: EXTRACTION_FIELDS.to_vec(),
                    amounts: EXTRACTION_AMOUNTS.to_vec(),
                },
                true,
                "the invoice's fields as printed (amounts as numbers)",
            ),
            field(
                "line_items",
                FieldKind::LineItems {
                    columns: LINE_ITEM_COLUMNS.to_vec(),
                },
                true,
                "the invoice's lines",
            ),
        ],
        TaskType::TaskB => vec![
            field(
                "reason_codes",
                all_codes(),
                false,
                "the reasons for the decision",
            ),
            field(
                "discrepancies",
                codes(&DISCREPANCY_CODES),
                true,
                "the three-way-match discrepancies found",
            ),
            policy(),
        ],
        TaskType::TaskC => vec![
            field(
                "reason_codes",
                all_codes(),
                false,
                "the reasons for the decision",
            ),
            field(
                "fraud_flags",
                codes(&FRAUD_CODES),
                true,
                "the fraud signals found",
            ),
            field(
                "discrepancies",
                codes(&DISCREPANCY_CODES),
                false,
                "any discrepancies found",
            ),
            ids(
                "duplicate_links",
                "LED-…",
                "ledger ids of the earlier invoices this one duplicates",
            ),
            policy(),
        ],
        TaskType::TaskD => vec![
            field(
                "reason_codes",
                all_codes(),
                true,
                "the reasons for the decision",
            ),
            policy(),
            ids(
                "duplicate_links",
                "LED-…",
                "ledger ids of duplicates the inbox points at",
            ),
        ],
        TaskType::TaskE => vec![
            field(
                "reason_codes",
                all_codes(),
                true,
                "the reasons for the decision",
            ),
            field(
                "campaign_signals",
                codes(&FRAUD_CODES),
                true,
                "the campaign-level signals found",
            ),
            ids(
                "cross_invoice_links",
                "INV-…",
                "the other invoices of the campaign",
            ),
            policy(),
        ],
    }
}

impl FieldKind {
    /// The JSON Schema of a value of this kind, as the server's parser accepts it (reason codes
    /// are listed under `x-vocabulary`, not as an `enum`: the parser also maps their aliases).
    pub fn json_schema(&self) -> Value {
        match self {
            FieldKind::Decision { values } => json!({"type": "string", "enum": values}),
            FieldKind::Probability => json!({"type": "number", "minimum": 0, "maximum": 1}),
            FieldKind::Probabilities { hypotheses } => {
                json!({"type": "object", "propertyNames": {"enum": hypotheses}, "additionalProperties": {"type": "number", "minimum": 0}})
            }
            FieldKind::Codes { values } => {
                json!({"type": "array", "items": {"type": "string"}, "x-vocabulary": values})
            }
            FieldKind::Ids { .. } => json!({"type": "array", "items": {"type": "string"}}),
            FieldKind::Checks { checks, statuses } => {
                json!({"type": "object", "additionalProperties": {"type": ["string", "boolean"]}, "x-checks": checks, "x-statuses": statuses})
            }
            FieldKind::Fields { fields, amounts } => {
                json!({"type": "object", "additionalProperties": {"type": ["string", "number"]}, "x-fields": fields, "x-amounts": amounts})
            }
            FieldKind::LineItems { columns } => {
                let props: serde_json::Map<String, Value> = columns
                    .iter()
                    .map(|c| {
                        (
                            (*c).to_owned(),
                            if *c == "description" {
                                json!({"type": "string"})
                            } else {
                                json!({"type": ["number", "string"]})
                            },
                        )
                    })
                    .collect();
                json!({"type": "array", "items": {"type": "object", "properties": props}})
            }
            FieldKind::Evidence => {
                json!({"type": "object", "additionalProperties": {"type": "object", "properties": {
                "doc_id": {"type": "string"}, "page": {"type": "integer", "minimum": 1},
                "bbox": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4},
                "token_ids": {"type": "array", "items": {"type": "string"}}}}})
            }
            FieldKind::Text => json!({"type": "string"}),
            FieldKind::Object => json!({"type": "object"}),
        }
    }
}

/// The `submit_decision` payload schema over every family: each contract field once, its
/// description naming the families whose grade reads it; `decision` is required.
pub fn submission_schema() -> Value {
    let mut props = serde_json::Map::new();
    for task in TaskType::ALL {
        for f in output_contract(task).fields {
            let entry = props.entry(f.name.to_owned()).or_insert_with(|| {
                let mut s = f.kind.json_schema();
                s["description"] = json!(f.description);
                s["x-graded-for"] = json!([]);
                s
            });
            if f.graded {
                if let Some(list) = entry["x-graded-for"].as_array_mut() {
                    list.push(json!(task.as_str()));
                }
            }
        }
    }
    json!({"type": "object", "properties": props, "required": ["decision"], "description": "The task family's output contract (/ui/catalog.json lists it per family); unknown keys are ignored."})
}

/// The output contract of one task family.
pub fn output_contract(task: TaskType) -> OutputContract {
    let mut fields = backbone(task);
    fields.extend(specific(task));
    fields.extend(tail(task));
    OutputContract {
        task_type: task.as_str(),
        fields,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Submission;
    use serde_json::Map;

    /// A well-typed value for a field of this kind.
    fn sample(f: &ContractField) -> Value {
        match &f.kind {
            FieldKind::Decision { values } => json!(values[1]),
            FieldKind::Probability => json!(0.7),
            FieldKind::Probabilities { hypotheses } => {
                json!({hypotheses[0]: 0.2, hypotheses[1]: 0.8})
            }
            FieldKind::Codes { values } => json!([values[0]]),
            FieldKind::Ids { .. } => json!(["LED-1"]),
            FieldKind::Checks { checks, statuses } => json!({checks[0]: statuses[1]}),
            FieldKind::Fields { fields, amounts } => json!({fields[0]: "Acme", amounts[0]: 12.5}),
            FieldKind::LineItems { columns } => {
                json!([{columns[0]: "gear", columns[1]: 2, columns[2]: 3.5, columns[3]: 7.0}])
            }
            FieldKind::Evidence => {
                json!({"total": {"doc_id": "INV-1", "page": 1, "bbox": [0, 0, 1, 1], "token_ids": ["t1"]}})
            }
            FieldKind::Text => json!("text"),
            FieldKind::Object => json!({"nodes": [], "edges": []}),
        }
    }

    /// The parsed submission holds the field (it is not one `from_payload` ignores).
    fn parsed(s: &Submission, name: &str) -> bool {
        match name {
            "decision" => s.decision.is_some(),
            "confidence" => s.confidence.is_some(),
            "predicted_probabilities" => s.predicted_probabilities.is_some(),
            "reason_codes" => s.reason_codes.is_some(),
            "fraud_flags" => s.fraud_flags.is_some(),
            "discrepancies" => s.discrepancies.is_some(),
            "campaign_signals" => s.campaign_signals.is_some(),
            "duplicate_links" => s.duplicate_links.is_some(),
            "cross_invoice_links" => s.cross_invoice_links.is_some(),
            "policy_checks" => !s.policy_checks.is_empty(),
            "evidence_map" => !s.evidence_map.is_empty(),
            "extracted_fields" => !s.extracted_fields.is_empty(),
            "line_items" => !s.line_items.is_empty(),
            "counterfactual" => s.counterfactual.is_some(),
            "decision_certificate" => s.decision_certificate.is_some(),
            "notes" => s.notes.is_some(),
            "handoff_packet" => s.handoff_packet.is_some(),
            "risk_score" => s.risk_score.is_some(),
            "recommended_next_action" => s.recommended_next_action.is_some(),
            other => panic!("contract field {other} is not a Submission field"),
        }
    }

    #[test]
    fn policy_check_names_are_the_enum_table_and_round_trip() {
        assert_eq!(
            POLICY_CHECKS,
            [
                "three_way_match",
                "bank_change_verification",
                "duplicate_check",
                "approval_threshold_check",
            ]
        );
        for (name, check) in POLICY_CHECKS.iter().zip(PolicyCheck::ALL) {
            assert_eq!(PolicyCheck::from_wire(name), Some(check));
            assert_eq!(serde_json::to_value(check).unwrap(), json!(name));
        }
        assert_eq!(PolicyCheck::from_wire("Three_Way_Match"), None);
        assert_eq!(PolicyCheck::from_wire("vendor_check"), None);
    }

    #[test]
    fn every_contract_field_is_parsed_by_the_validator() {
        for task in TaskType::ALL {
            let c = output_contract(task);
            let payload: Map<String, Value> = c
                .fields
                .iter()
                .map(|f| (f.name.to_owned(), sample(f)))
                .collect();
            let s = Submission::from_payload(&payload).unwrap_or_else(|e| panic!("{task:?}: {e}"));
            for f in &c.fields {
                assert!(parsed(&s, f.name), "{task:?}: {} was dropped", f.name);
            }
        }
    }

    #[test]
    fn a_wrong_type_in_any_list_or_map_field_is_an_error_naming_it() {
        for task in TaskType::ALL {
            for f in output_contract(task).fields {
                if matches!(
                    f.kind,
                    FieldKind::Text
                        | FieldKind::Object
                        | FieldKind::Decision { .. }
                        | FieldKind::Evidence
                ) {
                    continue;
                }
                let payload: Map<String, Value> =
                    [(f.name.to_owned(), json!(true))].into_iter().collect();
                let e = Submission::from_payload(&payload).expect_err(f.name);
                assert_eq!(e.field, f.name);
            }
        }
    }

    #[test]
    fn the_payload_schema_has_every_field_of_every_family_once() {
        let schema = submission_schema();
        let props = schema["properties"].as_object().unwrap();
        for task in TaskType::ALL {
            for f in output_contract(task).fields {
                let p = &props[f.name];
                assert!(p["type"].is_string() || p["type"].is_array(), "{}", f.name);
                let graded = p["x-graded-for"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(task.as_str()));
                assert_eq!(graded, f.graded, "{task:?} {}", f.name);
            }
        }
        assert_eq!(schema["required"], json!(["decision"]));
        assert_eq!(props["extracted_fields"]["x-graded-for"], json!(["task_a"]));
    }

    #[test]
    fn families_carry_their_graded_fields() {
        let names = |t| {
            output_contract(t)
                .fields
                .iter()
                .filter(|f| f.graded)
                .map(|f| f.name)
                .collect::<Vec<_>>()
        };
        assert!(
            names(TaskType::TaskA).contains(&"extracted_fields")
                && names(TaskType::TaskA).contains(&"line_items")
        );
        assert!(!names(TaskType::TaskA).contains(&"decision"));
        assert!(names(TaskType::TaskB).contains(&"discrepancies"));
        assert!(
            names(TaskType::TaskC).contains(&"duplicate_links")
                && names(TaskType::TaskC).contains(&"fraud_flags")
        );
        assert!(names(TaskType::TaskD).contains(&"reason_codes"));
        assert!(
            names(TaskType::TaskE).contains(&"cross_invoice_links")
                && names(TaskType::TaskE).contains(&"campaign_signals")
        );
        for t in TaskType::ALL {
            let c = output_contract(t);
            let mut seen = std::collections::BTreeSet::new();
            assert!(
                c.fields.iter().all(|f| seen.insert(f.name)),
                "{t:?} repeats a field"
            );
            assert!(c.fields.iter().any(|f| f.required && f.name == "decision"));
        }
    }
}

#[cfg(test)]
mod parser_agreement {
    use super::*;
    use crate::Submission;

    /// Every field a family's contract offers (the workbench form, the MCP schema) is one the
    /// parser reads, and every field the parser reads is in some family's contract: the form can
    /// never send a field the grade ignores, nor miss one it reads.
    #[test]
    fn contract_fields_are_exactly_the_parsed_fields() {
        let parsed: std::collections::BTreeSet<&str> =
            Submission::FIELDS.iter().map(|f| f.name).collect();
        let mut offered = std::collections::BTreeSet::new();
        for task in TaskType::ALL {
            for f in output_contract(task).fields {
                assert!(
                    parsed.contains(f.name),
                    "{}: contract field {} is not read by Submission::from_payload",
                    task.as_str(),
                    f.name
                );
                offered.insert(f.name);
            }
        }
        let unoffered: Vec<_> = parsed.difference(&offered).collect();
        assert!(
            unoffered.is_empty(),
            "parsed but in no contract: {unoffered:?}"
        );
    }
}
