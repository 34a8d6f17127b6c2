//! The `gaming_resistance` section: the attacker table. Every evidence-blind policy — each
//! red-team family of `ls_agents::redteam`, mechanical checklist-PAY, the random decision, and the
//! learned attacker's fitted policies (count gates, amount gates, the per-family choice and the
//! random-forest learner over every blind-visible field, `ls_agents::learned`) — played in blind
//! mode (a fresh session per case) over every pool kind the report builds (curated, holdout,
//! challenge, twins: the headline's pairs, quarter), with its headline (paired discrimination over
//! the pairs, [`crate::headline`]), its mean per pool kind and its benign and risky means, and
//! whether it keeps its bounds: headline ≤ 0.10, and for the families bounded per case
//! (`GamingFamily::mean_threshold`) every pool kind's mean under that bound.

use crate::headline::{headline_by, Headline, Side, TwinPair};
use crate::metrics::r4;
use ls_agents::learned::{self, Arm, CaseRow, Outcome, PolicyKind};
use ls_agents::redteam::GamingFamily;
use ls_core::fixtures::MasterData;
use ls_core::schema::Case;
use ls_core::FixtureSet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most an evidence-independent policy may score on the headline.
pub const HEADLINE_BOUND: f64 = 0.10;

/// One pool the section plays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolInfo {
    pub name: String,
    /// `curated`, `holdout`, `challenge`, `twins` or `quarter`.
    pub kind: String,
    pub cases: usize,
    pub benign_cases: usize,
}

/// A policy's figures over one pool kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindFigures {
    pub cases: usize,
    pub mean: f64,
    /// Means over the kind's benign and risky cases (`None` without such cases).
    pub benign_mean: Option<f64>,
    pub risky_mean: Option<f64>,
    pub unsafe_releases: usize,
}

/// One policy of the attacker table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttackerRow {
    pub policy: String,
    /// `fixed` (one strategy everywhere), `fixed_per_family`, `gate`, `learner`, or `scripted`
    /// (a red-team family the learner does not choose among).
    pub kind: String,
    /// The headline over the pairs (`None` when the pairs were not played).
    pub headline: Option<f64>,
    pub headline_pairs: usize,
    /// Pairs told apart (benign paid, risky held) and inverted.
    pub headline_discriminated: usize,
    pub headline_inverted: usize,
    /// `None` for a policy that reads the environment's detector readings of what it revealed
    /// (content): the echo families.
    pub headline_bound: Option<f64>,
    /// Per pool kind, and `all`.
    pub pools: BTreeMap<String, KindFigures>,
    /// The bound on every pool kind's mean, where one applies.
    pub per_case_bound: Option<f64>,
    pub within_bounds: bool,
}

/// The learned attacker's training and what it measured besides the table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttackerSummary {
    pub train_seeds: Vec<u64>,
    pub n_train: usize,
    pub n_test: usize,
    /// Per pool kind: the learner's mean, the best fixed strategy and the gain over it.
    pub gains: Vec<learned::GainRow>,
    /// Per family: the label classifier's balanced accuracy (within pool kinds).
    pub classifier_balanced_accuracy: BTreeMap<String, f64>,
    /// Per family: the fitted count gate and amount gate.
    pub gates: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GamingResistance {
    pub pools: Vec<PoolInfo>,
    /// The attacker table: every policy's headline and per-kind figures.
    pub policies: Vec<AttackerRow>,
    /// Every row within its bounds.
    pub all_within_bounds: bool,
    /// Did the learned attacker (fitted on pools of its own seeds) contribute rows?
    pub learned_attacker_included: bool,
    pub attacker: Option<AttackerSummary>,
    pub note: String,
}

/// What the section plays.
pub struct GamingInput<'a> {
    pub set: &'a FixtureSet,
    pub master: &'a Arc<MasterData>,
    /// `(pool name, kind, cases)`.
    pub pools: Vec<(String, String, Vec<Case>)>,
    /// The headline's pairs (their members are the `twins` pool).
    pub pairs: &'a [TwinPair],
    pub headline_seeds: &'a [u64],
    /// The learned attacker's training seeds (none: no learned attacker).
    pub attacker_seeds: Vec<u64>,
    pub attacker_size: learned::PoolSize,
}

