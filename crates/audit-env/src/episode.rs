//! Single-task episodes and the protocol-neutral `AuditEnv` (reset / step / state).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

use crate::adversarial::{AdversarialController, FraudDifficulty};
use crate::data::{self, TaskData};
use crate::error::AuditError;
use crate::grading::{self, FeedbackDetail, GradeResult, RewardBreakdown};
use crate::model::{self, limits, ErrorType, Finding, GtItem, TaskId, WorldRules};
use crate::util::{self, round_n};

/// Findings submitted in one step. `submit_final` is optional so campaigns can default it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditAction {
    #[serde(default)]
    pub findings: Vec<Finding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_final: Option<bool>,
}

fn de_opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("seed must be a non-negative integer")),
        Some(Value::String(s)) => s.trim().parse::<u64>().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("seed must be a non-negative integer, got '{s}'"))
        }),
        Some(other) => Err(serde::de::Error::custom(format!(
            "seed must be a non-negative integer, got {other}"
        ))),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditResetRequest {
    /// `expense_audit` … `fraud_detection`, or 1–4. Default `expense_audit`.
    #[serde(default)]
    pub task_id: Option<TaskId>,
    /// Default 42. Numeric strings are accepted.
    #[serde(default, deserialize_with = "de_opt_u64")]
    pub seed: Option<u64>,
    #[serde(default)]
    pub episode_id: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub investigation_mode: Option<bool>,
    /// Fraud task only: fixed adversarial level 1–5 for this episode (overrides FRAUD_DIFFICULTY).
    #[serde(default)]
    pub fraud_level: Option<u8>,
}

/// Accepts the reference's `{"action": {...}}` and the README's top-level `findings`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditStepRequest {
    #[serde(default)]
    pub action: Option<AuditAction>,
    #[serde(default)]
    pub findings: Option<Vec<Finding>>,
    #[serde(default)]
    pub submit_final: Option<bool>,
    #[serde(default)]
    pub request_categories: Option<Vec<String>>,
    #[serde(default)]
    pub session_id: Option<String>,
}

impl AuditStepRequest {
    pub fn into_action(self) -> (AuditAction, Vec<String>) {
        let a = AuditAction::merged(self.action, self.findings, self.submit_final);
        (a, self.request_categories.unwrap_or_default())
    }
}

impl AuditAction {
    /// A body's action object with its top-level `findings` added and its top-level
    /// `submit_final` (when present) in force: the merge every findings body (a step, a campaign
    /// submit) makes.
    pub fn merged(
        action: Option<AuditAction>,
        findings: Option<Vec<Finding>>,
        submit_final: Option<bool>,
    ) -> AuditAction {
        let mut a = action.unwrap_or_default();
        if let Some(f) = findings {
            a.findings.extend(f);
        }
        if submit_final.is_some() {
            a.submit_final = submit_final;
        }
        a
    }
}

/// The reference's observation model, field for field (its typed client forbids extra
/// top-level fields). Our additions live in `metadata`, the model's extensible field:
/// `episode_id`, `seed`, `schema_version`, `fraud_level` (fraud), `valid_error_types` (the
/// task's types plus any a regulatory shock added) and `notices` (rule changes in force).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditObservation {
    pub done: bool,
    pub reward: f64,
    pub metadata: BTreeMap<String, Value>,
    pub task_id: TaskId,
    pub task_description: String,
    pub documents: Value,
    pub findings_so_far: Vec<Finding>,
    pub feedback: String,
    pub step_number: u32,
    pub max_steps: u32,
    pub investigation_mode: bool,
    pub available_categories: Vec<String>,
    pub data_summary: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepInfo {
    pub accepted_findings: usize,
    pub rejected_findings: usize,
    pub warnings: Vec<String>,
    pub reward_breakdown: Option<RewardBreakdown>,
    /// True on the final step of a held-out episode: the grade is kept for the evaluator
    /// (`GET /grader` with the operator credential) and not sent to the agent.
    #[serde(default)]
    pub grade_sealed: bool,
}

