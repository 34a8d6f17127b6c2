//! One sealed run: the cases the server drew, each case's seal, and the run's score.
//!
//! The cases come from a held-out suite the client does not choose: generated holdout or
//! challenge variants whose variant seeds are drawn from the operating system's random source
//! over all 64 bits (the batch generators draw theirs from 1..=10^7 of a public seed's stream,
//! and a generated case id is a hash of its seed, so a case id served from such a batch could be
//! matched by trying every seed), or certificate-required clones drawn at random. Each case is
//! started once; the first ending of its sealed episode is what counts. The run is scored once:
//! the mean of its cases' grades, a case without a graded ending scoring the grade floor.

use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::{Seal, SealedOutcome};
use ls_server::error::ApiError;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// Fewest cases in a run: its score is always a mean over at least this many first attempts.
pub const MIN_CASES: usize = 5;
/// Most cases in a run.
pub const MAX_CASES: usize = 24;
/// Cases in a run when the request names no count.
pub const DEFAULT_CASES: usize = 12;
/// What a case without a graded ending (never played, abandoned, or ended by the step limit or
/// budget) scores: the grade floor, as the report scores a stored run's unterminated episode.
pub const UNGRADED_SCORE: f64 = 0.01;

/// The held-out suite a run draws its cases from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Suite {
    /// Generated holdout cases: a hard curated case's task and goods, a fresh synthetic vendor,
    /// a mechanism tuple under a label plan (`ls_gen::holdout_variant`).
    #[default]
    Holdout,
    /// Generated challenge variants of the hard curated cases (`ls_gen::challenge_variant`).
    Challenge,
    /// Certificate-required clones of the curated cases (`ls_gen::certificate_required`). Their
    /// documents are the public cases', so a run of them is sealed against probing the server,
    /// not held out.
    Certificate,
}

impl Suite {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Holdout => "holdout",
            Self::Challenge => "challenge",
            Self::Certificate => "certificate",
        }
    }
}

/// 64 bits from the operating system's random source.
pub fn os_random() -> u64 {
    use rand::TryRngCore;
    // The OS source failing is a platform fault; the thread generator is seeded from it too.
    rand::rngs::OsRng
        .try_next_u64()
        .unwrap_or_else(|_| rand::Rng::random(&mut rand::rng()))
}

/// Is `count` a run's size for `suite` on a server with `curated` cases (5 to 24; the
/// certificate suite has one clone per curated case)?
pub fn check_count(suite: Suite, count: usize, curated: usize) -> Result<(), ApiError> {
    if !(MIN_CASES..=MAX_CASES).contains(&count) {
        return Err(ApiError::Validation(format!(
            "count: a sealed run has {MIN_CASES} to {MAX_CASES} cases"
        )));
    }
    if suite == Suite::Certificate && count > curated {
        return Err(ApiError::Validation(format!(
            "count: the certificate suite has {curated} cases on this server; ask for {MIN_CASES} to {curated}"
        )));
    }
    Ok(())
}

/// Draw `count` distinct cases of `suite` from `set`, every seed from `seed()`.
pub fn draw(
    set: &FixtureSet,
    suite: Suite,
    count: usize,
    seed: &mut dyn FnMut() -> u64,
) -> Result<Vec<Case>, ApiError> {
    check_count(suite, count, set.cases.len())?;
    if suite == Suite::Certificate {
        let mut clones = ls_gen::certificate_required(set);
        clones.shuffle(&mut ChaCha8Rng::seed_from_u64(seed()));
        clones.truncate(count);
        return Ok(clones);
    }
    let bases: Vec<&Case> = set
        .cases
        .iter()
        .filter(|c| ls_gen::generators::hard(c))
        .collect();
    if bases.is_empty() {
        return Err(ApiError::Conflict(format!(
            "the {} suite is generated from task C/D/E cases and this server's fixtures have none",
            suite.as_str()
        )));
    }
    let plans = ls_gen::generators::plans(count, &mut ChaCha8Rng::seed_from_u64(seed()));
    let mut cases: Vec<Case> = Vec::with_capacity(count);
    for (index, plan) in plans.into_iter().enumerate() {
        // A repeated case id (a 40-bit hash) is drawn again; bounded, never expected to repeat.
        for _ in 0..8 {
            let base = bases[(seed() % bases.len() as u64) as usize];
            let vseed = seed();
            let case = match suite {
                Suite::Challenge => {
                    ls_gen::generators::challenge_variant(set, base, 0, vseed, plan)
                }
                _ => ls_gen::holdout_variant(base, 0, vseed, index, plan),
            };
            if !cases.iter().any(|c| c.case_id == case.case_id) {
                cases.push(case);
                break;
            }
        }
    }
    Ok(cases)
}