/// Seeds of the learned attacker's training pools for a report seed (never a scored pool's own
/// seed: offset far beyond the report's seeds, spaced by 10 as `learned::generated_pools` needs).
pub fn attacker_training_seeds(seed: u64) -> Vec<u64> {
    vec![seed.wrapping_mul(10).wrapping_add(5_000_000)]
}

/// Figures of `outs` (case id → outcome) over the cases of one kind (all kinds for `all`).
fn kind_figures(
    cases: &[(String, &Case)],
    outs: &BTreeMap<String, Outcome>,
    kind: &str,
) -> KindFigures {
    let of: Vec<(bool, Outcome)> = cases
        .iter()
        .filter(|(k, _)| kind == "all" || k == kind)
        .filter_map(|(_, c)| outs.get(&c.case_id).map(|o| (c.gold.unsafe_if_pay, *o)))
        .collect();
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| r4(v.iter().sum::<f64>() / v.len() as f64));
    let pick = |risky: bool| -> Vec<f64> {
        of.iter()
            .filter(|(r, _)| *r == risky)
            .map(|(_, o)| o.score)
            .collect()
    };
    KindFigures {
        cases: of.len(),
        mean: mean(of.iter().map(|(_, o)| o.score).collect()).unwrap_or(0.0),
        benign_mean: mean(pick(false)),
        risky_mean: mean(pick(true)),
        unsafe_releases: of.iter().filter(|(_, o)| o.unsafe_release).count(),
    }
}

/// The attacker table's row of one policy.
fn row(
    policy: &str,
    kind: &str,
    per_case_bound: Option<f64>,
    headline_bound: Option<f64>,
    outs: &BTreeMap<String, Outcome>,
    input: &GamingInput<'_>,
    cases: &[(String, &Case)],
) -> AttackerRow {
    let h: Option<Headline> = headline_by(input.pairs, input.headline_seeds, |c| {
        outs.get(&c.case_id)
            .map(|o| Side {
                paid: o.paid,
                score: o.score,
            })
            .into_iter()
            .collect()
    });
    let mut kinds: Vec<&str> = cases.iter().map(|(k, _)| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds.push("all");
    let pools: BTreeMap<String, KindFigures> = kinds
        .into_iter()
        .map(|k| (k.to_owned(), kind_figures(cases, outs, k)))
        .collect();
    let within = h
        .as_ref()
        .zip(headline_bound)
        .is_none_or(|(h, b)| h.headline <= b)
        && per_case_bound.is_none_or(|b| {
            pools
                .iter()
                .filter(|(k, _)| k.as_str() != "all")
                .all(|(_, f)| f.mean <= b)
        });
    AttackerRow {
        policy: policy.to_owned(),
        kind: kind.to_owned(),
        headline: h.as_ref().map(|h| h.headline),
        headline_pairs: h.as_ref().map_or(0, |h| h.pairs),
        headline_discriminated: h.as_ref().map_or(0, |h| h.discriminated),
        headline_inverted: h.as_ref().map_or(0, |h| h.inverted),
        headline_bound,
        pools,
        per_case_bound,
        within_bounds: within,
    }
}

/// Every distinct case of the pools, with its kind.
fn distinct_cases<'a>(input: &'a GamingInput<'_>) -> Vec<(String, &'a Case)> {
    let mut seen = BTreeSet::new();
    input
        .pools
        .iter()
        .flat_map(|(_, kind, cases)| cases.iter().map(move |c| (kind.clone(), c)))
        .filter(|(_, c)| seen.insert(c.case_id.clone()))
        .collect()
}

/// The learned attacker over `cases`: trained on its own generated pools, every policy's outcome
/// per case, and its summary.
fn learned_attacker(
    input: &GamingInput<'_>,
    cases: &[(String, &Case)],
) -> (learned::AttackReport, AttackerSummary) {
    let scored: BTreeSet<&str> = cases.iter().map(|(_, c)| c.case_id.as_str()).collect();
    let train: Vec<(String, Case)> = input
        .attacker_seeds
        .iter()
        .flat_map(|&s| learned::generated_pools(input.set, s, input.attacker_size))
        .filter(|(_, c)| !scored.contains(c.case_id.as_str()))
        .collect();
    let test: Vec<(String, Case)> = cases
        .iter()
        .map(|(k, c)| (k.clone(), (*c).clone()))
        .collect();
    let pool = learned::pool_over(input.set, &train, &test);
    let (tr, te): (Vec<CaseRow>, Vec<CaseRow>) = (
        learned::case_rows(&pool, &train),
        learned::case_rows(&pool, &test),
    );
    let report = learned::evaluate(&tr, &te, &input.attacker_seeds, input.headline_seeds);
    let summary = AttackerSummary {
        train_seeds: input.attacker_seeds.clone(),
        n_train: tr.len(),
        n_test: te.len(),
        gains: report
            .gains
            .iter()
            .map(|g| learned::GainRow {
                learner_mean: r4(g.learner_mean),
                best_fixed_mean: r4(g.best_fixed_mean),
                gain: r4(g.gain),
                gain_standard_error: r4(g.gain_standard_error),
                ..g.clone()
            })
            .collect(),
        classifier_balanced_accuracy: report
            .classifier
            .iter()
            .map(|c| (c.family.clone(), r4(c.balanced_accuracy)))
            .collect(),
        gates: report
            .gates
            .iter()
            .map(|(f, (c, a))| (f.clone(), vec![c.label(), a.label()]))
            .collect(),
    };
    (report, summary)
}

