//! The reasons stage of grading: does the submission carry the decision-relevant codes with
//! evidence the agent revealed itself, does it claim what it cannot support, did it investigate
//! at all, and did it take controls the case did not call for? Its caps and penalties are what
//! make a grade need the reasons rather than the label and a checklist.

use crate::certificate::Revealed;
use crate::dimensions::is_grounded;
use ls_core::episode::TrajectoryEntry;
use ls_core::text::canonical_code;
use ls_core::{ActionName, Decision, TaskType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Cap of a submission made without any successful investigation tool call.
pub const NO_INVESTIGATION_CAP: f64 = 0.10;
// The evidence-blind caps sit at 0.15, below the 0.20 bound a blind policy's mean must keep:
// at 0.20 every capped case sat exactly on the bound, so one chance hit on a pool (a fixed
// position that happened to land on the gold line of one case in twelve) lifted the pool's
// mean over it. The margin absorbs such luck without grading luck differently from reading.

/// Cap of an ESCALATE_FRAUD on a benign case (the "at most 0.25", taken at 0.15: with
/// a 0.25 here escalate-everything policies averaged over 0.20 on balanced pools).
pub const BENIGN_ESCALATION_CAP: f64 = 0.15;
/// Cap of a HOLD or NEEDS_REVIEW on a benign case (outside Task A): a false positive too, and
/// without it a hold-everything policy kept the evidence and process credit (0.38 on a clean
/// Task B invoice).
pub const BENIGN_HOLD_CAP: f64 = 0.15;
/// Cap of a risky case whose decision names none of the gold's codes with grounded evidence.
pub const UNSUPPORTED_DECISION_CAP: f64 = 0.15;
/// Cap when three or more interventions the case did not call for were taken (a checklist).
pub const CHECKLIST_CAP: f64 = 0.15;
/// Cap of a risky case decided correctly with under half of its required controls (interventions).
pub const CONTROLS_SKIPPED_CAP: f64 = 0.35;
/// Cost of each intervention the case did not call for.
pub const OVERCONTROL_COST: f64 = 0.05;
/// Most the over-control cost takes.
pub const OVERCONTROL_COST_MAX: f64 = 0.25;
/// Cost of claims without support: this times the share of claimed codes that are neither gold
/// nor backed by evidence the agent revealed (and of claims beyond the allowance).
pub const UNSUPPORTED_CLAIM_COST: f64 = 0.15;
/// Least single-reference match with the gold's evidence target for an entry to support a code
/// (document 0.35 + page 0.15 alone are not enough: the region or the token must overlap).
pub const MIN_SUPPORT_MATCH: f64 = 0.6;
/// Share of the gold codes that must be named with grounded evidence for a control-satisfied
/// resolution.
pub const MIN_SUPPORTED_RECALL: f64 = 0.5;
/// Cap of a PAY (outside Task A) that does not cite, from what the agent revealed, the invoice
/// facts that show the case is clean (see [`CleanTargets`]).
pub const UNVERIFIED_PAY_CAP: f64 = 0.15;
/// Most tokens one entry may cite to support a code or verify a PAY (a whole document is not a
/// citation: an entry listing every token of a page would otherwise overlap any gold target).
pub const MAX_CITATION_TOKENS: usize = 3;

/// The invoice lines a PAY must cite to show what was verified, read from the case documents:
/// the `Total:` line (every task), the bank line (C/D/E: the account paid) and the `PO:` line
/// (B: the three-way match). Noisy-OCR tokens at the same place count as the same line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanTargets {
    pub total: BTreeSet<String>,
    pub bank: BTreeSet<String>,
    pub po: BTreeSet<String>,
}

impl CleanTargets {
    pub fn of(case: &ls_core::schema::Case) -> Self {
        let mut t = Self::default();
        for d in case.invoices() {
            for tok in &d.accurate_ocr {
                let text = ls_core::text::normalize_text(&tok.text);
                let set = if text.starts_with("total") {
                    &mut t.total
                } else if text.starts_with("bank") || text.starts_with("iban") {
                    &mut t.bank
                } else if text.starts_with("po ")
                    || text.starts_with("po:")
                    || text.starts_with("po#")
                {
                    &mut t.po
                } else {
                    continue;
                };
                set.insert(tok.token_id.clone());
                set.extend(
                    d.noisy_ocr
                        .iter()
                        .filter(|n| n.bbox == tok.bbox && n.page == tok.page)
                        .map(|n| n.token_id.clone()),
                );
            }
        }
        t
    }