/// How much an episode's replies say about which findings are true.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeFeedback {
    /// Training seeds: every step's reward, reward components, feedback and `state` reflect
    /// the classes of the findings (a shaping signal), and the final grade names documents.
    #[default]
    PerStep,
    /// Campaign episodes: non-final steps are outcome-blind (step penalty only, no running
    /// score); the final step pays the outcome of all the episode's findings and carries the
    /// grade in counts.
    AtFinal,
    /// Held-out seeds: every step is outcome-blind, the final one included; the grade is
    /// sealed (kept for the evaluator, never in a reply to the agent).
    Sealed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditStepEnvelope {
    pub observation: AuditObservation,
    pub reward: f64,
    pub done: bool,
    pub info: StepInfo,
    /// Present when the episode is done: the grade (document lists only on training seeds,
    /// see [`FeedbackDetail`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grader: Option<GradeResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

impl AuditStepEnvelope {
    /// A reply without a findings step (a reset, an investigation): reward 0, not done.
    fn unscored(observation: AuditObservation) -> Self {
        AuditStepEnvelope {
            observation,
            reward: 0.0,
            done: false,
            info: StepInfo {
                accepted_findings: 0,
                rejected_findings: 0,
                warnings: vec![],
                reward_breakdown: None,
                grade_sealed: false,
            },
            grader: None,
            session_id: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditState {
    pub episode_id: Option<String>,
    pub task_id: Option<TaskId>,
    pub seed: Option<u64>,
    pub step_count: u32,
    pub max_steps: u32,
    pub done: bool,
    pub total_errors: usize,
    /// True positives so far; `null` on held-out seeds (sealed) and in campaigns' episodes
    /// before their final step.
    pub found_errors: Option<usize>,
    /// False positives so far; `null` where `found_errors` is.
    pub false_positives: Option<usize>,
    pub investigation_mode: bool,
    pub revealed_categories: Vec<String>,
    /// Sum of the rewards the agent was sent.
    pub cumulative_reward: f64,
    /// Partial-credit score of the findings so far (0.01 before any finding); `null` where
    /// `found_errors` is.
    pub cumulative_score: Option<f64>,
    pub fraud_level: Option<u8>,
}

pub fn task_description(task: TaskId) -> String {
    match task {
        TaskId::ExpenseAudit => "You are an internal auditor. Review the expense claims (expense_id, date, employee, category, amount, description, receipt_id, vendor) against the policy document (per-category daily limits, receipt thresholds, approved vendors, general rules). Report each violation with document_id = expense_id, an error_type from the list, and a description. Traps: an amount exactly at the limit is compliant; a Friday is not a weekend; the same amount on different receipts is not a duplicate; a receipt already reimbursed in an earlier period is a duplicate. False positives lower the score.".into(),
        TaskId::InvoiceMatch => "You are a procurement auditor doing a three-way match of purchase orders, goods receipt notes (GRNs) and invoices. Compare prices and GST rates with the PO, quantities with the GRN, vendors and dates with the PO, and check the arithmetic (subtotal = sum of line amounts, total = subtotal + GST). A difference under ₹1 is acceptable rounding. A GRN quantity below the PO is a legitimate partial delivery when the invoice matches the GRN. Flag both a root cause and its cascading total effect. The document_id is the invoice_id.".into(),
        TaskId::GstReconciliation => "You are a tax auditor reconciling the purchase register (books) against GSTR-2B. Intra-state supplies (place of supply = our state) use CGST + SGST, inter-state supplies use IGST. A GSTIN is 15 characters: 2-digit state code + 10-character PAN + entity code + 'Z' + a mod-36 check character. ITC is void after 180 days; the blocked categories and rate notices in the context apply. Date differences under 30 days and taxable-value differences of ₹10 or less are not errors. The document_id is the invoice_no.".into(),
        TaskId::FraudDetection => "You are a forensic auditor. Look for circular invoicing (reference chains that loop across vendors), split invoices below the approval threshold, shell companies, repeated round amounts, Benford anomalies, vendor concentration, shared bank accounts, sudden volume spikes, invoices dated before incorporation and weekend invoicing patterns. The exact rules are in audit_context.detection_rules. Report the txn_id of the earliest transaction of each pattern (any member is accepted). One round number alone is not suspicious.".into(),
    }
}

/// The `/tasks` catalogue. `action_schema.findings` is a one-item array describing a finding,
/// as the reference's catalogue has it.
pub fn task_catalogue(max_findings_per_step: usize) -> Value {
    let list: Vec<Value> = TaskId::ALL
        .iter()
        .map(|t| json!({
            "id": t.as_str(), "number": t.number(), "name": t.name(), "difficulty": t.difficulty(),
            "description": task_description(*t), "max_steps": t.max_steps(),
            "ground_truth_count": t.gt_count(),
            "error_types": t.error_types().iter().map(|e| e.as_str()).collect::<Vec<_>>(),
            "action_schema": {
                "findings": [{
                    "document_id": "string (required)", "error_type": "string, one of error_types (required)",
                    "description": "string (optional, default 'Finding')", "field": "string (optional)",
                    "suggested_fix": "string (optional)", "confidence": "number in [0, 1] (optional, used for ECE)",
                    "severity": "number (optional)", "evidence_refs": "array of up to 10 strings (optional)"}],
                "max_findings_per_step": max_findings_per_step,
                "submit_final": "boolean, default false"
            }
        }))
        .collect();
    json!({"tasks": list, "total_tasks": list.len()})
}

/// One running or finished single-task episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    pub episode_id: String,
    pub data: TaskData,
    pub rules: WorldRules,
    pub findings: Vec<Finding>,
    pub step_count: u32,
    pub max_steps: u32,
    pub done: bool,
    pub submitted_final: bool,
    pub extra_types: Vec<ErrorType>,
    pub investigation_mode: bool,
    pub revealed: BTreeSet<String>,
    /// The last final grade as the agent may see it (redacted in `Counts` mode).
    pub last_grade: Option<GradeResult>,
    /// The last final grade with every list, for the environment's own checks (never sent).
    pub full_grade: Option<GradeResult>,
    /// `Full` on training seeds; `Counts` on held-out seeds and in campaigns.
    pub feedback_detail: FeedbackDetail,
    /// `PerStep` on training seeds, `Sealed` on held-out seeds, `AtFinal` in campaigns.
    pub outcome_feedback: OutcomeFeedback,
    pub rewards: Vec<f64>,
    pub notices: Vec<String>,
    pub max_findings_per_step: usize,
}

pub struct StepOutcome {
    pub envelope: AuditStepEnvelope,
    pub new_findings: Vec<Finding>,
}

impl Episode {
    pub fn new(
        task: TaskId,
        seed: u64,
        rules: WorldRules,
        episode_id: String,
        investigation: bool,
        max_findings_per_step: usize,
    ) -> Episode {
        let data = data::generate(task, seed, &rules);
        let mut extra_types = vec![];
        if rules.cash_upi_threshold_inr.is_some() && task == TaskId::FraudDetection {
            extra_types.push(ErrorType::UndocumentedCashPayment);
        }
        if rules.new_vendor_risk_months.is_some() && task == TaskId::FraudDetection {
            extra_types.push(ErrorType::HighRiskNewVendor);
        }
        Episode {
            episode_id,
            max_steps: task.max_steps(),
            data,
            rules,
            findings: vec![],
            step_count: 0,
            done: false,
            submitted_final: false,
            extra_types,
            investigation_mode: investigation,
            revealed: BTreeSet::new(),
            last_grade: None,
            full_grade: None,
            feedback_detail: if model::is_held_out(seed) {
                FeedbackDetail::Counts
            } else {
                FeedbackDetail::Full
            },
            outcome_feedback: if model::is_held_out(seed) {
                OutcomeFeedback::Sealed
            } else {
                OutcomeFeedback::PerStep
            },
            rewards: vec![],
            notices: vec![],
            max_findings_per_step,
        }
    }

    pub fn task(&self) -> TaskId {
        self.data.task
    }

    pub fn gt(&self) -> &[GtItem] {
        &self.data.ground_truth
    }

    pub fn valid_types(&self) -> Vec<ErrorType> {
        let mut v = self.task().error_types().to_vec();
        v.extend(self.extra_types.iter().copied());
        v
    }

    fn valid_type_names(&self) -> Vec<&'static str> {
        self.valid_types().iter().map(|t| t.as_str()).collect()
    }

    fn rendered_documents(&self, final_step: bool) -> Value {
        if final_step {
            return json!({});
        }
        let all = self.data.documents.render(&self.rules.schema_renames);
        if !self.investigation_mode {
            return all;
        }
        let mut out = serde_json::Map::new();
        if let Value::Object(m) = all {
            for (k, v) in m {
                if self.revealed.contains(&k) {
                    out.insert(k, v);
                }
            }
        }
        Value::Object(out)
    }

    fn data_summary(&self) -> Value {
        let all = self.data.documents.render(&self.rules.schema_renames);
        let mut out = serde_json::Map::new();
        if let Value::Object(m) = all {
            for (k, v) in m {
                let s = match &v {
                    Value::Array(a) => {
                        json!({"type": "list", "count": a.len(), "sample_fields": a.first().and_then(|x| x.as_object()).map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default()})
                    }
                    Value::Object(o) => {
                        json!({"type": "dict", "top_level_keys": o.keys().cloned().collect::<Vec<_>>()})
                    }
                    _ => json!({"type": "scalar"}),
                };
                out.insert(k, s);
            }
        }
        Value::Object(out)
    }

    pub fn observation(&self, reward: f64, feedback: String, final_step: bool) -> AuditObservation {
        let cats: Vec<String> = self
            .data
            .documents
            .categories()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut metadata = BTreeMap::new();
        metadata.insert("episode_id".into(), json!(self.episode_id));
        metadata.insert("seed".into(), json!(self.data.seed));
        metadata.insert("schema_version".into(), json!(self.rules.schema_version));
        if self.task() == TaskId::FraudDetection {
            metadata.insert("fraud_level".into(), json!(self.rules.fraud_level));
        }
        metadata.insert("valid_error_types".into(), json!(self.valid_type_names()));
        metadata.insert("notices".into(), json!(self.notices));
        metadata.insert("outcome_feedback".into(), json!(self.outcome_feedback));
        AuditObservation {
            done: self.done,
            reward,
            metadata,
            task_id: self.task(),
            task_description: task_description(self.task()),
            documents: self.rendered_documents(final_step),
            findings_so_far: self.findings.clone(),
            feedback,
            step_number: self.step_count,
            max_steps: self.max_steps,
            investigation_mode: self.investigation_mode,
            available_categories: if self.investigation_mode {
                cats.into_iter()
                    .filter(|c| !self.revealed.contains(c))
                    .collect()
            } else {
                cats
            },
            data_summary: if self.investigation_mode {
                self.data_summary()
            } else {
                json!({})
            },
        }
    }

    pub fn reset_feedback(&self) -> String {
        let head = if self.investigation_mode {
            "INVESTIGATION MODE: documents are hidden; request categories with request_categories before submitting findings.\n".to_string()
        } else {
            String::new()
        };
        format!(
            "{head}Environment ready: task '{}'.\nDifficulty: {}\nStep budget: {} steps\nValid error types: {}\nSubmit findings over one or more steps; set submit_final=true to finish.",
            self.task(), self.task().difficulty(), self.max_steps, self.valid_type_names().join(", ")
        )
    }

    /// Whether replies may show outcomes now: always on training seeds, after the final step
    /// in campaigns, never on held-out seeds.
    pub fn outcomes_visible(&self) -> bool {
        match self.outcome_feedback {
            OutcomeFeedback::PerStep => true,
            OutcomeFeedback::AtFinal => self.done,
            OutcomeFeedback::Sealed => false,
        }
    }

    /// The last final grade as the agent may see it: `None` on a held-out (sealed) episode.
    pub fn agent_grade(&self) -> Option<&GradeResult> {
        match self.outcome_feedback {
            OutcomeFeedback::Sealed => None,
            _ => self.last_grade.as_ref(),
        }
    }

    pub fn state(&self) -> AuditState {
        let g = grading::grade(self.gt(), &self.findings);
        let show = self.outcomes_visible();
        AuditState {
            episode_id: Some(self.episode_id.clone()),
            task_id: Some(self.task()),
            seed: Some(self.data.seed),
            step_count: self.step_count,
            max_steps: self.max_steps,
            done: self.done,
            total_errors: self.gt().len(),
            found_errors: show.then_some(g.true_positives),
            false_positives: show.then_some(g.false_positives),
            investigation_mode: self.investigation_mode,
            revealed_categories: self.revealed.iter().cloned().collect(),
            cumulative_reward: round_n(self.rewards.iter().sum(), 4),
            cumulative_score: show.then_some(g.score),
            fraud_level: (self.task() == TaskId::FraudDetection).then_some(self.rules.fraud_level),
        }
    }

    /// The final feedback line on misses: documents on training seeds, counts per type otherwise.
    fn missed_feedback(&self, grade: &GradeResult) -> String {
        if grade.missed_by_type.is_empty() {
            return String::new();
        }
        match self.feedback_detail {
            FeedbackDetail::Full => {
                let missed: BTreeSet<&str> = grade
                    .missed_errors
                    .iter()
                    .map(|k| k.document_id.as_str())
                    .collect();
                format!(
                    "\nMissed errors in: {}",
                    missed.into_iter().collect::<Vec<_>>().join(", ")
                )
            }
            FeedbackDetail::Counts => {
                let by: Vec<String> = grade
                    .missed_by_type
                    .iter()
                    .map(|(t, n)| format!("{t} x{n}"))
                    .collect();
                format!("\nMissed errors by type: {}", by.join(", "))
            }
        }
    }

    /// Validate and sanitize a batch without touching state.
    pub fn check_action(&self, a: &AuditAction) -> Result<Vec<Finding>, AuditError> {
        if self.done {
            return Err(AuditError::EpisodeFinished);
        }
        if a.findings.len() > self.max_findings_per_step {
            return Err(AuditError::TooManyFindings {
                max: self.max_findings_per_step,
                got: a.findings.len(),
            });
        }
        a.findings
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.clone().sanitize().map_err(|(field, msg)| {
                    AuditError::invalid(format!("findings[{i}].{field}"), msg)
                })
            })
            .collect()
    }

    /// Apply one step. All validation happens before any state changes.
    pub fn step(
        &mut self,
        a: AuditAction,
        request_categories: Vec<String>,
    ) -> Result<StepOutcome, AuditError> {
        let clean = self.check_action(&a)?;
        let submit_final = a.submit_final.unwrap_or(false);
        self.step_count += 1;
        if self.investigation_mode
            && clean.is_empty()
            && !submit_final
            && !request_categories.is_empty()
        {
            return Ok(self.investigate(&request_categories));
        }
        let (accepted, rejected, warnings) = self.accept(clean);
        Ok(self.grade_step(accepted, rejected, warnings, submit_final))
    }

    /// An investigation step: reveal the requested categories (no findings, reward 0).
    fn investigate(&mut self, request_categories: &[String]) -> StepOutcome {
        let n = self.step_count;
        let cats: BTreeSet<String> = self
            .data
            .documents
            .categories()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let new: Vec<String> = request_categories
            .iter()
            .map(|c| c.trim().to_string())
            .filter(|c| cats.contains(c) && !self.revealed.contains(c))
            .collect();
        self.revealed.extend(new.iter().cloned());
        let remaining: Vec<String> = cats
            .iter()
            .filter(|c| !self.revealed.contains(*c))
            .cloned()
            .collect();
        let fb = format!(
            "Step {n}/{}: revealed {}.\nRevealed so far: {}\nRemaining: {}",
            self.max_steps,
            if new.is_empty() {
                "nothing new".into()
            } else {
                new.join(", ")
            },
            self.revealed.iter().cloned().collect::<Vec<_>>().join(", "),
            remaining.join(", ")
        );
        self.rewards.push(0.0);
        StepOutcome {
            envelope: AuditStepEnvelope::unscored(self.observation(0.0, fb, false)),
            new_findings: vec![],
        }
    }

    /// Split a sanitized batch into accepted findings and rejections. Every warning depends on
    /// the finding and the public documents only (type validity, document existence, limits,
    /// renamed fields), never on the ground truth.
    fn accept(&self, clean: Vec<Finding>) -> (Vec<Finding>, usize, Vec<String>) {
        let names = self.valid_type_names();
        let valid: BTreeSet<&str> = names.iter().copied().collect();
        let valid_list = names.join(", ");
        let ids = self.data.documents.document_ids();
        let mut warnings = vec![];
        let mut accepted = vec![];
        let mut rejected = 0;
        for f in clean {
            let t = f.error_type.trim().to_ascii_lowercase();
            if !valid.contains(t.as_str()) {
                warnings.push(format!(
                    "Invalid error_type '{}' for task '{}'. Valid types: {}",
                    f.error_type,
                    self.task(),
                    valid_list
                ));
                rejected += 1;
                continue;
            }
            if self.findings.len() + accepted.len() >= limits::MAX_FINDINGS_PER_EPISODE {
                warnings.push(format!(
                    "Episode finding limit {} reached; finding dropped",
                    limits::MAX_FINDINGS_PER_EPISODE
                ));
                rejected += 1;
                continue;
            }
            if !ids.contains(&f.document_id.trim().to_ascii_uppercase()) {
                warnings.push(format!(
                    "Unknown document_id '{}': counted as a false positive",
                    f.document_id
                ));
            }
            if let Some(fld) = &f.field {
                if let Some(new) = self.rules.schema_renames.get(fld) {
                    warnings.push(format!(
                        "Field '{fld}' was renamed to '{new}' (schema version {})",
                        self.rules.schema_version
                    ));
                }
            }
            accepted.push(f);
        }
        (accepted, rejected, warnings)
    }

    /// The reward of a findings step as the agent may see it. The full reward and grade are
    /// computed on every step in every mode (the same work whatever the findings), then
    /// replaced by the outcome-blind reward where outcomes are hidden.
    fn visible_reward(
        &self,
        previous: &[Finding],
        accepted: &[Finding],
        grade: Option<&GradeResult>,
    ) -> RewardBreakdown {
        let n = self.step_count;
        let full = grading::step_reward(self.gt(), previous, accepted, n, grade);
        match (self.outcome_feedback, grade.is_some()) {
            (OutcomeFeedback::PerStep, _) => full,
            // The campaign's final step pays the outcome of every finding of the episode.
            (OutcomeFeedback::AtFinal, true) => {
                grading::step_reward(self.gt(), &[], &self.findings, n, grade)
            }
            (OutcomeFeedback::AtFinal, false) | (OutcomeFeedback::Sealed, _) => {
                grading::blind_step_reward(n)
            }
        }
    }

    /// The step's feedback text: the running score only where outcomes are visible.
    fn step_feedback(
        &self,
        warnings: &[String],
        accepted: usize,
        grade: &GradeResult,
        is_final: bool,
    ) -> String {
        let n = self.step_count;
        let mut fb = String::new();
        for w in warnings {
            fb.push_str(w);
            fb.push('\n');
        }
        fb.push_str(&format!(
            "Step {n}/{}: Accepted {accepted} finding(s) this step.",
            self.max_steps
        ));
        let show = match self.outcome_feedback {
            OutcomeFeedback::PerStep => true,
            OutcomeFeedback::AtFinal => is_final,
            OutcomeFeedback::Sealed => false,
        };
        if !show {
            fb.push_str(match self.outcome_feedback {
                OutcomeFeedback::Sealed => {
                    "\nHeld-out seed: no running score; the grade is sealed for the evaluator."
                }
                _ => {
                    "\nCampaign episode: the outcome of these findings is paid on the final submit."
                }
            });
            if is_final {
                fb.push_str("\nEPISODE COMPLETE — graded; the grade is sealed (held-out seed).");
            }
            return fb;
        }
        fb.push_str(&format!(
            "\nRunning score — TP: {}, FP: {}, Precision: {:.2}, Recall: {:.2}",
            grade.true_positives, grade.false_positives, grade.precision, grade.recall
        ));
        if grade.partial_matches > 0 {
            fb.push_str(&format!(
                "\nPartial matches: {} (near misses: right document, related error type)",
                grade.partial_matches
            ));
        }
        if is_final {
            fb.push_str(&format!(
                "\nEPISODE COMPLETE — Final F1 Score: {:.4}",
                grade.score
            ));
            fb.push_str(&format!(
                "\nWeighted F1: {:.4} | Risk Mitigation: {:.1}%",
                grade.weighted_score, grade.risk_score.risk_mitigation_pct
            ));
            fb.push_str(&self.missed_feedback(grade));
        }
        fb
    }

    /// Grade a findings step and build its reply.
    fn grade_step(
        &mut self,
        accepted: Vec<Finding>,
        rejected: usize,
        warnings: Vec<String>,
        submit_final: bool,
    ) -> StepOutcome {
        let n = self.step_count;
        let is_final = submit_final || n >= self.max_steps;
        let previous = self.findings.clone();
        self.findings.extend(accepted.iter().cloned());
        let grade = grading::grade(self.gt(), &self.findings);
        let rb = self.visible_reward(&previous, &accepted, is_final.then_some(&grade));
        self.rewards.push(rb.reward);
        let fb = self.step_feedback(&warnings, accepted.len(), &grade, is_final);
        let sealed = self.outcome_feedback == OutcomeFeedback::Sealed;
        if is_final {
            self.done = true;
            self.submitted_final = submit_final;
            self.last_grade = Some(grade.for_detail(self.feedback_detail));
            self.full_grade = Some(grade.clone());
        }
        let obs = self.observation(rb.reward, fb, is_final);
        let info = StepInfo {
            accepted_findings: accepted.len(),
            rejected_findings: rejected,
            warnings,
            reward_breakdown: Some(rb.clone()),
            grade_sealed: is_final && sealed,
        };
        StepOutcome {
            envelope: AuditStepEnvelope {
                observation: obs,
                reward: rb.reward,
                done: is_final,
                info,
                grader: (is_final && !sealed).then(|| grade.for_detail(self.feedback_detail)),
                session_id: None,
            },
            new_findings: accepted,
        }
    }
}

