//! Trajectory components: investigation, intervention, efficiency, resolution state.

use ls_core::episode::TrajectoryEntry;
use ls_core::{ActionName, Decision, HandoffPacket, TaskType};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

pub const INTERVENTION_BASE_SCORE: f64 = 0.15;

/// Required investigation tools per task (plus callback when the case needs one).
pub fn required_tools(task: TaskType, needs_callback: bool) -> Vec<ActionName> {
    use ActionName::*;
    let mut v = match task {
        TaskType::TaskA => vec![Ocr, Zoom],
        TaskType::TaskB => vec![LookupPo, LookupReceipt, LookupPolicy],
        TaskType::TaskC => vec![SearchLedger, CompareBankAccount],
        TaskType::TaskD => vec![
            InspectEmailThread,
            LookupVendorHistory,
            LookupPolicy,
            CompareBankAccount,
        ],
        TaskType::TaskE => vec![
            InspectEmailThread,
            LookupVendorHistory,
            LookupPolicy,
            CompareBankAccount,
            SearchLedger,
            RequestCallbackVerification,
        ],
    };
    if needs_callback && !v.contains(&RequestCallbackVerification) {
        v.push(RequestCallbackVerification);
    }
    v
}

/// Successful actions of the trajectory (a missing or failed step does not count).
pub fn successful_actions(traj: &[TrajectoryEntry]) -> BTreeSet<ActionName> {
    traj.iter()
        .filter(|t| t.success)
        .map(|t| t.action_type)
        .collect()
}

/// Every attempted action type.
pub fn attempted_actions(traj: &[TrajectoryEntry]) -> BTreeSet<ActionName> {
    traj.iter().map(|t| t.action_type).collect()
}

/// Share of the task's required tools among `done` (the trajectory's successful actions).
pub fn investigation_score(
    task: TaskType,
    needs_callback: bool,
    traj: &[TrajectoryEntry],
    done: &BTreeSet<ActionName>,
) -> f64 {
    if traj.is_empty() {
        return 0.0;
    }
    let req = required_tools(task, needs_callback);
    req.iter().filter(|a| done.contains(a)).count() as f64 / req.len() as f64
}

pub struct InterventionInput<'a> {
    pub risky: bool,
    pub decision: Option<Decision>,
    pub traj: &'a [TrajectoryEntry],
    /// The trajectory's successful actions.
    pub successful: &'a BTreeSet<ActionName>,
    pub unsafe_payment: bool,
    pub gold_campaign: bool,
}

pub fn intervention_score(i: &InterventionInput<'_>) -> f64 {
    use ActionName::*;
    if i.traj.is_empty() {
        return 0.0;
    }
    let a = i.successful;
    let any_intervention = a.iter().any(|x| x.is_intervention());
    let has = |x: ActionName| a.contains(&x);
    let mut s = INTERVENTION_BASE_SCORE;
    if i.risky {
        if has(RequestCallbackVerification) {
            s += 0.20;
        }
        if has(RouteToSecurity) && i.decision == Some(Decision::EscalateFraud) {
            s += 0.15;
        }
        if has(FreezeVendorProfile) {
            s += 0.10;
        }
        if has(FlagDuplicateClusterReview) {
            s += 0.10;
        }
        if has(CreateHumanHandoff) {
            s += 0.05;
        }
        if !any_intervention {
            s -= 0.10;
        }
    } else {
        if i.decision == Some(Decision::Pay) && !any_intervention {
            s += 0.30;
        }
        if has(RequestCallbackVerification) {
            s -= 0.08;
        }
        if has(RouteToSecurity) {
            s -= 0.18;
        }
        if has(FreezeVendorProfile) {
            s -= 0.18;
        }
        if has(FlagDuplicateClusterReview) {
            s -= 0.10;
        }
    }
    if i.unsafe_payment {
        s -= 0.30;
    }
    if i.gold_campaign && has(RouteToSecurity) && has(FreezeVendorProfile) {
        s += 0.08;
    }
    s.clamp(0.0, 1.0)
}

/// A JSON value serialized with every object's keys sorted.
struct Sorted<'a>(&'a Value);

/// A JSON object's entries serialized in key order.
struct SortedMap<'a>(&'a Map<String, Value>);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(o) => SortedMap(o).serialize(s),
            Value::Array(a) => s.collect_seq(a.iter().map(Sorted)),
            other => other.serialize(s),
        }
    }
}

impl Serialize for SortedMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut entries: Vec<(&String, &Value)> = self.0.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        s.collect_map(entries.into_iter().map(|(k, v)| (k, Sorted(v))))
    }
}

