//! One Financial Audit environment as the Python bindings hold it: `AuditEnv` (its adaptive
//! adversary and score history persist across resets, as in one HTTP session) plus what the
//! last reply showed — the candidate findings and the fixed-size features.

use crate::errors::Refusal;
use audit_env::episode::{
    AuditEnv, AuditObservation, AuditResetRequest, AuditStepEnvelope, AuditStepRequest,
};
use audit_env::model::{Finding, TaskId};
use serde_json::Value;

/// Entries of the audit feature vector ([`features`] documents them).
pub const FEATURES: usize = 13;
/// Slots of the candidate mask. The largest candidate list any task can have is 1 + (distinct
/// record ids shown) × (valid error types): fraud detection shows `TXN_COUNT` (84) transactions
/// and `VENDOR_COUNT` (26) vendors under 10 error types, 12 with both regulatory-shock types
/// (1 + 110 × 12 = 1,321); GST reconciliation 45 purchase-register entries and at most 45
/// GSTR-2B entries, whose invoice numbers repeat the register's (1 + 90 × 12 = 1,081 at most);
/// invoice matching 289 and expense audit 134. 2,048 holds every one (a test checks every task
/// over random seeds, difficulties and modes); a longer list would be cut.
pub const MAX_CANDIDATES: usize = 2048;
/// The confidence a candidate finding states.
pub const CANDIDATE_CONFIDENCE: f64 = 0.9;

/// A candidate: submit the episode as it stands, or report one finding.
#[derive(Debug, Clone, PartialEq)]
pub enum Candidate {
    SubmitFinal,
    Finding {
        document_id: String,
        error_type: String,
    },
}

impl Candidate {
    pub fn request(&self) -> AuditStepRequest {
        match self {
            Candidate::SubmitFinal => AuditStepRequest {
                action: None,
                findings: Some(vec![]),
                submit_final: Some(true),
                request_categories: None,
                session_id: None,
            },
            Candidate::Finding {
                document_id,
                error_type,
            } => {
                let finding: Finding = serde_json::from_value(serde_json::json!({
                    "document_id": document_id, "error_type": error_type,
                    "confidence": CANDIDATE_CONFIDENCE,
                }))
                .expect("a finding with its required fields");
                AuditStepRequest {
                    action: None,
                    findings: Some(vec![finding]),
                    submit_final: Some(false),
                    request_categories: None,
                    session_id: None,
                }
            }
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Candidate::SubmitFinal => serde_json::json!({"findings": [], "submit_final": true}),
            Candidate::Finding {
                document_id,
                error_type,
            } => {
                serde_json::json!({"findings": [{"document_id": document_id, "error_type": error_type, "confidence": CANDIDATE_CONFIDENCE}], "submit_final": false})
            }
        }
    }
}

/// The id of a document record: its first field named `*_id` or `*_no` with a string value.
fn record_id(record: &serde_json::Map<String, Value>) -> Option<&str> {
    record
        .iter()
        .find(|(k, v)| (k.ends_with("_id") || k.ends_with("_no")) && v.is_string())
        .and_then(|(_, v)| v.as_str())
}

/// The candidates of an audit reply: submit-final first, then one finding per (record shown,
/// valid error type), records in the order shown, a record id shown twice (the same invoice in
/// two registers) once. Ended episodes have none.
pub fn candidates(out: &AuditStepEnvelope) -> Vec<Candidate> {
    let mut list = all_candidates(out);
    list.truncate(MAX_CANDIDATES);
    list
}

/// [`candidates`] without the cut.
fn all_candidates(out: &AuditStepEnvelope) -> Vec<Candidate> {
    candidates_of(&out.observation, out.done)
}