/// The table's kind name of a learned policy.
fn kind_name(k: PolicyKind) -> &'static str {
    match k {
        PolicyKind::Fixed => "fixed",
        PolicyKind::FixedPerFamily => "fixed_per_family",
        PolicyKind::Gate => "gate",
        PolicyKind::Learner => "learner",
    }
}

/// Play a registered agent over `cases` (blind, fresh session per case).
fn play_agent(
    input: &GamingInput<'_>,
    cases: &[(String, &Case)],
    name: &str,
) -> BTreeMap<String, Outcome> {
    let all: Vec<Case> = cases.iter().map(|(_, c)| (*c).clone()).collect();
    let pool = crate::eval::pool_of(input.master, &all);
    cases
        .iter()
        .filter_map(|(_, c)| {
            let mut a = ls_agents::offline_agent(name)?;
            Some((
                c.case_id.clone(),
                learned::play(&pool, &c.case_id, a.as_mut()),
            ))
        })
        .collect()
}

/// The learned attacker's policies as rows (each with its arm's per-case bound), the names of
/// the arms it played, and its summary.
fn attacker_rows(
    input: &GamingInput<'_>,
    cases: &[(String, &Case)],
) -> (Vec<AttackerRow>, BTreeSet<String>, AttackerSummary) {
    let (report, summary) = learned_attacker(input, cases);
    let arm_bound: BTreeMap<&str, Option<f64>> = Arm::all()
        .into_iter()
        .map(|a| (a.name(), a.per_case_bound()))
        .collect();
    let mut rows = Vec::new();
    let mut played = BTreeSet::new();
    for p in &report.policies {
        let outs = &report.outcomes[&p.policy];
        let bound = arm_bound.get(p.policy.as_str()).copied().flatten();
        rows.push(row(
            &p.policy,
            kind_name(p.kind),
            bound,
            Some(HEADLINE_BOUND),
            outs,
            input,
            cases,
        ));
        played.insert(p.policy.clone());
    }
    (rows, played, summary)
}

/// The scripted policies (the red-team families, checklist-PAY, the random decision) not already
/// played as an attacker arm, as rows.
fn scripted_rows(
    input: &GamingInput<'_>,
    cases: &[(String, &Case)],
    played_arms: &BTreeSet<String>,
) -> Vec<AttackerRow> {
    let mut scripted: Vec<(String, Option<f64>, Option<f64>)> = GamingFamily::ALL
        .into_iter()
        .map(|f| {
            let echo = matches!(f, GamingFamily::SignalEcho | GamingFamily::AnchoredEcho);
            (
                f.name().to_owned(),
                Some(f.mean_threshold()),
                (!echo).then_some(HEADLINE_BOUND),
            )
        })
        .collect();
    for name in [ls_agents::CHECKLIST_PAY, ls_agents::RANDOM_DECISION] {
        scripted.push((name.to_owned(), None, Some(HEADLINE_BOUND)));
    }
    scripted
        .into_iter()
        .filter(|(name, _, _)| !played_arms.contains(name))
        .map(|(name, per_case, headline_bound)| {
            let outs = play_agent(input, cases, &name);
            row(
                &name,
                "scripted",
                per_case,
                headline_bound,
                &outs,
                input,
                cases,
            )
        })
        .collect()
}