    /// Does the evidence map cite, with grounded and specific entries, the lines `task` needs,
    /// with at least half of its entries being such citations (so spam does not verify)?
    pub fn verified_by(
        &self,
        task: TaskType,
        evidence_map: &BTreeMap<String, Value>,
        revealed: Revealed<'_>,
    ) -> bool {
        let needed: Vec<&BTreeSet<String>> = match task {
            TaskType::TaskA => return true,
            TaskType::TaskB => vec![&self.total, &self.po],
            _ => vec![&self.total, &self.bank],
        };
        let cited: Vec<BTreeSet<&str>> = evidence_map
            .values()
            .filter(|v| is_grounded(v, revealed))
            .filter_map(crate::dimensions::read_ref)
            .filter(|r| !r.token_ids.is_empty() && r.token_ids.len() <= MAX_CITATION_TOKENS)
            .map(|r| r.token_ids.into_iter().collect())
            .collect();
        let hit =
            |c: &BTreeSet<&str>, set: &BTreeSet<String>| set.iter().any(|t| c.contains(t.as_str()));
        let targets: Vec<&BTreeSet<String>> =
            needed.into_iter().filter(|s| !s.is_empty()).collect();
        let useful = cited
            .iter()
            .filter(|c| targets.iter().any(|s| hit(c, s)))
            .count();
        targets.iter().all(|s| cited.iter().any(|c| hit(c, s))) && 2 * useful >= evidence_map.len()
    }
}

/// What the reasons stage found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReasonsReport {
    /// Gold decision-relevant codes (reason, fraud, discrepancy, campaign; canonical).
    pub gold_codes: usize,
    /// Gold codes the agent named.
    pub named_gold: usize,
    /// Gold codes the agent named with an evidence entry grounded in what it revealed.
    pub supported_gold: usize,
    /// Gold codes the agent named and cited with a grounded entry that points away from the
    /// gold's evidence for them (a revealed token picked by position, not by reading).
    pub misdirected_gold: usize,
    /// Codes the agent claimed.
    pub claimed: usize,
    /// Claimed codes that are not gold.
    pub unsupported_claims: usize,
    /// Did at least one investigation tool succeed?
    pub investigated: bool,
    /// Interventions taken that the case did not call for.
    pub uncalled_interventions: Vec<ActionName>,
    /// A PAY outside Task A that cites the verified invoice lines (true for other decisions).
    pub pay_verified: bool,
}

impl ReasonsReport {
    /// Share of gold codes named with grounded evidence (1 when the gold names none).
    pub fn supported_recall(&self) -> f64 {
        if self.gold_codes == 0 {
            1.0
        } else {
            self.supported_gold as f64 / self.gold_codes as f64
        }
    }

    /// Share of claims that are gold (1 when nothing is claimed).
    pub fn precision(&self) -> f64 {
        if self.claimed == 0 {
            1.0
        } else {
            1.0 - self.unsupported_claims as f64 / self.claimed as f64
        }
    }
}

pub struct ReasonsInput<'a> {
    pub task: TaskType,
    pub agent_codes: &'a [&'static str],
    pub gold_codes: &'a BTreeSet<&'static str>,
    pub evidence_map: &'a BTreeMap<String, Value>,
    /// The gold's evidence target per code (where it has one).
    pub gold_targets: &'a BTreeMap<String, ls_core::EvidenceRef>,
    pub revealed: Revealed<'a>,
    pub trajectory: &'a [TrajectoryEntry],
    pub successful: &'a BTreeSet<ActionName>,
    /// The controls the case calls for (the hidden world's required actions) ...
    pub required_actions: &'a [ActionName],
    /// ... and the artifacts it needs (the request that delivers one is called for too).
    pub required_artifacts: &'a [ls_core::ArtifactId],
    /// Is the gold decision ESCALATE_FRAUD? Escalating fraud calls for routing it to security
    /// and freezing the vendor profile.
    pub fraud_case: bool,
    /// What the agent's tools observed: the controls the control boundary requires for them
    /// (callback, security route, duplicate review) are called for on any case, benign ones
    /// included, since they are owed to the observation, not to the label.
    pub observed_signals: &'a [String],
    /// The agent's decision and the lines a PAY must cite.
    pub decision: Option<Decision>,
    pub clean_targets: &'a CleanTargets,
}

