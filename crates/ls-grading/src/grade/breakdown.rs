//! The score breakdown under assembly.

use crate::{BreakdownKey, BreakdownValue};

/// The score breakdown while it is assembled: one slot per [`BreakdownKey`], so a later entry
/// for a key replaces an earlier one (as a map insert would) and the report is read off in name
/// order without sorting. A name outside the list (only a rubric dimension or reasons-stage cap
/// added without listing it; `tests/golden.rs` checks every curated report) still reaches the
/// report, merged in by name.
pub(super) struct Breakdown {
    slots: Vec<Option<BreakdownValue>>,
    unlisted: Vec<(&'static str, BreakdownValue)>,
}

impl Default for Breakdown {
    fn default() -> Self {
        Self {
            slots: vec![None; BreakdownKey::COUNT],
            unlisted: Vec::new(),
        }
    }
}

impl Breakdown {
    fn put(&mut self, k: BreakdownKey, v: BreakdownValue) {
        self.slots[k.index()] = Some(v);
    }

    /// A score, adjustment or cap (rounded to 4 dp in the report).
    pub(super) fn insert(&mut self, k: BreakdownKey, v: f64) {
        self.put(k, BreakdownValue::Number(v));
    }

    /// A score or cap under a name from another table (rubric dimensions, reasons-stage caps).
    pub(super) fn insert_named(&mut self, name: &'static str, v: f64) {
        match BreakdownKey::from_name(name) {
            Some(k) => self.insert(k, v),
            None => {
                self.unlisted.retain(|e| e.0 != name);
                self.unlisted.push((name, BreakdownValue::Number(v)));
            }
        }
    }

    /// A count (an integer on the wire).
    pub(super) fn count(&mut self, k: BreakdownKey, n: usize) {
        self.put(k, BreakdownValue::Count(n as u64));
    }

    /// A flag (a boolean on the wire).
    pub(super) fn flag(&mut self, k: BreakdownKey, v: bool) {
        self.put(k, BreakdownValue::Flag(v));
    }

    pub(super) fn text(&mut self, k: BreakdownKey, v: impl Into<String>) {
        self.put(k, BreakdownValue::Text(v.into()));
    }

    pub(super) fn list(&mut self, k: BreakdownKey, v: Vec<String>) {
        self.put(k, BreakdownValue::List(v));
    }

    /// The latest numeric value for `k` (the stages read typed results, not the breakdown).
    #[cfg(test)]
    fn get(&self, k: BreakdownKey) -> Option<f64> {
        self.slots[k.index()]
            .as_ref()
            .and_then(BreakdownValue::as_f64)
    }

    /// The report's breakdown in name order, numbers rounded (non-finite ones read 0).
    pub(super) fn into_report(self) -> crate::ScoreBreakdown {
        fn rounded(v: BreakdownValue) -> BreakdownValue {
            match v {
                BreakdownValue::Number(v) => {
                    BreakdownValue::Number(if v.is_finite() { crate::round4(v) } else { 0.0 })
                }
                other => other,
            }
        }
        let listed = BreakdownKey::ALL
            .iter()
            .zip(self.slots)
            .filter_map(|(k, v)| v.map(|v| (k.as_str(), rounded(v))));
        if self.unlisted.is_empty() {
            crate::ScoreBreakdown::from_sorted(listed.collect())
        } else {
            let unlisted = self.unlisted.into_iter().map(|(k, v)| (k, rounded(v)));
            crate::ScoreBreakdown::from_values(listed.chain(unlisted).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BreakdownKey as K;
    use std::collections::BTreeMap;

    #[test]
    fn breakdown_latest_value_wins_as_with_map_inserts() {
        let entries = [
            (K::raw_score, 1.0),
            (K::brier_score, 2.0),
            (K::raw_score, 3.0),
            (K::causal_score, f64::NAN),
            (K::brier_score, 0.123_456),
            (K::weighted_score, 4.0),
            (K::raw_score, 5.0),
        ];
        let mut bd = Breakdown::default();
        let mut map: BTreeMap<&str, f64> = BTreeMap::new();
        for (k, v) in entries {
            bd.insert(k, v);
            map.insert(k.as_str(), v);
            assert_eq!(
                bd.get(k).map(f64::to_bits),
                map.get(k.as_str()).map(|v| v.to_bits())
            );
        }
        assert_eq!(bd.get(K::log_score), None);
        let expected: Vec<(&str, f64)> = map
            .into_iter()
            .map(|(k, v)| (k, if v.is_finite() { crate::round4(v) } else { 0.0 }))
            .collect();
        let report = bd.into_report();
        assert_eq!(report.iter().collect::<Vec<_>>(), expected);
        assert_eq!(report["raw_score"], 5.0);
        assert_eq!(report.get("log_score"), None);
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            r#"{"brier_score":0.1235,"causal_score":0.0,"raw_score":5.0,"weighted_score":4.0}"#
        );
    }

    /// Names from other tables land in their slot when listed; unlisted ones are merged in by
    /// name (a later value replacing an earlier one), typed entries keep their JSON types.
    #[test]
    fn named_and_unlisted_entries_sort_like_an_ordered_map() {
        let mut bd = Breakdown::default();
        let mut map: BTreeMap<&str, serde_json::Value> = BTreeMap::new();
        for (name, v) in [
            ("zz_unlisted", 1.0),
            ("decision_score", 0.5),
            ("aa_unlisted", 2.0),
            ("zz_unlisted", 3.0),
            ("causal_", 4.0),
            ("checklist_cap", 0.25),
        ] {
            bd.insert_named(name, v);
            map.insert(name, serde_json::json!(v));
        }
        bd.flag(K::decision_correct, true);
        map.insert("decision_correct", serde_json::json!(true));
        bd.count(K::certificate_contradiction_count, 2);
        map.insert("certificate_contradiction_count", serde_json::json!(2));
        bd.list(K::trust_graph_reasons, vec!["r".into()]);
        map.insert("trust_graph_reasons", serde_json::json!(["r"]));
        bd.text(K::result_class, "correct");
        map.insert("result_class", serde_json::json!("correct"));
        let report = bd.into_report();
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert_eq!(report.get("zz_unlisted"), Some(3.0));
        assert_eq!(report.flag("decision_correct"), Some(true));
    }

    /// `ScoreBreakdown::from_values` (entries in any order) sorts as an ordered map does, names
    /// sharing a prefix, empty and non-ASCII ones included.
    #[test]
    fn from_values_sorts_like_an_ordered_map() {
        let names: [&'static str; 14] = [
            "causal_score",
            "causal_adjustment",
            "causal",
            "causal_association_score",
            "c",
            "",
            "certificate_required",
            "certificate_gate_cap",
            "certificate_score",
            "causalx",
            "causal_",
            "zz",
            "a\u{7f}",
            "a\u{e9}",
        ];
        let entries: Vec<(&'static str, f64)> = names
            .iter()
            .enumerate()
            .map(|(i, k)| (*k, i as f64))
            .collect();
        let map: BTreeMap<&str, f64> = entries.iter().copied().collect();
        let report = crate::ScoreBreakdown::from_values(
            entries
                .into_iter()
                .map(|(k, v)| (k, crate::BreakdownValue::Number(v)))
                .collect(),
        );
        assert_eq!(
            report.iter().collect::<Vec<_>>(),
            map.into_iter().collect::<Vec<_>>()
        );
    }
}
