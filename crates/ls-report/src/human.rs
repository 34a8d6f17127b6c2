//! Human-baseline loader (§3.7). Without a file the summary says so; nothing is ever invented.

use crate::metrics::{mean, r4};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Largest human-baseline file read.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
pub const MAX_PARTICIPANTS: usize = 10_000;

/// The figures of one participant, and of the track (their case total and unweighted means):
/// flattened into both, so they are top-level keys of each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HumanFigures {
    pub case_count: f64,
    pub accuracy: f64,
    pub avg_minutes_per_case: f64,
    pub escalation_rate: f64,
    pub evidence_citation_rate: f64,
    pub false_positive_rate: f64,
    pub fraud_miss_rate: f64,
    pub calibration_score: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Participant {
    pub participant_id: String,
    pub role: String,
    #[serde(flatten)]
    pub figures: HumanFigures,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HumanBaselineSummary {
    pub track: String,
    pub track_label: String,
    pub available: bool,
    pub participant_count: usize,
    #[serde(flatten)]
    pub figures: HumanFigures,
    pub participants: Vec<Participant>,
    pub note: String,
    pub source_path: Option<String>,
}

fn empty(note: String, path: Option<&Path>) -> HumanBaselineSummary {
    HumanBaselineSummary {
        track: "human_baseline".into(),
        track_label: "Human-Baseline Track".into(),
        note,
        source_path: path.map(|p| p.display().to_string()),
        ..Default::default()
    }
}

/// The documented default human-baseline file (read when no other path is given).
pub const DEFAULT_PATH: &str = "artifacts/human_baseline.json";

/// Load a human-baseline file; `None` means no file was supplied.
pub fn load(path: Option<&Path>) -> HumanBaselineSummary {
    let Some(p) = path else {
        return empty("No human-baseline data was supplied (pass --human-baseline FILE or set LEDGERSHIELD_HUMAN_BASELINE_PATH). No human numbers are reported.".into(), None);
    };
    let text = match std::fs::metadata(p) {
        Ok(m) if m.len() > MAX_FILE_BYTES => {
            return empty(
                format!("Human-baseline file is larger than {MAX_FILE_BYTES} bytes; not read."),
                Some(p),
            )
        }
        Ok(_) => match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                return empty(
                    format!("Human-baseline file could not be read: {e}"),
                    Some(p),
                )
            }
        },
        Err(_) => {
            return empty(
                format!(
                    "Human-baseline file {} not found; no human numbers are reported.",
                    p.display()
                ),
                Some(p),
            )
        }
    };
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return empty(
                format!("Human-baseline file is not valid JSON: {e}"),
                Some(p),
            )
        }
    };
    summarize(&v, Some(p))
}

pub fn summarize(v: &Value, path: Option<&Path>) -> HumanBaselineSummary {
    type Obj = serde_json::Map<String, Value>;
    let num = |o: &Obj, k: &str| o.get(k).and_then(Value::as_f64).filter(|f| f.is_finite());
    let text = |o: &Obj, k: &str| {
        (o.get(k).and_then(Value::as_str)).map(|s| s.chars().take(64).collect::<String>())
    };
    let participants: Vec<Participant> = v
        .get("participants")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .take(MAX_PARTICIPANTS)
        .enumerate()
        .map(|(i, o)| Participant {
            participant_id: text(o, "participant_id").unwrap_or_else(|| format!("human-{}", i + 1)),
            role: text(o, "role").unwrap_or_else(|| "unknown".into()),
            figures: HumanFigures {
                case_count: num(o, "case_count").unwrap_or(0.0),
                accuracy: num(o, "accuracy").unwrap_or(0.0),
                avg_minutes_per_case: num(o, "avg_minutes_per_case").unwrap_or(0.0),
                escalation_rate: num(o, "escalation_rate").unwrap_or(0.0),
                evidence_citation_rate: num(o, "evidence_citation_rate").unwrap_or(0.0),
                false_positive_rate: num(o, "false_positive_rate").unwrap_or(0.0),
                fraud_miss_rate: num(o, "fraud_miss_rate").unwrap_or(0.0),
                calibration_score: num(o, "calibration_score").unwrap_or(0.0),
            },
        })
        .collect();
    if participants.is_empty() {
        return empty(
            "The human-baseline file has no valid participants; no human numbers are reported."
                .into(),
            path,
        );
    }
    let col =
        |f: fn(&Participant) -> f64| r4(mean(&participants.iter().map(f).collect::<Vec<_>>()));
    HumanBaselineSummary {
        track: "human_baseline".into(),
        track_label: "Human-Baseline Track".into(),
        available: true,
        participant_count: participants.len(),
        figures: HumanFigures {
            case_count: participants.iter().map(|p| p.figures.case_count).sum(),
            accuracy: col(|p| p.figures.accuracy),
            avg_minutes_per_case: col(|p| p.figures.avg_minutes_per_case),
            escalation_rate: col(|p| p.figures.escalation_rate),
            evidence_citation_rate: col(|p| p.figures.evidence_citation_rate),
            false_positive_rate: col(|p| p.figures.false_positive_rate),
            fraud_miss_rate: col(|p| p.figures.fraud_miss_rate),
            calibration_score: col(|p| p.figures.calibration_score),
        },
        note: v
            .get("note")
            .and_then(Value::as_str)
            .map(|s| s.chars().take(500).collect())
            .unwrap_or_else(|| "Self-reported participant summaries (unweighted means).".into()),
        participants,
        source_path: path.map(|p| p.display().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn loads_or_says_none() {
        let none = load(None);
        assert!(
            !none.available
                && none.participants.is_empty()
                && none.note.contains("No human-baseline")
        );
        let s = summarize(
            &json!({"participants": [{"participant_id": "p1", "role": "ap", "accuracy": 0.8, "case_count": 10}, {"accuracy": "x"}, 3]}),
            None,
        );
        assert_eq!(s.participant_count, 2);
        assert_eq!(s.participants[1].participant_id, "human-2");
        assert_eq!(s.participants[1].role, "unknown");
        assert_eq!(s.figures.accuracy, 0.4);
        assert_eq!(s.figures.case_count, 10.0);
        assert!(!summarize(&json!({"participants": []}), None).available);
    }
}