/// Did the case call for intervention `a`?
fn called_for(i: &ReasonsInput<'_>, a: ActionName) -> bool {
    let observed = |group: &[&str]| {
        i.observed_signals
            .iter()
            .any(|s| group.contains(&s.as_str()))
    };
    let owed_to_observation = match a {
        ActionName::RequestCallbackVerification => {
            observed(&crate::boundary::HIGH_RISK_PAYMENT_SIGNALS)
        }
        ActionName::RouteToSecurity => observed(&crate::boundary::SECURITY_SIGNALS),
        ActionName::FlagDuplicateClusterReview => observed(&crate::boundary::DUPLICATE_SIGNALS),
        _ => false,
    };
    owed_to_observation
        || a == ActionName::CreateHumanHandoff
        || i.required_actions.contains(&a)
        || a.scheduled_artifact()
            .is_some_and(|x| i.required_artifacts.contains(&x))
        || (i.fraud_case
            && matches!(
                a,
                ActionName::RouteToSecurity | ActionName::FreezeVendorProfile
            ))
}

pub fn evaluate(i: &ReasonsInput<'_>) -> ReasonsReport {
    let grounded_codes: BTreeSet<&'static str> = i
        .evidence_map
        .iter()
        .filter(|(_, v)| is_grounded(v, i.revealed))
        .filter_map(|(k, _)| canonical_code(k))
        .collect();
    // A gold code is supported by an entry the agent grounded that also points at the gold's own
    // evidence for it (same document and page, overlapping region or token), so a revealed but
    // unrelated token (a positional guess) supports nothing.
    let supports = |code: &str| {
        i.evidence_map.iter().any(|(k, v)| {
            canonical_code(k) == Some(code)
                && is_grounded(v, i.revealed)
                && crate::dimensions::read_ref(v)
                    .is_some_and(|r| r.token_ids.len() <= MAX_CITATION_TOKENS)
                && i.gold_targets.get(code).is_none_or(|t| {
                    crate::dimensions::single_evidence_score(v, t) >= MIN_SUPPORT_MATCH
                })
        })
    };
    let misdirected = |code: &str| {
        !supports(code)
            && i.gold_targets.get(code).is_some_and(|t| {
                i.evidence_map.iter().any(|(k, v)| {
                    canonical_code(k) == Some(code)
                        && is_grounded(v, i.revealed)
                        && crate::dimensions::single_evidence_score(v, t) < MIN_SUPPORT_MATCH
                })
            })
    };
    let named: BTreeSet<&'static str> = i.agent_codes.iter().copied().collect();
    let task_a = i.task == TaskType::TaskA;
    ReasonsReport {
        gold_codes: if task_a { 0 } else { i.gold_codes.len() },
        named_gold: i.gold_codes.intersection(&named).count(),
        supported_gold: i
            .gold_codes
            .iter()
            .filter(|c| named.contains(*c) && supports(c))
            .count(),
        misdirected_gold: i
            .gold_codes
            .iter()
            .filter(|c| named.contains(*c) && misdirected(c))
            .count(),
        claimed: named.len(),
        // A claim beyond the gold is unsupported unless the agent cited evidence it revealed for
        // it; claims beyond the allowance are spam whatever they cite.
        unsupported_claims: (named
            .difference(i.gold_codes)
            .filter(|c| !grounded_codes.contains(*c))
            .count()
            + named
                .len()
                .saturating_sub(crate::dimensions::claim_allowance(i.gold_codes.len())))
        .min(named.len()),
        investigated: i
            .trajectory
            .iter()
            .any(|t| t.success && !t.is_intervention && t.action_type != "submit_decision"),
        uncalled_interventions: i
            .successful
            .iter()
            .copied()
            .filter(|a| a.is_intervention() && !called_for(i, *a))
            .collect(),
        pay_verified: i.decision != Some(Decision::Pay)
            || i.clean_targets
                .verified_by(i.task, i.evidence_map, i.revealed),
    }
}