/// One case of a run: the case, its seal, whether its episode was started.
#[derive(Debug)]
struct RunCase {
    case: Arc<Case>,
    seal: Seal,
    started: bool,
}

impl RunCase {
    fn outcome(&self) -> Option<&SealedOutcome> {
        self.seal.outcome()
    }

    fn status(&self) -> CaseStatus {
        match (self.started, self.outcome()) {
            (_, Some(_)) => CaseStatus::Ended,
            (true, None) => CaseStatus::Started,
            (false, None) => CaseStatus::Unplayed,
        }
    }

    /// Its grade, or the floor without a graded ending.
    fn score(&self) -> f64 {
        self.outcome()
            .and_then(|o| o.terminal.as_ref())
            .map_or(UNGRADED_SCORE, |t| t.final_score.clamp(0.01, 0.99))
    }
}

/// Where a case of a run stands (what the client can see of it: nothing graded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Unplayed,
    Started,
    Ended,
}

/// A run's score, computed once.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunScore {
    pub run_id: String,
    pub suite: Suite,
    pub model: String,
    /// Mean over every case of the run of its first episode's grade; a case without a graded
    /// ending scores 0.01.
    pub mean_score: f64,
    pub case_count: usize,
    /// Cases whose episode ended with a decision (graded).
    pub graded_count: usize,
    /// Cases whose episode ended at the step limit or with the budget spent (no grade).
    pub truncated_count: usize,
    /// Cases never started, or started and never ended.
    pub unplayed_count: usize,
    pub scored_at: String,
}

/// A sealed run in progress or scored.
#[derive(Debug)]
pub struct SealedRun {
    pub run_id: String,
    pub suite: Suite,
    pub model: String,
    /// The session the run's episodes are played in.
    pub session_id: String,
    pub created_at: String,
    cases: Vec<RunCase>,
    score: Option<RunScore>,
}

/// What a client reads of a run: the cases and where each stands, and the score once scored.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunStatus {
    pub run_id: String,
    pub suite: Suite,
    pub model: String,
    pub session_id: String,
    pub created_at: String,
    pub case_count: usize,
    pub cases: Vec<CaseView>,
    /// Every case's episode has ended.
    pub complete: bool,
    /// The run's score, once scored (`null` before).
    pub score: Option<RunScore>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CaseView {
    pub case_id: String,
    pub status: CaseStatus,
}

/// One case as the operator reads it: the grade of its first ending.
#[derive(Debug, Clone, Serialize)]
pub struct CaseGrade {
    pub idx: usize,
    pub case_id: String,
    /// The curated case it was generated from.
    pub base_case_id: String,
    pub task_type: String,
    pub status: CaseStatus,
    /// The grade, or 0.01 without a graded ending (what the run's mean counts).
    pub score: f64,
    pub result_class: Option<String>,
    pub unsafe_outcome: Option<bool>,
    pub decision: Option<String>,
    pub terminal_reason: Option<String>,
    pub steps: u32,
    pub total_reward: f64,
    /// The reward the client was paid at each step (step `i + 1` at index `i`).
    pub paid: Vec<f64>,
    /// The terminal info the unsealed episode would have answered.
    pub terminal_info: Option<Value>,
    pub trajectory: Vec<ls_core::episode::TrajectoryEntry>,
}

impl SealedRun {
    pub fn new(
        run_id: String,
        suite: Suite,
        model: String,
        session_id: String,
        cases: Vec<Case>,
    ) -> Self {
        let cases = cases
            .into_iter()
            .map(|c| RunCase {
                case: Arc::new(c),
                seal: Seal::new(&run_id),
                started: false,
            })
            .collect();
        Self {
            run_id,
            suite,
            model,
            session_id,
            created_at: ls_store::utc_now(),
            cases,
            score: None,
        }
    }

    pub fn case_ids(&self) -> Vec<String> {
        self.cases.iter().map(|c| c.case.case_id.clone()).collect()
    }

    pub fn is_scored(&self) -> bool {
        self.score.is_some()
    }