/// The candidates of an audit observation (none once `done`), uncut.
pub fn candidates_of(observation: &AuditObservation, done: bool) -> Vec<Candidate> {
    if done {
        return vec![];
    }
    let types: Vec<String> = observation
        .metadata
        .get("valid_error_types")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut list = vec![Candidate::SubmitFinal];
    let Value::Object(docs) = &observation.documents else {
        return list;
    };
    let mut seen = std::collections::HashSet::new();
    for records in docs.values().filter_map(Value::as_array) {
        for id in records
            .iter()
            .filter_map(Value::as_object)
            .filter_map(record_id)
        {
            if !seen.insert(id) {
                continue;
            }
            for t in &types {
                list.push(Candidate::Finding {
                    document_id: id.to_owned(),
                    error_type: t.clone(),
                });
            }
        }
    }
    list
}

/// Fixed-size features of an audit reply: 0 step number, 1 max steps, 2 steps / max steps,
/// 3 findings so far, 4 document records shown, 5 categories available, 6 investigation mode,
/// 7 this step's reward, 8 done, 9–12 task one-hot (expense, invoice match, GST, fraud).
pub fn features(out: &AuditStepEnvelope) -> [f32; FEATURES] {
    features_of(&out.observation, out.reward, out.done)
}

/// [`features`] of an observation, with the step's reward and end flag.
pub fn features_of(o: &AuditObservation, reward: f64, done: bool) -> [f32; FEATURES] {
    let records: usize = match &o.documents {
        Value::Object(m) => m.values().filter_map(Value::as_array).map(Vec::len).sum(),
        _ => 0,
    };
    let mut f = [0.0f64; FEATURES];
    f[0] = f64::from(o.step_number);
    f[1] = f64::from(o.max_steps);
    f[2] = if o.max_steps > 0 {
        f64::from(o.step_number) / f64::from(o.max_steps)
    } else {
        0.0
    };
    f[3] = o.findings_so_far.len() as f64;
    f[4] = records as f64;
    f[5] = o.available_categories.len() as f64;
    f[6] = if o.investigation_mode { 1.0 } else { 0.0 };
    f[7] = reward;
    f[8] = if done { 1.0 } else { 0.0 };
    if let Some(i) = TaskId::ALL.iter().position(|t| *t == o.task_id) {
        f[9 + i] = 1.0;
    }
    f.map(|x| x as f32)
}

/// One audit environment and what its last reply showed.
pub struct Slot {
    pub env: AuditEnv,
    config: audit_env::episode::EnvConfig,
    pub candidates: Vec<Candidate>,
    pub features: [f32; FEATURES],
    pub done: bool,
    /// Did the last step submit final (a terminated episode, not a truncated one)?
    pub final_submitted: bool,
    pub poisoned: bool,
    /// The last ended episode (JSON text: task, score, end flags).
    pub finished: Option<String>,
}

impl Slot {
    pub fn new(config: audit_env::episode::EnvConfig) -> Self {
        Self {
            env: AuditEnv::new(config.clone()),
            config,
            candidates: vec![],
            features: [0.0; FEATURES],
            done: false,
            final_submitted: false,
            poisoned: false,
            finished: None,
        }
    }

    /// Reset; `session_id` is echoed in the reply as the server echoes the session it used.
    pub fn reset(
        &mut self,
        mut req: AuditResetRequest,
        session_id: Option<String>,
    ) -> Result<AuditStepEnvelope, Refusal> {
        if self.poisoned {
            self.env = AuditEnv::new(self.config.clone());
            self.poisoned = false;
        }
        req.session_id = None;
        let mut out = self.env.reset(req)?;
        self.final_submitted = false;
        self.observe(&out);
        out.session_id = session_id;
        Ok(out)
    }

    pub fn step(
        &mut self,
        mut req: AuditStepRequest,
        session_id: Option<String>,
    ) -> Result<AuditStepEnvelope, Refusal> {
        if self.poisoned {
            return Err(Refusal::new(
                500,
                "internal",
                "an earlier internal error discarded this environment; call reset()",
            ));
        }
        req.session_id = None;
        let final_flag = req
            .submit_final
            .or_else(|| req.action.as_ref().and_then(|a| a.submit_final))
            .unwrap_or(false);
        let mut out = self.env.step(req)?;
        self.final_submitted = final_flag;
        self.observe(&out);
        out.session_id = session_id;
        Ok(out)
    }

