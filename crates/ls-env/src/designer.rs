//! Regret-driven adversarial designer. It buckets cases by generator parameters (task family ×
//! attack family), records measured agent scores, estimates each bucket's regret against a
//! reference (the best score any run achieved on the bucket, or a supplied reference-policy
//! score, whichever is higher) and reorders a curriculum so the highest-regret, solvable buckets
//! come first; buckets never tried come before everything (they have unknown regret).

use ls_core::schema::Case;
use ls_core::text::round4;
use serde::Serialize;
use std::collections::BTreeMap;

/// A bucket counts as solvable once some run (or the reference) reached this score.
pub const SOLVABLE_SCORE: f64 = 0.6;
const MAX_BUCKETS: usize = 512;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bucket {
    pub runs: u32,
    pub mean_score: f64,
    pub best_score: f64,
    pub reference_score: Option<f64>,
    pub regret: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Designer {
    pub buckets: BTreeMap<String, Bucket>,
}

/// Generator parameters of a case: `<task>|<attack family>`.
pub fn bucket_key(case: &Case) -> String {
    let family = case
        .latent_mechanism
        .get("attack_family")
        .cloned()
        .or_else(|| {
            case.generator_metadata
                .as_ref()
                .and_then(|g| g.attack_category.clone())
        })
        .unwrap_or_else(|| {
            if case.gold.unsafe_if_pay {
                "curated_risk".into()
            } else {
                "clean".into()
            }
        });
    format!("{}|{}", case.task_type.as_str(), family)
}

impl Designer {
    pub fn record(&mut self, case: &Case, score: f64) {
        let key = bucket_key(case);
        if self.buckets.len() >= MAX_BUCKETS && !self.buckets.contains_key(&key) {
            return;
        }
        let s = if score.is_finite() {
            score.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let b = self.buckets.entry(key).or_default();
        b.mean_score = (b.mean_score * f64::from(b.runs) + s) / f64::from(b.runs + 1);
        b.runs += 1;
        b.best_score = b.best_score.max(s);
        Self::refresh(b);
    }

    fn refresh(b: &mut Bucket) {
        let reference = b.reference_score.unwrap_or(0.0).max(b.best_score);
        b.mean_score = round4(b.mean_score);
        b.regret = if b.runs == 0 {
            0.0
        } else {
            round4((reference - b.mean_score).max(0.0))
        };
    }

    fn solvable(b: &Bucket) -> bool {
        b.best_score.max(b.reference_score.unwrap_or(0.0)) >= SOLVABLE_SCORE
    }

    /// Buckets by priority: untried first, then solvable by regret, then unsolvable.
    pub fn priorities(&self) -> Vec<(String, f64, u32)> {
        let mut v: Vec<(&String, &Bucket)> = self.buckets.iter().collect();
        v.sort_by(|a, b| {
            let rank = |x: &Bucket| {
                if x.runs == 0 {
                    0
                } else if Self::solvable(x) {
                    1
                } else {
                    2
                }
            };
            rank(a.1)
                .cmp(&rank(b.1))
                .then(b.1.regret.total_cmp(&a.1.regret))
                .then(a.0.cmp(b.0))
        });
        v.into_iter()
            .map(|(k, b)| (k.clone(), b.regret, b.runs))
            .collect()
    }

    /// Compact summary (top buckets) for `info`.
    /// `info.adversarial_designer`: the bucket count and the `top` priorities.
    pub fn summary(&self, top: usize) -> DesignerSummary {
        let priorities = self
            .priorities()
            .into_iter()
            .take(top)
            .map(|(bucket, regret, runs)| Priority {
                bucket,
                regret,
                runs,
            })
            .collect();
        DesignerSummary {
            bucket_count: self.buckets.len(),
            priorities,
        }
    }
}

/// What [`Designer::summary`] reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DesignerSummary {
    pub bucket_count: usize,
    pub priorities: Vec<Priority>,
}

/// One bucket in the designer's priority order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Priority {
    pub bucket: String,
    pub regret: f64,
    pub runs: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the tests ask of the designer besides what the environment uses.
    impl Designer {
        /// Supply a reference policy's score for a bucket.
        fn set_reference(&mut self, key: &str, score: f64) {
            if self.buckets.len() < MAX_BUCKETS || self.buckets.contains_key(key) {
                let b = self.buckets.entry(key.to_owned()).or_default();
                b.reference_score = Some(score.clamp(0.0, 1.0));
                Self::refresh(b);
            }
        }

        /// Reorder case ids: cases of untried buckets first, then by bucket regret (solvable first),
        /// stable within a bucket.
        fn reorder<'a>(&self, cases: impl IntoIterator<Item = &'a Case>) -> Vec<String> {
            let prio: BTreeMap<String, usize> = self
                .priorities()
                .into_iter()
                .enumerate()
                .map(|(i, (k, _, _))| (k, i))
                .collect();
            let mut v: Vec<(usize, usize, String)> = cases
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    let k = bucket_key(c);
                    (
                        if self.buckets.get(&k).is_none_or(|b| b.runs == 0) {
                            0
                        } else {
                            1 + prio.get(&k).copied().unwrap_or(usize::MAX - 1)
                        },
                        i,
                        c.case_id.clone(),
                    )
                })
                .collect();
            v.sort();
            v.into_iter().map(|x| x.2).collect()
        }
    }

    #[test]
    fn high_regret_buckets_come_first() {
        let set = ls_core::FixtureSet::embedded().unwrap();
        let b1 = set.case("CASE-B-001").unwrap();
        let d1 = set.case("CASE-D-001").unwrap();
        let c1 = set.case("CASE-C-001").unwrap();
        let mut d = Designer::default();
        d.record(b1, 0.9);
        d.record(d1, 0.9);
        d.record(d1, 0.2);
        let order = d.reorder([b1, d1, c1]);
        assert_eq!(order[0], "CASE-C-001", "untried bucket first");
        assert_eq!(order[1], "CASE-D-001", "regret 0.35 before regret 0");
        let summary = serde_json::to_value(d.summary(2)).unwrap();
        assert_eq!(summary["bucket_count"], 2);
        assert_eq!(
            summary["priorities"][0],
            serde_json::json!({"bucket": bucket_key(d1), "regret": d.buckets[&bucket_key(d1)].regret, "runs": 2})
        );
        d.set_reference(&bucket_key(b1), 0.99);
        assert!(d.buckets[&bucket_key(b1)].regret > 0.0);
    }
}