    /// The case to start and its seal; refused once the run is scored, for a case outside the
    /// run, and for a case already started (each is played once).
    pub fn case_to_start(&self, case_id: &str) -> Result<(Arc<Case>, Seal), ApiError> {
        if self.score.is_some() {
            return Err(self.scored_refusal());
        }
        let c = self
            .cases
            .iter()
            .find(|c| c.case.case_id == case_id)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "case '{}' is not in sealed run {}; its cases are listed by GET /sealed-runs/{}",
                    ls_server::error::prefix(case_id),
                    self.run_id,
                    self.run_id
                ))
            })?;
        if c.started {
            return Err(ApiError::Conflict(format!(
                "case {case_id} of sealed run {} was already started: each case is played once (its first episode counts)",
                self.run_id
            )));
        }
        Ok((c.case.clone(), c.seal.clone()))
    }

    /// Mark `case_id` started (after its sealed reset succeeded).
    pub fn mark_started(&mut self, case_id: &str) {
        if let Some(c) = self.cases.iter_mut().find(|c| c.case.case_id == case_id) {
            c.started = true;
        }
    }

    fn scored_refusal(&self) -> ApiError {
        ApiError::Conflict(format!(
            "sealed run {} is already scored; read its score with GET /sealed-runs/{}",
            self.run_id, self.run_id
        ))
    }

    /// Has every case's episode ended?
    pub fn complete(&self) -> bool {
        self.cases.iter().all(|c| c.outcome().is_some())
    }

    /// Score the run now (once): refused when it is already scored.
    pub fn score(&mut self) -> Result<RunScore, ApiError> {
        if self.score.is_some() {
            return Err(self.scored_refusal());
        }
        let n = self.cases.len();
        let ended = |graded: bool| {
            self.cases
                .iter()
                .filter(|c| c.outcome().is_some_and(|o| o.graded() == graded))
                .count()
        };
        let (graded, truncated) = (ended(true), ended(false));
        let mean = self.cases.iter().map(RunCase::score).sum::<f64>() / n.max(1) as f64;
        let score = RunScore {
            run_id: self.run_id.clone(),
            suite: self.suite,
            model: self.model.clone(),
            mean_score: ls_core::text::round4(mean),
            case_count: n,
            graded_count: graded,
            truncated_count: truncated,
            unplayed_count: n - graded - truncated,
            scored_at: ls_store::utc_now(),
        };
        self.score = Some(score.clone());
        Ok(score)
    }

    /// The client's view: cases and their status, the score once scored.
    pub fn status(&self) -> RunStatus {
        RunStatus {
            run_id: self.run_id.clone(),
            suite: self.suite,
            model: self.model.clone(),
            session_id: self.session_id.clone(),
            created_at: self.created_at.clone(),
            case_count: self.cases.len(),
            cases: self
                .cases
                .iter()
                .map(|c| CaseView {
                    case_id: c.case.case_id.clone(),
                    status: c.status(),
                })
                .collect(),
            complete: self.complete(),
            score: self.score.clone(),
        }
    }

    /// The operator's view: each case's grade.
    pub fn grades(&self) -> Vec<CaseGrade> {
        self.cases
            .iter()
            .enumerate()
            .map(|(idx, c)| case_grade(idx, c))
            .collect()
    }
}

fn case_grade(idx: usize, c: &RunCase) -> CaseGrade {
    let o = c.outcome();
    let t = o.and_then(|o| o.terminal.as_deref());
    CaseGrade {
        idx,
        case_id: c.case.case_id.clone(),
        base_case_id: c
            .case
            .generator_metadata
            .as_ref()
            .and_then(|g| g.base_case_id.clone())
            .unwrap_or_else(|| c.case.case_id.clone()),
        task_type: c.case.task_type.as_str().to_owned(),
        status: c.status(),
        score: c.score(),
        result_class: t.map(|t| t.result_class_str().to_owned()),
        unsafe_outcome: t.map(|t| t.unsafe_outcome),
        decision: t.map(|t| t.decision_str().to_owned()),
        terminal_reason: o.map(|o| o.terminal_reason.clone()),
        steps: o.map_or(0, |o| o.steps),
        total_reward: o.map_or(0.0, |o| ls_core::text::round4(o.paid.iter().sum())),
        paid: o.map(|o| o.paid.clone()).unwrap_or_default(),
        terminal_info: t.and_then(|t| serde_json::to_value(t).ok()),
        trajectory: o.map(|o| o.trajectory.clone()).unwrap_or_default(),
    }
}

/// A case's grade as an episode record (the runner's shape, so a stored sealed run reads like any
/// stored run): the terminal info read as the runner reads it, the executed actions with the
/// rewards the client was paid.
pub fn episode_record(g: &CaseGrade, model: &str) -> ls_agents::EpisodeRecord {
    let mut rec = ls_agents::EpisodeRecord {
        case_id: g.case_id.clone(),
        agent: model.to_owned(),
        model: model.to_owned(),
        task_type: g.task_type.clone(),
        steps: g.steps,
        total_reward: g.total_reward,
        done: g.status == CaseStatus::Ended,
        terminated: g.terminal_info.is_some(),
        result_class: match g.status {
            CaseStatus::Ended => "truncated".into(),
            _ => "not_played".into(),
        },
        trajectory: g
            .trajectory
            .iter()
            .map(|t| ls_agents::StepRecord {
                step: t.step,
                action_type: t.action_type.as_str().to_owned(),
                payload: t.payload.as_map().clone(),
                reward: g
                    .paid
                    .get(t.step.saturating_sub(1) as usize)
                    .copied()
                    .unwrap_or(0.0),
                done: t.step == g.steps,
                success: t.success,
                error: (!t.success).then(|| t.message.clone()),
                prompt: None,
            })
            .collect(),
        ..Default::default()
    };
    if let Some(Value::Object(info)) = &g.terminal_info {
        rec.read_terminal(info.clone());
    }
    rec
}