    /// Step the `index`-th candidate; an index past the list is an empty step (no findings,
    /// not final), which uses up a step like any other.
    pub fn step_candidate(
        &mut self,
        index: usize,
        session_id: Option<String>,
    ) -> Result<AuditStepEnvelope, Refusal> {
        let req = match self.candidates.get(index) {
            Some(c) => c.request(),
            None => AuditStepRequest {
                action: None,
                findings: Some(vec![]),
                submit_final: Some(false),
                request_categories: None,
                session_id: None,
            },
        };
        self.step(req, session_id)
    }

    fn observe(&mut self, out: &AuditStepEnvelope) {
        self.done = out.done;
        self.candidates = candidates(out);
        self.features = features(out);
        if out.done {
            let score = out.grader.as_ref().map_or(0.0, |g| g.score);
            self.finished = Some(
                serde_json::json!({
                    "task_id": out.observation.task_id.as_str(),
                    "final_score": score,
                    "terminated": self.final_submitted,
                    "truncated": !self.final_submitted,
                })
                .to_string(),
            );
        }
    }

    pub fn mask(&self) -> Vec<u8> {
        let mut m = vec![0u8; MAX_CANDIDATES];
        m[..self.candidates.len()].fill(1);
        m
    }
}

impl crate::vector::Poison for Slot {
    fn poison(&mut self) {
        self.poisoned = true;
    }
}

/// The reply as the server writes it: `serde_json` through a JSON value, as its handler does.
pub fn reply_text(out: &AuditStepEnvelope) -> Result<String, Refusal> {
    serde_json::to_value(out)
        .and_then(|v| serde_json::to_string(&v))
        .map_err(|_| audit_env::AuditError::Internal.into())
}

pub fn candidates_text(list: &[Candidate]) -> String {
    Value::Array(list.iter().map(Candidate::to_json).collect()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_env::adversarial::FraudDifficulty;

    /// No task's candidate list is cut: every task, random seeds (printed), every fixed
    /// difficulty and both modes fit [`MAX_CANDIDATES`]; a repeated record id is one target.
    #[test]
    fn every_task_fits_the_candidate_space() {
        let base = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000)
            .unwrap_or(1);
        println!("audit candidate seeds {base}..{}", base + 6);
        let mut largest = std::collections::BTreeMap::new();
        for level in ["auto", "0", "2", "4"] {
            let config = audit_env::episode::EnvConfig {
                max_findings_per_step: 50,
                fraud_difficulty: FraudDifficulty::parse(level).unwrap(),
            };
            let mut slot = Slot::new(config);
            for task in TaskId::ALL {
                for seed in base..base + 6 {
                    for investigation_mode in [false, true] {
                        let req: AuditResetRequest = serde_json::from_value(serde_json::json!({
                            "task_id": task.as_str(), "seed": seed,
                            "investigation_mode": investigation_mode,
                        }))
                        .unwrap();
                        let out = slot.reset(req, None).unwrap();
                        let all = all_candidates(&out);
                        assert!(
                            all.len() <= MAX_CANDIDATES,
                            "{task:?} seed {seed}: {}",
                            all.len()
                        );
                        let ids: std::collections::HashSet<_> =
                            all.iter().map(|c| format!("{c:?}")).collect();
                        assert_eq!(ids.len(), all.len(), "no duplicate candidate");
                        let e = largest.entry(task.as_str()).or_insert(0);
                        *e = (*e).max(all.len());
                    }
                }
            }
        }
        println!("largest candidate lists {largest:?}");
        assert!(largest["fraud_detection"] > 1024, "{largest:?}");
    }
}