/// Per-environment configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvConfig {
    pub max_findings_per_step: usize,
    pub fraud_difficulty: FraudDifficulty,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            max_findings_per_step: limits::MAX_FINDINGS_PER_STEP_DEFAULT,
            fraud_difficulty: FraudDifficulty::Auto,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdaptiveDifficulty {
    pub noise_level: f64,
    pub suggestion: String,
    pub avg_recent_score: Option<f64>,
    pub recent_scores: Vec<f64>,
    pub next_fraud_level: u8,
}

/// Protocol-neutral environment: one episode at a time plus memory across episodes.
#[derive(Debug, Clone)]
pub struct AuditEnv {
    pub config: EnvConfig,
    pub episode: Option<Episode>,
    pub score_history: Vec<f64>,
    pub adversarial: AdversarialController,
    /// The session's leaderboard run in progress (`POST /leaderboard/run`): each completed
    /// episode of one of its seeds is counted once, with the evaluator's grade.
    pub run: Option<crate::leaderboard::EvalRun>,
    counter: u64,
}

impl AuditEnv {
    pub fn new(config: EnvConfig) -> Self {
        let adversarial = AdversarialController::new(config.fraud_difficulty);
        AuditEnv {
            config,
            episode: None,
            score_history: vec![],
            adversarial,
            run: None,
            counter: 0,
        }
    }