/// The stage's caps, each with its breakdown key.
pub fn caps(
    r: &ReasonsReport,
    task: TaskType,
    risky: bool,
    decision: Option<Decision>,
    decision_correct: bool,
    control_coverage: f64,
) -> Vec<(&'static str, f64)> {
    let mut caps = Vec::new();
    if !r.investigated {
        caps.push(("no_investigation_cap", NO_INVESTIGATION_CAP));
    }
    if !risky && task != TaskType::TaskA {
        match decision {
            Some(Decision::EscalateFraud) => {
                caps.push(("benign_escalation_cap", BENIGN_ESCALATION_CAP));
            }
            Some(Decision::Hold | Decision::NeedsReview) => {
                caps.push(("benign_hold_cap", BENIGN_HOLD_CAP));
            }
            _ => {}
        }
    }
    // Named gold codes cited more often away from their evidence than at it: the hits are luck
    // (an equal count is allowed: a careful agent may cite a second valid place, e.g. the other
    // spoofed mail or the other invoice of a split, which the gold target does not name).
    if risky && r.gold_codes > 0 && (r.supported_gold == 0 || r.supported_gold < r.misdirected_gold)
    {
        caps.push(("unsupported_decision_cap", UNSUPPORTED_DECISION_CAP));
    }
    if r.uncalled_interventions.len() >= 3 {
        caps.push(("checklist_cap", CHECKLIST_CAP));
    }
    if risky && decision_correct && control_coverage < 0.5 {
        caps.push(("controls_skipped_cap", CONTROLS_SKIPPED_CAP));
    }
    if !r.pay_verified {
        caps.push(("unverified_pay_cap", UNVERIFIED_PAY_CAP));
    }
    caps
}

