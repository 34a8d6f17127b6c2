//! The score breakdown under assembly.

use crate::BreakdownValue;

/// The score breakdown while it is assembled: entries appended in order and sorted once at the
/// end (cheaper than ~100 map inserts); a later entry for a key replaces an earlier one, as a map
/// insert would.
#[derive(Default)]
pub(super) struct Breakdown(Vec<(&'static str, BreakdownValue)>);

impl Breakdown {
    /// A score, adjustment or cap (rounded to 4 dp in the report).
    pub(super) fn insert(&mut self, k: &'static str, v: f64) {
        self.0.push((k, BreakdownValue::Number(v)));
    }

    /// A count (an integer on the wire).
    pub(super) fn count(&mut self, k: &'static str, n: usize) {
        self.0.push((k, BreakdownValue::Count(n as u64)));
    }

    /// A flag (a boolean on the wire).
    pub(super) fn flag(&mut self, k: &'static str, v: bool) {
        self.0.push((k, BreakdownValue::Flag(v)));
    }

    pub(super) fn text(&mut self, k: &'static str, v: impl Into<String>) {
        self.0.push((k, BreakdownValue::Text(v.into())));
    }

    pub(super) fn list(&mut self, k: &'static str, v: Vec<String>) {
        self.0.push((k, BreakdownValue::List(v)));
    }

    /// The latest numeric value for `k` (the stages read typed results, not the breakdown).
    #[cfg(test)]
    fn get(&self, k: &str) -> Option<f64> {
        self.0
            .iter()
            .rev()
            .find(|e| e.0 == k)
            .and_then(|e| e.1.as_f64())
    }

    /// The report's breakdown, numbers rounded (non-finite ones read 0); the latest value of a
    /// key wins.
    pub(super) fn into_report(self) -> crate::ScoreBreakdown {
        crate::ScoreBreakdown::from_values(
            self.0
                .into_iter()
                .map(|(k, v)| match v {
                    BreakdownValue::Number(v) => (
                        k,
                        BreakdownValue::Number(if v.is_finite() { crate::round4(v) } else { 0.0 }),
                    ),
                    other => (k, other),
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn breakdown_latest_value_wins_as_with_map_inserts() {
        let entries = [
            ("b", 1.0),
            ("a", 2.0),
            ("b", 3.0),
            ("c", f64::NAN),
            ("a", 0.123_456),
            ("d", 4.0),
            ("b", 5.0),
        ];
        let mut bd = Breakdown::default();
        let mut map: BTreeMap<&str, f64> = BTreeMap::new();
        for (k, v) in entries {
            bd.insert(k, v);
            map.insert(k, v);
            assert_eq!(bd.get(k).map(f64::to_bits), map.get(k).map(|v| v.to_bits()));
        }
        assert_eq!(bd.get("z"), None);
        let expected: Vec<(&str, f64)> = map
            .into_iter()
            .map(|(k, v)| (k, if v.is_finite() { crate::round4(v) } else { 0.0 }))
            .collect();
        let report = bd.into_report();
        assert_eq!(report.iter().collect::<Vec<_>>(), expected);
        assert_eq!(report["b"], 5.0);
        assert_eq!(report.get("z"), None);
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            r#"{"a":0.1235,"b":5.0,"c":0.0,"d":4.0}"#
        );
    }

    /// Names sharing their first eight bytes (or shorter than eight) sort as whole strings do.
    #[test]
    fn breakdown_sorts_like_an_ordered_map() {
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
        let report = crate::ScoreBreakdown::from_entries(entries);
        assert_eq!(
            report.iter().collect::<Vec<_>>(),
            map.into_iter().collect::<Vec<_>>()
        );
    }
}