    pub fn reset(&mut self, req: AuditResetRequest) -> Result<AuditStepEnvelope, AuditError> {
        let task = req.task_id.unwrap_or(TaskId::ExpenseAudit);
        let seed = req.seed.unwrap_or(42);
        if let Some(l) = req.fraud_level {
            if !(1..=5).contains(&l) {
                return Err(AuditError::invalid(
                    "fraud_level",
                    format!("fraud_level must be 1-5, got {l}"),
                ));
            }
        }
        let episode_id = match req.episode_id {
            Some(e) if e.trim().is_empty() || e.len() > limits::MAX_ID_CHARS => {
                return Err(AuditError::invalid(
                    "episode_id",
                    "episode_id must be 1-100 characters",
                ))
            }
            Some(e) => e,
            None => {
                self.counter += 1;
                util::random_id("ep")
            }
        };
        let rules = WorldRules {
            fraud_level: req.fraud_level.unwrap_or(self.adversarial.level()),
            ..WorldRules::default()
        };
        let ep = Episode::new(
            task,
            seed,
            rules,
            episode_id,
            req.investigation_mode.unwrap_or(false),
            self.config.max_findings_per_step,
        );
        let obs = ep.observation(0.0, ep.reset_feedback(), false);
        self.episode = Some(ep);
        Ok(AuditStepEnvelope::unscored(obs))
    }

