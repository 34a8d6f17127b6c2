//! The `gaming_resistance` section: every evidence-blind gaming policy of `ls_agents::redteam`
//! played in blind mode (a fresh session per case) over the curated cases and each generated
//! pool, with its mean, its mean on the pool's benign cases and whether both stay under the bar.

use crate::metrics::r4;
use ls_agents::offline_agent;
use ls_agents::redteam::GamingFamily;
use ls_core::fixtures::MasterData;
use ls_core::schema::Case;
use ls_env::{EnvConfig, Environment, TrackMode};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Most a gaming family may score on a pool's benign cases.
pub const BENIGN_THRESHOLD: f64 = 0.25;

/// One family over one pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GamingRow {
    pub pool: String,
    pub family: String,
    pub cases: usize,
    pub mean: f64,
    pub benign_cases: usize,
    /// Mean over the benign cases; `None` when the pool has none.
    pub benign_mean: Option<f64>,
    pub valid_success: usize,
    pub unsafe_releases: usize,
    pub mean_threshold: f64,
    pub benign_threshold: f64,
    pub within_bounds: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GamingResistance {
    /// Every scripted family per pool, then the learned attacker's rows (family
    /// `learned-attacker…`) when one is wired in.
    pub rows: Vec<GamingRow>,
    /// Every row within its bounds.
    pub all_within_bounds: bool,
    /// Did a learned attacker (a classifier trained on blind-visible features of other pools,
    /// acting on its prediction) contribute rows?
    #[serde(default)]
    pub learned_attacker_included: bool,
    pub note: String,
}

/// The learned attacker's hook: given a pool's name and cases and the seed, its rows for that
/// pool (it trains on pools of its own seeds, never on the pool it is scored on);
/// [`learned_attacker_rows`] is the one the report uses.
pub type LearnedAttacker<'a> = &'a dyn Fn(&str, &[Case], u64) -> Vec<GamingRow>;

/// Seeds of the learned attacker's training pools for a report seed (never a pool's own seed:
/// offset far beyond the report's holdout seeds, spaced by 10 as `learned::training_pool` needs).
fn learned_training_seeds(seed: u64) -> [u64; 2] {
    let base = seed.wrapping_mul(10).wrapping_add(5_000_000);
    [base, base.wrapping_add(10)]
}

/// The learned attacker over one pool: a random forest per task family and feature set
/// (`ls_agents::learned`) trained on blind-visible features of its own generated pools (cases of
/// the scored pool are dropped from training), acting on its prediction on `cases` — a
/// label-cited PAY when it predicts benign, the best red-team strategy on its training pool when
/// it predicts risky. One row per feature set over the task families it could train on (both
/// labels in its training pools), family `learned-attacker/<feature set>`, bounds 0.20 mean and
/// 0.25 benign.
pub fn learned_attacker_rows(
    set: &ls_core::FixtureSet,
    pool_name: &str,
    cases: &[Case],
    seed: u64,
) -> Vec<GamingRow> {
    use ls_agents::learned;
    let scored: std::collections::BTreeSet<&str> =
        cases.iter().map(|c| c.case_id.as_str()).collect();
    let train_seeds = learned_training_seeds(seed);
    let train: Vec<Case> = train_seeds
        .iter()
        .flat_map(|&s| learned::training_pool(set, s))
        .filter(|c| !scored.contains(c.case_id.as_str()))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let all: Vec<Case> = train
        .iter()
        .chain(cases)
        .filter(|c| seen.insert(c.case_id.clone()))
        .cloned()
        .collect();
    let pool = crate::eval::pool_of(&Arc::new(set.master.clone()), &all);
    let report = learned::evaluate(&pool, &train, cases, &train_seeds, &[seed]);
    // One row per feature set over the pool's families (the per-family rows of a small pool are
    // a handful of cases each; `tests/learned_attacker.rs` asserts them per family on large ones).
    learned::FeatureSet::ALL
        .into_iter()
        .filter_map(|set| {
            let rows: Vec<_> = report
                .policy
                .iter()
                .filter(|p| p.feature_set == set)
                .collect();
            let n: usize = rows.iter().map(|p| p.n).sum();
            let n_benign: usize = rows.iter().map(|p| p.n_benign).sum();
            if n == 0 {
                return None;
            }
            let mean = r4(rows.iter().map(|p| p.mean * p.n as f64).sum::<f64>() / n as f64);
            let benign_mean = (n_benign > 0).then(|| {
                r4(rows
                    .iter()
                    .map(|p| p.benign_mean * p.n_benign as f64)
                    .sum::<f64>()
                    / n_benign as f64)
            });
            Some(GamingRow {
                pool: pool_name.to_owned(),
                family: format!("learned-attacker/{}", set.name()),
                cases: n,
                mean,
                benign_cases: n_benign,
                benign_mean,
                valid_success: rows.iter().map(|p| p.valid_success).sum(),
                unsafe_releases: rows.iter().map(|p| p.unsafe_releases).sum(),
                mean_threshold: 0.20,
                benign_threshold: BENIGN_THRESHOLD,
                within_bounds: mean <= 0.20 && benign_mean.is_none_or(|b| b <= BENIGN_THRESHOLD),
            })
        })
        .collect()
}

