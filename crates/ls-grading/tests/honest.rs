//! Honest-agent variants on curated cases: what a careful analyst may do differently from the
//! gold's own citation and still earn the grade (a valid alternative place, a PAY that cites the
//! verification results instead of invoice labels, a table header instead of its data row).
//! Each prints its score next to the careful reference.

mod common;

use common::*;
use ls_core::fixtures::CaseWorld;
use ls_core::{Case, FixtureSet};
use serde_json::{json, Map, Value};

fn case(set: &FixtureSet, id: &str) -> Case {
    set.cases
        .iter()
        .find(|c| c.case_id == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id}"))
}

/// (careful score, variant score, variant class) with `edit` applied to the careful payload.
fn variant(
    set: &FixtureSet,
    id: &str,
    edit: impl Fn(&Case, &mut Map<String, Value>),
) -> (f64, f64, String) {
    let c = case(set, id);
    let ep = careful_episode(&c);
    let careful = careful_payload(&c, &ep);
    let base = grade_with(&c, CaseWorld::new(&set.master, &c), &ep, &careful, "case");
    let mut p = careful.clone();
    edit(&c, &mut p);
    let r = grade_with(&c, CaseWorld::new(&set.master, &c), &ep, &p, "case");
    eprintln!(
        "honest {id}: careful {:.4} {} -> variant {:.4} {} caps={:?}",
        base.final_score, base.result_class, r.final_score, r.result_class, r.cap_reasons
    );
    (base.final_score, r.final_score, r.result_class.to_string())
}

/// The token of `doc` whose text starts with `prefix`, as a one-token reference.
fn line(c: &Case, doc: &str, prefix: &str) -> Value {
    let d = c.documents.iter().find(|d| d.doc_id == doc).expect("doc");
    let t = d
        .accurate_ocr
        .iter()
        .find(|t| t.text.starts_with(prefix))
        .unwrap_or_else(|| panic!("{doc}: no line {prefix}"));
    json!({"doc_id": doc, "page": t.page, "bbox": t.bbox, "token_ids": [t.token_id]})
}

fn evidence(p: &mut Map<String, Value>) -> &mut Map<String, Value> {
    p.get_mut("evidence_map")
        .and_then(Value::as_object_mut)
        .expect("evidence map")
}

#[test]
fn a_valid_alternative_place_earns_the_code() {
    let set = FixtureSet::embedded().expect("fixtures");
    // CASE-D-004: the thread's bank-change notice quotes the override account printed on the
    // invoice; citing it instead of the invoice's `Bank:` line shows the same fact.
    let (base, v, class) = variant(&set, "CASE-D-004", |c, p| {
        evidence(p).insert(
            "bank_override_attempt".into(),
            line(
                c,
                "THR-150",
                "This message is our formal bank change notice",
            ),
        );
    });
    assert_eq!(class, "valid_success");
    assert!(v >= base - 0.02, "alternative place {v} vs careful {base}");
}

#[test]
fn a_pay_is_verified_by_its_checks_not_by_label_lines() {
    let set = FixtureSet::embedded().expect("fixtures");
    for id in ["CASE-B-003", "CASE-C-002", "CASE-D-002"] {
        // Only the verification results (records), no invoice line at all.
        let (base, v, class) = variant(&set, id, |_, p| {
            evidence(p).retain(|_, e| e.get("doc_id").is_none());
        });
        assert_eq!(class, "valid_success", "{id}");
        assert!(v >= base - 0.02, "{id}: records only {v} vs careful {base}");
        // Only the `Total:` and bank / PO lines, no verification result cited.
        let (_, labels, _) = variant(&set, id, |c, p| {
            let inv = c.invoices().next().expect("invoice").doc_id.clone();
            let e = evidence(p);
            e.clear();
            e.insert("invoice_total".into(), line(c, &inv, "Total:"));
            let second = if c.task_type == ls_core::TaskType::TaskB {
                "PO:"
            } else if c
                .invoices()
                .next()
                .unwrap()
                .accurate_ocr
                .iter()
                .any(|t| t.text.starts_with("IBAN:"))
            {
                "IBAN:"
            } else {
                "Bank:"
            };
            e.insert("verified".into(), line(c, &inv, second));
        });
        assert!(
            labels <= 0.15,
            "{id}: label lines alone verify nothing ({labels})"
        );
    }
}

#[test]
fn a_table_header_instead_of_its_row_costs_in_proportion() {
    let set = FixtureSet::embedded().expect("fixtures");
    // CASE-B-001 has two gold codes; the price mismatch cited at the table's header row.
    let (base, v, _) = variant(&set, "CASE-B-001", |c, p| {
        evidence(p).insert("price_mismatch".into(), line(c, "INV-B-001", "Description"));
    });
    assert!(
        v < base,
        "a misplaced citation costs something ({v} vs {base})"
    );
    assert!(
        v >= base - 0.15,
        "one misplaced citation of two is no cliff ({v} vs {base})"
    );
    // CASE-B-004 has one gold code: a header citation establishes nothing, so the decision is
    // unsupported (the documented cap), whatever else is right.
    let (_, single, _) = variant(&set, "CASE-B-004", |c, p| {
        evidence(p).insert(
            "quantity_mismatch".into(),
            line(c, "INV-B-004", "Description"),
        );
    });
    assert!(single <= 0.15 + 1e-9, "{single}");
}