    pub fn step(&mut self, req: AuditStepRequest) -> Result<AuditStepEnvelope, AuditError> {
        let ep = self.episode.as_mut().ok_or(AuditError::NotInitialized)?;
        let (action, cats) = req.into_action();
        let out = ep.step(action, cats)?;
        if out.envelope.done {
            if let (Some(run), Some(g)) = (self.run.as_mut(), ep.last_grade.as_ref()) {
                run.record(ep.task(), ep.data.seed, g);
            }
            if let Some(g) = &out.envelope.grader {
                util::push_bounded(
                    &mut self.score_history,
                    g.score,
                    limits::MAX_HISTORY_ENTRIES,
                );
                if ep.task() == TaskId::FraudDetection {
                    self.adversarial.record(
                        ep.data.seed,
                        g.score,
                        g.true_positives,
                        g.false_negatives,
                    );
                }
            }
        }
        Ok(out.envelope)
    }

    pub fn state(&self) -> AuditState {
        match &self.episode {
            Some(e) => e.state(),
            None => AuditState {
                episode_id: None,
                task_id: None,
                seed: None,
                step_count: 0,
                max_steps: 0,
                done: false,
                total_errors: 0,
                found_errors: Some(0),
                false_positives: Some(0),
                investigation_mode: false,
                revealed_categories: vec![],
                cumulative_reward: 0.0,
                cumulative_score: Some(0.01),
                fraud_level: None,
            },
        }
    }