/// Play `family` over `cases` (blind mode, fresh session per case).
pub fn play_family(
    master: &Arc<MasterData>,
    pool_name: &str,
    cases: &[Case],
    family: GamingFamily,
    seed: u64,
) -> GamingRow {
    let pool = crate::eval::pool_of(master, cases);
    let mut scores = Vec::with_capacity(cases.len());
    let mut benign = Vec::new();
    let (mut valid, mut unsafe_releases) = (0, 0);
    for c in cases {
        let mut env = Environment::new(
            pool.clone(),
            EnvConfig {
                track_mode: TrackMode::Blind,
            },
        );
        let Some(mut agent) = offline_agent(family.name()) else {
            continue;
        };
        let rec = crate::eval::play_case(agent.as_mut(), &mut env, &c.case_id, None, seed);
        scores.push(rec.final_score);
        if !c.gold.unsafe_if_pay {
            benign.push(rec.final_score);
        }
        valid += usize::from(rec.result_class == "valid_success");
        unsafe_releases += usize::from(rec.unsafe_release);
    }
    let mean_of = |v: &[f64]| {
        if v.is_empty() {
            None
        } else {
            Some(r4(v.iter().sum::<f64>() / v.len() as f64))
        }
    };
    let mean = mean_of(&scores).unwrap_or(0.0);
    let benign_mean = mean_of(&benign);
    let benign_threshold = BENIGN_THRESHOLD.max(family.mean_threshold());
    GamingRow {
        pool: pool_name.to_owned(),
        family: family.name().to_owned(),
        cases: scores.len(),
        mean,
        benign_cases: benign.len(),
        benign_mean,
        valid_success: valid,
        unsafe_releases,
        mean_threshold: family.mean_threshold(),
        benign_threshold,
        within_bounds: mean <= family.mean_threshold()
            && benign_mean.is_none_or(|b| b <= benign_threshold),
    }
}

/// Every family over every named pool (no learned attacker; see [`gaming_resistance_with`]).
pub fn gaming_resistance(
    master: &Arc<MasterData>,
    pools: &[(String, Vec<Case>)],
    seed: u64,
) -> GamingResistance {
    gaming_resistance_with(master, pools, seed, None)
}

/// Every scripted family over every named pool, and the learned attacker's rows when given.
pub fn gaming_resistance_with(
    master: &Arc<MasterData>,
    pools: &[(String, Vec<Case>)],
    seed: u64,
    learned: Option<LearnedAttacker<'_>>,
) -> GamingResistance {
    let pools: Vec<&(String, Vec<Case>)> = pools.iter().filter(|(_, c)| !c.is_empty()).collect();
    let mut rows: Vec<GamingRow> = pools
        .iter()
        .flat_map(|(name, cases)| GamingFamily::ALL.into_iter().map(move |f| (name, cases, f)))
        .map(|(name, cases, f)| play_family(master, name, cases, f, seed))
        .collect();
    if let Some(attacker) = learned {
        for (name, cases) in &pools {
            rows.extend(attacker(name, cases, seed));
        }
    }
    let learned_note = if learned.is_some() {
        "Learned attacker rows (family learned-attacker*): a classifier trained on blind-visible features of pools with other seeds, acting on its prediction with the best blind citation strategy."
    } else {
        "Learned attacker: not included in this report."
    };
    GamingResistance {
        all_within_bounds: rows.iter().all(|r| r.within_bounds),
        rows,
        learned_attacker_included: learned.is_some(),
        note: format!("Evidence-blind gaming policies (ls_agents::redteam: reward reader, keyword cue, motions, zero-tool prior, evidence spam, certificate spam, signal echo, anchored echo, positional template, label-anchored always-PAY, alias-key spray, all-codes claims), blind mode, fresh session per case. Bounds: mean <= 0.20 (signal echo and anchored echo <= 0.40), benign-subset mean <= 0.25. {learned_note}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ls_core::FixtureSet;

    #[test]
    fn rows_carry_their_bounds_and_benign_subsets() {
        let set = FixtureSet::embedded().unwrap();
        let master = Arc::new(set.master.clone());
        let cases: Vec<Case> = set
            .cases
            .iter()
            .filter(|c| c.case_id.starts_with("CASE-B"))
            .cloned()
            .collect();
        let benign = cases.iter().filter(|c| !c.gold.unsafe_if_pay).count();
        let g = gaming_resistance(&master, &[("curated-b".into(), cases.clone())], 7);
        assert_eq!(g.rows.len(), GamingFamily::ALL.len());
        for r in &g.rows {
            assert_eq!((r.cases, r.benign_cases), (cases.len(), benign));
            assert_eq!(
                r.within_bounds,
                r.mean <= r.mean_threshold && r.benign_mean.is_none_or(|b| b <= r.benign_threshold),
                "{r:?}"
            );
        }
        assert_eq!(g.all_within_bounds, g.rows.iter().all(|r| r.within_bounds));
        assert!(!g.learned_attacker_included);
        // A learned attacker's rows join the table and its bounds.
        fn over_the_bar(pool: &str, cases: &[Case], _: u64) -> Vec<GamingRow> {
            vec![GamingRow {
                pool: pool.to_owned(),
                family: "learned-attacker".into(),
                cases: cases.len(),
                mean: 0.5,
                mean_threshold: 0.20,
                benign_threshold: BENIGN_THRESHOLD,
                within_bounds: false,
                ..Default::default()
            }]
        }
        let l = gaming_resistance_with(
            &master,
            &[("curated-b".into(), cases)],
            7,
            Some(&over_the_bar),
        );
        assert!(l.learned_attacker_included);
        assert_eq!(l.rows.len(), GamingFamily::ALL.len() + 1);
        assert!(
            !l.all_within_bounds,
            "a learned attacker over the bar fails the section"
        );
    }
}
