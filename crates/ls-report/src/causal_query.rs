//! Counterfactual queries on a case's structural causal model (`ls_grading::causal::Scm`): the
//! factual world (abduced from the case's own mechanism states), and the world and decision under
//! `do(mechanism = value)` for the interventions asked. Used by the instrumented-mode
//! `POST /counterfactual` route; the answer reveals the case's mechanisms, so the route is an
//! operator read in instrumented mode only.

use ls_core::schema::Case;
use ls_core::{HiddenWorld, ReasonCode};
use ls_grading::causal::{factual_mechanisms, Scm, Var, World, MECHANISMS};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Most interventions one query may name.
pub const MAX_INTERVENTIONS: usize = 8;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterfactualAnswer {
    pub case_id: String,
    /// The mechanisms instantiated for this case.
    pub mechanisms: Vec<&'static str>,
    pub interventions: BTreeMap<String, u8>,
    pub factual: BTreeMap<&'static str, u8>,
    pub factual_decision: &'static str,
    pub counterfactual: BTreeMap<&'static str, u8>,
    pub counterfactual_decision: &'static str,
    /// Mechanisms whose value differs between the two worlds.
    pub changed: Vec<&'static str>,
    pub decision_flips: bool,
}

fn world_map(scm: &Scm, w: &World) -> BTreeMap<&'static str, u8> {
    scm.mechanisms().iter().map(|m| (m.name(), w[m])).collect()
}

/// Answer `do(interventions)` (mechanism name → 0 clean / 1 suspicious) on `case`'s model.
pub fn answer(
    case: &Case,
    interventions: &BTreeMap<String, u8>,
) -> Result<CounterfactualAnswer, String> {
    if interventions.len() > MAX_INTERVENTIONS {
        return Err(format!("at most {MAX_INTERVENTIONS} interventions"));
    }
    let hidden = HiddenWorld::derive(case);
    let signals: BTreeSet<&str> = hidden.hidden_signals.iter().map(String::as_str).collect();
    let callback_suspicious = signals.iter().any(|s| {
        matches!(
            *s,
            "callback_verification_failed" | "callback_dispute_confirmed"
        )
    });
    let has_email = case
        .documents
        .iter()
        .any(|d| d.doc_type == "email" || d.thread_data.is_some());
    let codes: BTreeSet<ReasonCode> = signals
        .iter()
        .filter_map(|s| ReasonCode::from_wire(s))
        .collect();
    let scm = Scm::build(
        hidden.latent_hypothesis,
        factual_mechanisms(&codes, callback_suspicious),
        has_email,
    );
    let mechs = scm.mechanisms();
    let names: Vec<&'static str> = mechs.iter().map(Var::name).collect();
    let mut iv = Vec::new();
    for (name, value) in interventions {
        let var = MECHANISMS
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| {
                format!(
                    "unknown mechanism '{name}'; mechanisms: {}",
                    MECHANISMS.map(Var::name).join(", ")
                )
            })?;
        if !mechs.contains(var) {
            return Err(format!(
                "mechanism '{}' is not in this case's model (instantiated: {})",
                var.name(),
                names.join(", ")
            ));
        }
        if *value > 1 {
            return Err(format!(
                "intervention value for '{name}' must be 0 (clean) or 1 (suspicious)"
            ));
        }
        iv.push((var, *value));
    }
    let (fw, fd) = scm.evaluate(&[]);
    let (cw, cd) = scm.evaluate(&iv);
    let (factual, counterfactual) = (world_map(&scm, &fw), world_map(&scm, &cw));
    Ok(CounterfactualAnswer {
        case_id: case.case_id.clone(),
        changed: names
            .iter()
            .copied()
            .filter(|n| factual.get(n) != counterfactual.get(n))
            .collect(),
        mechanisms: names,
        interventions: interventions.clone(),
        factual_decision: fd.as_str(),
        counterfactual_decision: cd.as_str(),
        decision_flips: fd != cd,
        factual,
        counterfactual,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str) -> Case {
        ls_core::FixtureSet::embedded()
            .unwrap()
            .cases
            .into_iter()
            .find(|c| c.case_id == id)
            .unwrap()
    }

    #[test]
    fn cleaning_every_suspicious_mechanism_flips_a_fraud_case_to_pay() {
        let c = case("CASE-D-001");
        let none = answer(&c, &BTreeMap::new()).unwrap();
        assert_eq!(none.factual_decision, "ESCALATE_FRAUD");
        assert!(!none.decision_flips && none.changed.is_empty());
        let clean: BTreeMap<String, u8> =
            none.factual.keys().map(|k| ((*k).to_owned(), 0)).collect();
        let all_clean = answer(&c, &clean).unwrap();
        assert_eq!(all_clean.counterfactual_decision, "PAY");
        assert!(all_clean.decision_flips);
        assert!(all_clean.counterfactual.values().all(|v| *v == 0));
        // Making the bank mismatch suspicious on a clean case escalates it.
        let safe = case("CASE-B-003");
        let base = answer(&safe, &BTreeMap::new()).unwrap();
        let bank = answer(&safe, &BTreeMap::from([("bank_alignment".to_owned(), 1)])).unwrap();
        assert_eq!(bank.counterfactual_decision, "ESCALATE_FRAUD", "{base:?}");
        assert!(bank.changed.contains(&"bank_alignment"));
    }

    #[test]
    fn bad_queries_name_the_problem() {
        let c = case("CASE-B-003");
        let e = answer(&c, &BTreeMap::from([("XX".to_owned(), 1)])).unwrap_err();
        assert!(e.contains("unknown mechanism 'XX'"), "{e}");
        let e = answer(&c, &BTreeMap::from([("bank_alignment".to_owned(), 2)])).unwrap_err();
        assert!(e.contains("must be 0 (clean) or 1"), "{e}");
    }
}