    /// The last completed grade as the agent may see it: `None` for a held-out episode, whose
    /// grade is sealed (read it with [`AuditEnv::last_grade`], the evaluator's view).
    pub fn agent_grade(&self) -> Option<&GradeResult> {
        self.episode.as_ref().and_then(|e| e.agent_grade())
    }

    pub fn last_grade(&self) -> Option<&GradeResult> {
        self.episode.as_ref().and_then(|e| e.last_grade.as_ref())
    }

    pub fn adaptive_difficulty(&self) -> AdaptiveDifficulty {
        let recent: Vec<f64> = self
            .score_history
            .iter()
            .rev()
            .take(5)
            .rev()
            .copied()
            .collect();
        let next = self.adversarial.level();
        if recent.is_empty() {
            return AdaptiveDifficulty {
                noise_level: 0.3,
                suggestion: "default".into(),
                avg_recent_score: None,
                recent_scores: recent,
                next_fraud_level: next,
            };
        }
        let avg = recent.iter().sum::<f64>() / recent.len() as f64;
        let (noise, s) = if avg >= 0.8 {
            (0.7, "increase_difficulty")
        } else if avg >= 0.5 {
            (0.5, "maintain")
        } else {
            (0.2, "decrease_difficulty")
        };
        AdaptiveDifficulty {
            noise_level: noise,
            suggestion: s.into(),
            avg_recent_score: Some(util::clamp_score(avg)),
            recent_scores: recent,
            next_fraud_level: next,
        }
    }
}