/// The stage's additive penalties (≤ 0): over-control and unsupported claims.
pub fn penalties(r: &ReasonsReport) -> (f64, f64) {
    let overcontrol =
        -(OVERCONTROL_COST * r.uncalled_interventions.len() as f64).min(OVERCONTROL_COST_MAX);
    let claims = -UNSUPPORTED_CLAIM_COST * (1.0 - r.precision());
    (overcontrol, claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(action: &str, success: bool, intervention: bool) -> TrajectoryEntry {
        TrajectoryEntry {
            step: 1,
            case_clock: 1,
            action_type: action.into(),
            payload: Default::default(),
            cost: 0.0,
            success,
            message: String::new(),
            is_intervention: intervention,
            control_boundary_phase: String::new(),
            control_boundary_warnings: Vec::new(),
        }
    }

    #[test]
    fn codes_need_grounded_evidence_and_claims_need_support() {
        let gold = BTreeSet::from(["bank_override_attempt", "sender_domain_spoof"]);
        let revealed_refs = crate::RefSet::from(["INV-1".into(), "t17".into()]);
        let ev = BTreeMap::from([
            (
                "bank_override_attempt".to_owned(),
                json!({"doc_id": "INV-1", "token_ids": ["t17"]}),
            ),
            (
                "sender_domain_spoof".to_owned(),
                json!({"doc_id": "THR-1", "token_ids": ["thr-t1"]}),
            ),
        ]);
        let traj = [
            entry("ocr", true, false),
            entry("route_to_security", true, true),
            entry("freeze_vendor_profile", true, true),
        ];
        let successful = BTreeSet::from([
            ActionName::Ocr,
            ActionName::RouteToSecurity,
            ActionName::FreezeVendorProfile,
        ]);
        let codes = [
            "bank_override_attempt",
            "sender_domain_spoof",
            "duplicate_near_match",
        ];
        let r = evaluate(&ReasonsInput {
            task: TaskType::TaskD,
            agent_codes: &codes,
            gold_codes: &gold,
            evidence_map: &ev,
            gold_targets: &BTreeMap::new(),
            revealed: Revealed::refs(&revealed_refs),
            trajectory: &traj,
            successful: &successful,
            required_actions: &[ActionName::RouteToSecurity],
            required_artifacts: &[],
            fraud_case: false,
            observed_signals: &[],
            decision: Some(Decision::EscalateFraud),
            clean_targets: &CleanTargets::default(),
        });
        assert_eq!(
            (r.named_gold, r.supported_gold, r.unsupported_claims),
            (2, 1, 1),
            "the spoof entry cites an unrevealed thread; the duplicate claim cites nothing"
        );
        assert_eq!(r.supported_recall(), 0.5);
        assert_eq!(
            r.uncalled_interventions,
            vec![ActionName::FreezeVendorProfile]
        );
        let (over, claims) = penalties(&r);
        assert_eq!(over, -0.05);
        assert!((claims + 0.05).abs() < 1e-9, "{claims}");
        assert!(caps(
            &r,
            TaskType::TaskD,
            true,
            Some(Decision::EscalateFraud),
            true,
            1.0
        )
        .is_empty());
    }

    #[test]
    fn caps_for_no_investigation_benign_escalation_and_checklists() {
        let r = ReasonsReport {
            investigated: false,
            gold_codes: 2,
            uncalled_interventions: vec![ActionName::FreezeVendorProfile; 3],
            pay_verified: true,
            ..Default::default()
        };
        let keys: Vec<&str> = caps(
            &r,
            TaskType::TaskD,
            true,
            Some(Decision::EscalateFraud),
            true,
            0.2,
        )
        .into_iter()
        .map(|c| c.0)
        .collect();
        assert_eq!(
            keys,
            [
                "no_investigation_cap",
                "unsupported_decision_cap",
                "checklist_cap",
                "controls_skipped_cap"
            ]
        );
        let benign = ReasonsReport {
            investigated: true,
            pay_verified: true,
            ..Default::default()
        };
        assert_eq!(
            caps(
                &benign,
                TaskType::TaskB,
                false,
                Some(Decision::EscalateFraud),
                false,
                1.0
            ),
            vec![("benign_escalation_cap", BENIGN_ESCALATION_CAP)]
        );
        assert!(
            caps(
                &benign,
                TaskType::TaskA,
                false,
                Some(Decision::EscalateFraud),
                false,
                1.0
            )
            .is_empty(),
            "Task A grades no decision"
        );
        assert!(caps(
            &benign,
            TaskType::TaskB,
            false,
            Some(Decision::Pay),
            true,
            1.0
        )
        .is_empty());
    }

    #[test]
    fn a_pay_must_cite_the_verified_lines_specifically() {
        let t = CleanTargets {
            total: BTreeSet::from(["i-t9".to_owned()]),
            bank: BTreeSet::from(["i-t4".to_owned()]),
            po: BTreeSet::from(["i-t2".to_owned()]),
        };
        let revealed_refs: crate::RefSet = ["INV-1", "i-t2", "i-t4", "i-t9", "i-t5"]
            .into_iter()
            .map(Into::into)
            .collect();
        let rev = Revealed::refs(&revealed_refs);
        let e = |toks: &[&str]| json!({"doc_id": "INV-1", "token_ids": toks});
        let careful = BTreeMap::from([
            ("bank_account_verified".to_owned(), e(&["i-t4"])),
            ("invoice_total".to_owned(), e(&["i-t9"])),
            ("invoice_number".to_owned(), e(&["i-t5"])),
        ]);
        assert!(t.verified_by(TaskType::TaskD, &careful, rev));
        assert!(
            !t.verified_by(TaskType::TaskB, &careful, rev),
            "Task B needs the PO line"
        );
        let one_positional = BTreeMap::from([("invoice".to_owned(), e(&["i-t5"]))]);
        assert!(!t.verified_by(TaskType::TaskD, &one_positional, rev));
        let page = BTreeMap::from([("invoice".to_owned(), e(&["i-t2", "i-t4", "i-t5", "i-t9"]))]);
        assert!(
            !t.verified_by(TaskType::TaskD, &page, rev),
            "a whole page is not a citation"
        );
        let unrevealed = BTreeMap::from([
            ("bank".to_owned(), e(&["i-t4"])),
            ("total".to_owned(), e(&["i-t99"])),
        ]);
        assert!(
            !t.verified_by(TaskType::TaskD, &unrevealed, rev),
            "a guessed token id verifies nothing"
        );
        let mut padded = careful.clone();
        for k in 0..4 {
            padded.insert(format!("extra{k}"), e(&["i-t5"]));
        }
        assert!(
            !t.verified_by(TaskType::TaskD, &padded, rev),
            "most entries must be verification citations"
        );
        assert!(t.verified_by(TaskType::TaskA, &BTreeMap::new(), rev));
        let r = ReasonsReport {
            investigated: true,
            pay_verified: false,
            ..Default::default()
        };
        assert_eq!(
            caps(&r, TaskType::TaskD, false, Some(Decision::Pay), true, 1.0),
            vec![("unverified_pay_cap", UNVERIFIED_PAY_CAP)]
        );
    }

    #[test]
    fn lucky_positional_hits_do_not_lift_the_unsupported_decision_cap() {
        let r = ReasonsReport {
            investigated: true,
            gold_codes: 7,
            named_gold: 3,
            supported_gold: 1,
            misdirected_gold: 2,
            pay_verified: true,
            ..Default::default()
        };
        assert!(caps(
            &r,
            TaskType::TaskC,
            true,
            Some(Decision::EscalateFraud),
            true,
            1.0
        )
        .contains(&("unsupported_decision_cap", UNSUPPORTED_DECISION_CAP)));
        let read = ReasonsReport {
            supported_gold: 1,
            misdirected_gold: 0,
            ..r.clone()
        };
        assert!(caps(
            &read,
            TaskType::TaskC,
            true,
            Some(Decision::EscalateFraud),
            true,
            1.0
        )
        .is_empty());
        let second_place = ReasonsReport {
            supported_gold: 1,
            misdirected_gold: 1,
            ..r
        };
        assert!(
            caps(
                &second_place,
                TaskType::TaskC,
                true,
                Some(Decision::EscalateFraud),
                true,
                1.0
            )
            .is_empty(),
            "an equal count is a second valid place, not luck"
        );
    }

    #[test]
    fn controls_owed_to_an_observation_are_called_for_on_benign_cases() {
        let traj = vec![
            entry("search_ledger", true, false),
            entry("flag_duplicate_cluster_review", true, true),
            entry("request_callback_verification", true, true),
            entry("route_to_security", true, true),
        ];
        let successful = BTreeSet::from([
            ActionName::SearchLedger,
            ActionName::FlagDuplicateClusterReview,
            ActionName::RequestCallbackVerification,
            ActionName::RouteToSecurity,
        ]);
        let observed = vec![
            "duplicate_near_match".to_owned(),
            "urgent_payment_pressure".to_owned(),
        ];
        let r = evaluate(&ReasonsInput {
            task: TaskType::TaskC,
            agent_codes: &[],
            gold_codes: &BTreeSet::new(),
            evidence_map: &BTreeMap::new(),
            gold_targets: &BTreeMap::new(),
            revealed: Revealed::refs(&BTreeSet::new()),
            trajectory: &traj,
            successful: &successful,
            required_actions: &[],
            required_artifacts: &[],
            fraud_case: false,
            observed_signals: &observed,
            decision: Some(Decision::Pay),
            clean_targets: &CleanTargets::default(),
        });
        // The duplicate review is owed to the observed ledger hit; urgency alone owes no
        // callback or security route, so those two are over-control.
        assert_eq!(
            r.uncalled_interventions,
            vec![
                ActionName::RequestCallbackVerification,
                ActionName::RouteToSecurity
            ]
        );
    }
}