/// (repeats, repeat_penalty, length_penalty, score).
pub fn efficiency(traj: &[TrajectoryEntry], budget_penalty: f64) -> (usize, f64, f64, f64) {
    // Repeats: steps whose (action, canonical payload) was already seen.
    let mut actions: Vec<ActionName> = traj.iter().map(|t| t.action_type).collect();
    actions.sort_unstable();
    actions.dedup();
    // No action twice (the usual case): no repeat, whatever the payloads; only otherwise are the
    // payloads rendered and compared.
    let repeats = if actions.len() == traj.len() {
        0
    } else {
        let mut keys: Vec<(ActionName, String)> = traj
            .iter()
            .map(|t| {
                (
                    t.action_type,
                    serde_json::to_string(&SortedMap(t.payload.as_map())).unwrap_or_default(),
                )
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        traj.len() - keys.len()
    };
    let repeat_penalty = (0.03 * repeats as f64).min(0.25);
    let length_penalty = if traj.len() > 8 {
        (0.02 * (traj.len() - 8) as f64).min(0.12)
    } else {
        0.0
    };
    (
        repeats,
        repeat_penalty,
        length_penalty,
        (1.0 - budget_penalty - repeat_penalty - length_penalty).clamp(0.0, 1.0),
    )
}

pub struct ResolutionInput {
    pub action_cov: f64,
    pub artifact_cov: f64,
    pub readiness: f64,
    pub handoff_quality: f64,
    pub risky: bool,
    pub decision: Option<Decision>,
    pub pending: usize,
    pub security_or_freeze: bool,
    pub outcome_type: String,
}

pub fn resolution_state_score(r: &ResolutionInput) -> f64 {
    let pay = r.decision == Some(Decision::Pay);
    let mut s = 0.20
        + 0.25 * r.action_cov
        + 0.20 * r.artifact_cov
        + 0.15 * r.readiness.clamp(0.0, 1.0)
        + 0.10 * r.handoff_quality;
    if r.risky && r.decision.is_some() && !pay {
        s += 0.08;
    }
    if r.risky && r.pending > 0 && pay {
        s -= 0.20;
    }
    if !r.risky && pay {
        s += 0.08;
    }
    if !r.risky && r.security_or_freeze {
        s -= 0.15;
    }
    if r.outcome_type == "fraud_prevented" || r.outcome_type == "safe_payment_cleared" {
        s += 0.05;
    }
    s.clamp(0.0, 1.0)
}

/// Fraction of {summary, recommended_next_step, observed_risk_signals} present in a handoff packet.
pub fn handoff_quality(packet: Option<&HandoffPacket>) -> f64 {
    packet.map_or(0.0, |p| p.sections_filled() as f64 / 3.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub fn step(i: u32, action: &str, payload: Value) -> TrajectoryEntry {
        TrajectoryEntry {
            step: i,
            case_clock: i,
            action_type: ls_core::ActionName::parse(action).expect("an action name"),
            payload: payload.as_object().cloned().unwrap_or_default().into(),
            cost: 0.2,
            success: true,
            message: String::new(),
            is_intervention: ActionName::parse(action).is_some_and(|a| a.is_intervention()),
            control_boundary_phase: ls_core::BoundaryPhase::Intake,
            control_boundary_warnings: vec![],
        }
    }

    #[test]
    fn repeats_ignore_key_order_and_length_is_penalised() {
        let t = vec![
            step(1, "lookup_po", json!({"po_id": "PO-1", "x": 1})),
            step(2, "lookup_po", json!({"x": 1, "po_id": "PO-1"})),
            step(3, "lookup_receipt", json!({})),
        ];
        let (repeats, rp, lp, s) = efficiency(&t, 0.0);
        assert_eq!((repeats, lp), (1, 0.0));
        assert!((rp - 0.03).abs() < 1e-12 && (s - 0.97).abs() < 1e-12);
        let long: Vec<_> = (0..12)
            .map(|i| step(i, "zoom", json!({"page": i})))
            .collect();
        assert!((efficiency(&long, 0.0).2 - 0.08).abs() < 1e-12);
    }

    #[test]
    fn intervention_examples() {
        let t: Vec<_> = [
            "request_callback_verification",
            "route_to_security",
            "freeze_vendor_profile",
            "flag_duplicate_cluster_review",
        ]
        .iter()
        .enumerate()
        .map(|(i, a)| step(i as u32, a, json!({})))
        .collect();
        let i = InterventionInput {
            risky: true,
            decision: Some(Decision::EscalateFraud),
            traj: &t,
            successful: &successful_actions(&t),
            unsafe_payment: false,
            gold_campaign: true,
        };
        assert!((intervention_score(&i) - 0.78).abs() < 1e-9);
        let clean = vec![step(1, "lookup_po", json!({}))];
        let done = successful_actions(&clean);
        let i = InterventionInput {
            risky: false,
            decision: Some(Decision::Pay),
            traj: &clean,
            successful: &done,
            unsafe_payment: false,
            gold_campaign: false,
        };
        assert!((intervention_score(&i) - 0.45).abs() < 1e-9);
        assert_eq!(
            investigation_score(TaskType::TaskB, false, &clean, &done),
            1.0 / 3.0
        );
    }
}