/// In-process evaluation: one final step with the given findings (for training loops and the
/// evaluator; on held-out seeds this is the sealed grade, in counts).
pub fn evaluate(
    task: TaskId,
    seed: u64,
    findings: Vec<Finding>,
) -> Result<GradeResult, AuditError> {
    let mut ep = Episode::new(
        task,
        seed,
        WorldRules::default(),
        format!("eval-{seed}"),
        false,
        limits::MAX_FINDINGS_PER_STEP_CEILING,
    );
    ep.step(
        AuditAction {
            findings,
            submit_final: Some(true),
        },
        vec![],
    )?;
    // The evaluator's view: on held-out seeds the grade is sealed from replies, not from here.
    ep.last_grade.ok_or(AuditError::Internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{HELD_OUT_SEEDS, TRAIN_SEEDS};

    #[test]
    fn true_findings_score_high_empty_scores_floor() {
        for task in TaskId::ALL {
            for seed in TRAIN_SEEDS.chain(HELD_OUT_SEEDS) {
                let gt = data::generate(task, seed, &WorldRules::default()).ground_truth;
                let g = evaluate(task, seed, grading::perfect_findings(&gt)).unwrap();
                assert!(g.score >= 0.95, "{task} {seed}: {}", g.score);
                assert_eq!(evaluate(task, seed, vec![]).unwrap().score, 0.01);
            }
        }
    }

    /// Campaign episodes (`AtFinal`): non-final steps pay the step penalty only, whatever the
    /// findings; the final step pays the outcome of every finding of the episode.
    #[test]
    fn campaign_episodes_pay_outcomes_on_the_final_step_only() {
        let task = TaskId::InvoiceMatch;
        let gt = data::generate(task, 42, &WorldRules::default()).ground_truth;
        let truth = grading::perfect_findings(&gt);
        let play = |first: Vec<Finding>| {
            let mut ep = Episode::new(task, 42, WorldRules::default(), "c".into(), false, 200);
            ep.outcome_feedback = OutcomeFeedback::AtFinal;
            let a = ep
                .step(
                    AuditAction {
                        findings: first,
                        submit_final: Some(false),
                    },
                    vec![],
                )
                .unwrap()
                .envelope;
            let b = ep
                .step(
                    AuditAction {
                        findings: vec![],
                        submit_final: Some(true),
                    },
                    vec![],
                )
                .unwrap()
                .envelope;
            (a, b)
        };
        let (a, fin) = play(truth.clone());
        let (w, _) = play(vec![Finding::new("INV-999", "tax_error"); truth.len()]);
        let rb = a.info.reward_breakdown.clone().unwrap();
        assert!(rb.outcome_hidden && rb.true_positive_reward == 0.0);
        assert_eq!(a.reward, w.reward);
        assert!(
            !a.observation.feedback.contains("TP:"),
            "{}",
            a.observation.feedback
        );
        let frb = fin.info.reward_breakdown.unwrap();
        assert!(
            !frb.outcome_hidden && frb.true_positive_reward > 1.0,
            "{frb:?}"
        );
        assert!(fin.grader.is_some() && !fin.info.grade_sealed);
    }

    #[test]
    fn lifecycle_and_errors() {
        let mut env = AuditEnv::new(EnvConfig::default());
        assert_eq!(
            env.step(AuditStepRequest::default()).unwrap_err(),
            AuditError::NotInitialized
        );
        env.reset(AuditResetRequest {
            task_id: Some(TaskId::InvoiceMatch),
            ..Default::default()
        })
        .unwrap();
        let r = env
            .step(AuditStepRequest {
                findings: Some(vec![Finding::new("INV-001", "bogus_type")]),
                ..Default::default()
            })
            .unwrap();
        assert!(r.observation.feedback.contains("Invalid error_type"));
        assert_eq!(r.observation.step_number, 1);
        let too_many = AuditStepRequest {
            findings: Some(vec![
                Finding::new("INV-001", "tax_error");
                limits::MAX_FINDINGS_PER_STEP_DEFAULT + 1
            ]),
            ..Default::default()
        };
        assert!(matches!(
            env.step(too_many).unwrap_err(),
            AuditError::TooManyFindings { .. }
        ));
        assert_eq!(
            env.state().step_count,
            1,
            "a rejected request does not consume a step"
        );
        let r = env
            .step(AuditStepRequest {
                submit_final: Some(true),
                ..Default::default()
            })
            .unwrap();
        assert!(r.done && r.grader.is_some());
        assert_eq!(r.observation.documents, json!({}));
        assert_eq!(
            env.step(AuditStepRequest::default()).unwrap_err(),
            AuditError::EpisodeFinished
        );
        assert_eq!(env.state().step_count, 2);
    }

    #[test]
    fn max_steps_ends_episode_and_investigation_hides_documents() {
        let mut env = AuditEnv::new(EnvConfig::default());
        env.reset(AuditResetRequest {
            investigation_mode: Some(true),
            ..Default::default()
        })
        .unwrap();
        let r = env
            .step(AuditStepRequest {
                request_categories: Some(vec!["policy".into(), "nope".into()]),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r.reward, 0.0);
        assert!(r.observation.documents.get("policy").is_some());
        assert!(r.observation.documents.get("expenses").is_none());
        assert_eq!(
            r.observation.available_categories,
            vec!["expenses".to_string()]
        );
        let mut last = None;
        for _ in 0..4 {
            last = Some(env.step(AuditStepRequest::default()).unwrap());
        }
        assert!(last.unwrap().done);
    }
}