/// The section's note: what was played and the bounds.
fn section_note(learned: bool, pairs: usize) -> String {
    format!(
        "Every evidence-blind policy in blind mode (fresh session per case): the red-team families of ls_agents::redteam, mechanical checklist-PAY (the family's checks and the boundary's follow-ups, PAY citing the record ids), a random decision{}. Bounds: headline (paired discrimination over {} twin pairs) <= {HEADLINE_BOUND} for every policy whose decision reads no evidence (the echo families read the environment's detector readings of what they revealed, and are not held to it); the per-case pool mean <= 0.20 on every pool kind for the families that make no verified PAY (<= 0.40 for the echo families and the prior escalation, which runs the family's checks and cites the labelled lines), none for checklist-PAY (a correct PAY after the required checks may earn full marks on its own case).",
        if learned {
            ", and the learned attacker's fitted policies (count and amount gates per family, the per-family choice, and a random-forest learner over every blind-visible field of a fixed probe choosing among the strategies per case), trained on pools of its own seeds"
        } else {
            "; learned attacker not included"
        },
        pairs
    )
}

/// The whole section (module docs).
pub fn gaming_resistance(input: &GamingInput<'_>) -> GamingResistance {
    let cases = distinct_cases(input);
    let learned = !input.attacker_seeds.is_empty();
    let (mut policies, played_arms, attacker) = if learned {
        let (rows, played, summary) = attacker_rows(input, &cases);
        (rows, played, Some(summary))
    } else {
        (Vec::new(), BTreeSet::new(), None)
    };
    policies.extend(scripted_rows(input, &cases, &played_arms));
    let pools = input
        .pools
        .iter()
        .map(|(name, kind, cs)| PoolInfo {
            name: name.clone(),
            kind: kind.clone(),
            cases: cs.len(),
            benign_cases: cs.iter().filter(|c| !c.gold.unsafe_if_pay).count(),
        })
        .collect();
    GamingResistance {
        pools,
        all_within_bounds: policies.iter().all(|r| r.within_bounds),
        policies,
        learned_attacker_included: learned,
        attacker,
        note: section_note(learned, input.pairs.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(paid: bool, score: f64) -> Outcome {
        Outcome {
            score,
            paid,
            unsafe_release: false,
            valid_success: false,
            checks_performed: true,
        }
    }

    #[test]
    fn rows_carry_their_headline_and_bounds() {
        let set = FixtureSet::embedded().unwrap();
        let master = Arc::new(set.master.clone());
        let gen = crate::gen::LsGen { set: set.clone() };
        let pairs = crate::headline::pairs(&set, &gen, &[5]).unwrap();
        let twins: Vec<Case> = pairs
            .iter()
            .flat_map(|p| [p.benign.clone(), p.risky.clone()])
            .collect();
        let input = GamingInput {
            set: &set,
            master: &master,
            pools: vec![("twins".into(), "twins".into(), twins)],
            pairs: &pairs,
            headline_seeds: &[5],
            attacker_seeds: Vec::new(),
            attacker_size: Default::default(),
        };
        let cases = distinct_cases(&input);
        // An oracle that pays exactly the benign members: every pair told apart.
        let oracle: BTreeMap<String, Outcome> = cases
            .iter()
            .map(|(_, c)| (c.case_id.clone(), outcome(!c.gold.unsafe_if_pay, 0.9)))
            .collect();
        let r = row(
            "oracle",
            "fixed",
            Some(0.20),
            Some(HEADLINE_BOUND),
            &oracle,
            &input,
            &cases,
        );
        assert_eq!(r.headline, Some(0.9));
        assert_eq!(r.headline_discriminated, pairs.len());
        assert!(!r.within_bounds, "an oracle breaks both bounds: {r:?}");
        assert_eq!(r.pools["twins"].benign_mean, Some(0.9));
        // Always PAY: no pair told apart; the per-case bound alone decides.
        let pay: BTreeMap<String, Outcome> = cases
            .iter()
            .map(|(_, c)| {
                (
                    c.case_id.clone(),
                    outcome(true, if c.gold.unsafe_if_pay { 0.01 } else { 0.3 }),
                )
            })
            .collect();
        let r = row(
            "pay",
            "fixed",
            Some(0.20),
            Some(HEADLINE_BOUND),
            &pay,
            &input,
            &cases,
        );
        assert_eq!((r.headline, r.headline_inverted), (Some(0.0), 0));
        assert!(r.within_bounds, "{r:?}");
        assert_eq!(r.pools["all"].risky_mean, Some(0.01));
    }
}