#[cfg(test)]
mod tests {
    use super::*;
    use ls_env::{CasePool, EnvConfig, Environment};
    use serde_json::json;

    fn set() -> FixtureSet {
        FixtureSet::embedded().unwrap()
    }

    /// Each suite draws distinct, valid cases from its own seeds; two draws share no case; the
    /// generated ids are not those of the public batch generators' seeds.
    #[test]
    fn draws_are_distinct_valid_and_fresh() {
        let set = set();
        for suite in [Suite::Holdout, Suite::Challenge, Suite::Certificate] {
            let a = draw(&set, suite, MAX_CASES.min(21), &mut os_random).unwrap();
            let b = draw(&set, suite, 5, &mut os_random).unwrap();
            let mut ids: Vec<&str> = a.iter().map(|c| c.case_id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), a.len(), "{suite:?}: distinct cases");
            for c in &a {
                let issues = ls_core::validate::validate_case(c, &set.world(c));
                assert!(issues.is_empty(), "{suite:?} {}: {issues:?}", c.case_id);
            }
            if suite != Suite::Certificate {
                for c in &a {
                    let base = c
                        .generator_metadata
                        .as_ref()
                        .and_then(|g| g.base_case_id.as_deref());
                    let base = set.cases.iter().find(|x| Some(x.case_id.as_str()) == base);
                    assert!(base.is_some_and(ls_gen::generators::hard), "{}", c.case_id);
                }
                assert!(
                    b.iter().all(|c| !ids.contains(&c.case_id.as_str())),
                    "{suite:?}: fresh seeds draw new cases"
                );
            }
        }
        let e = draw(&set, Suite::Certificate, 22, &mut os_random).unwrap_err();
        assert!(
            e.to_string().contains("certificate suite has 21 cases"),
            "{e}"
        );
        let mut no_hard = set.clone();
        no_hard.cases.retain(|c| !ls_gen::generators::hard(c));
        let e = draw(&no_hard, Suite::Holdout, 5, &mut os_random).unwrap_err();
        assert_eq!(e.status().as_u16(), 409, "{e}");
    }

    /// The score is the mean over every case, a case without a graded ending at the floor; it
    /// is computed once; a started case cannot be started again, nor any case after scoring.
    #[test]
    fn a_run_is_scored_once_with_unplayed_cases_at_the_floor() {
        let set = set();
        let pool = Arc::new(CasePool::new(set.clone()));
        let cases = draw(&set, Suite::Holdout, 5, &mut os_random).unwrap();
        let mut run = SealedRun::new("r".into(), Suite::Holdout, "m".into(), "s".into(), cases);
        let ids = run.case_ids();
        let mut env = Environment::new(pool, EnvConfig::default());
        let (case, seal) = run.case_to_start(&ids[0]).unwrap();
        env.reset_sealed(case, seal).unwrap();
        run.mark_started(&ids[0]);
        let e = run.case_to_start(&ids[0]).err().unwrap();
        assert_eq!(e.status().as_u16(), 409, "{e}");
        assert_eq!(
            run.case_to_start("CASE-A-001")
                .err()
                .unwrap()
                .status()
                .as_u16(),
            404
        );
        let hold = json!({"decision": "HOLD"}).as_object().cloned().unwrap();
        env.step("submit_decision", &hold).unwrap();
        let (case, seal) = run.case_to_start(&ids[1]).unwrap();
        env.reset_sealed(case, seal).unwrap();
        run.mark_started(&ids[1]);
        assert!(!run.complete());
        let grades = run.grades();
        let first = grades[0].score;
        assert!(grades[0].terminal_info.is_some() && grades[0].status == CaseStatus::Ended);
        assert_eq!(grades[1].status, CaseStatus::Started);
        let score = run.score().unwrap();
        let expected = (first + 4.0 * UNGRADED_SCORE) / 5.0;
        assert_eq!(score.mean_score, ls_core::text::round4(expected));
        assert_eq!(
            (
                score.graded_count,
                score.truncated_count,
                score.unplayed_count
            ),
            (1, 0, 4)
        );
        assert_eq!(run.score().unwrap_err().status().as_u16(), 409);
        assert_eq!(
            run.case_to_start(&ids[2]).err().unwrap().status().as_u16(),
            409
        );
        // The stored record reads like the runner's.
        let rec = episode_record(&grades[0], "m");
        assert!(rec.terminated && rec.done);
        assert_eq!(rec.final_score, first);
        assert_eq!(rec.decision, "HOLD");
        assert_eq!(episode_record(&grades[3], "m").result_class, "not_played");
    }
}
