//! ControlBench through `ls-rl`: the structured observation and the factored action space.
//!
//! [`StructuredSlot`] is one ControlBench environment ([`cb::Slot`]) with the evidence ledger of
//! its current episode, the submission being composed and the observation arrays, rebuilt after
//! every reply. A factored action either reaches the environment (a tool with its pointed
//! argument, an intervention, the composed submission) or only composes (reward 0, nothing
//! changes in the environment); see `ls_rl::factored`.

use crate::bridge::{call, f32_bytes};
use crate::controlbench as cb;
use crate::errors::Refusal;
use crate::request;
use crate::vector::{Poison, RowOut, SeedStream, VecSlot};
use ls_env::{EnvConfig, ResetRequest, StepEnvelope};
use ls_rl::observe::{self, Structured};
use ls_rl::{Composer, Layout, Ledger, Step};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::Mutex;
use std::sync::{Arc, OnceLock};

/// The factored layout, built once per process.
pub fn layout() -> &'static Layout {
    static L: OnceLock<Layout> = OnceLock::new();
    L.get_or_init(Layout::new)
}

/// One environment with its ledger, composer and observation arrays.
pub struct StructuredSlot {
    pub slot: cb::Slot,
    pub ledger: Ledger,
    pub composer: Composer,
    pub obs: Structured,
    pub mask: Vec<bool>,
    /// The last environment reply (composing steps leave it as it was).
    pub last: Option<Arc<StepEnvelope>>,
}

/// What a factored step produced.
pub enum Played {
    /// The environment stepped: its reply.
    Env(Arc<StepEnvelope>),
    /// Only the submission being composed changed.
    Composed,
}

impl StructuredSlot {
    pub fn new(config: EnvConfig) -> Result<Self, Refusal> {
        let mut slot = cb::Slot::new(cb::embedded_pool()?, config);
        // The structured observation is read from the ledger: the flat one is never shown.
        slot.flat = false;
        Ok(Self {
            slot,
            ledger: Ledger::new(),
            composer: Composer::new(),
            obs: Structured::zeros(),
            mask: vec![false; layout().len()],
            last: None,
        })
    }

    pub fn reset(&mut self, req: &ResetRequest) -> Result<Arc<StepEnvelope>, Refusal> {
        self.reset_any(&request::Reset::Server(req.clone()))
    }

    /// A Python reset: the server's, or a draw of the task distribution (`template_split`,
    /// `generator_split`).
    pub fn reset_any(&mut self, req: &request::Reset) -> Result<Arc<StepEnvelope>, Refusal> {
        let out = Arc::new(self.slot.reset_any(req, None)?);
        self.ledger = Ledger::new();
        self.composer = Composer::new();
        self.absorb(out.clone());
        Ok(out)
    }

    fn absorb(&mut self, out: Arc<StepEnvelope>) {
        self.ledger.absorb(&out);
        self.last = Some(out);
        self.refresh();
    }

    /// Recompute the mask and the observation from the ledger and the composer.
    fn refresh(&mut self) {
        let layout = layout();
        self.composer
            .mask_into(layout, &self.ledger, &mut self.mask);
        observe::observe(
            &self.ledger,
            &self.composer,
            layout.points(&self.mask),
            &mut self.obs,
        );
    }

    /// Play layout index `index`.
    pub fn step(&mut self, index: usize) -> Result<Played, Refusal> {
        if self.last.as_ref().is_none_or(|l| l.done) {
            // The environment answers a step before reset or after the end with its refusal.
            let _ = self.slot.step(&request::Action {
                action_type: "lookup_policy".into(),
                payload: Default::default(),
                session_id: None,
            })?;
        }
        // After a reply, `self.mask` is the composer's mask of this state (every change
        // refreshes it); before the first reset or after a discarded one it is computed afresh.
        let step = if self.last.is_some() {
            self.composer
                .apply_masked(layout(), &self.ledger, index, &self.mask)
        } else {
            self.composer.apply(layout(), &self.ledger, index)
        };
        match step {
            Step::Composed => {
                self.refresh();
                Ok(Played::Composed)
            }
            Step::Env {
                action_type,
                payload,
            } => {
                let out = Arc::new(self.slot.step(&request::Action {
                    action_type,
                    payload,
                    session_id: None,
                })?);
                self.absorb(out.clone());
                Ok(Played::Env(out))
            }
        }
    }

    /// Play the rest of the episode as the teacher decides it, every action re-expressed through
    /// the factored space (what `ls-rl/tests/express_teacher.rs` measures): the indices played, in
    /// order. Actions the space cannot express are skipped (the teacher moves on). For behaviour
    /// cloning: replay the indices from the same reset to record the observations.
    pub fn teacher_play(&mut self) -> Result<Vec<usize>, Refusal> {
        use ls_agents::{Agent, TeacherAgent};
        let mut last = self
            .last
            .clone()
            .ok_or_else(|| Refusal::new(409, "reset_required", "call reset before teacher_play"))?;
        let mut teacher = TeacherAgent::new();
        teacher.begin(&last, 0);
        let mut played = Vec::new();
        for _ in 0..ls_agents::runner::DRIVER_STEP_CAP {
            if last.done {
                break;
            }
            let a = teacher.next_action(&last);
            let Ok(plan) =
                self.composer
                    .express(layout(), &self.ledger, &a.action_type, &a.payload)
            else {
                continue;
            };
            for i in plan {
                played.push(i);
                if let Played::Env(out) = self.step(i)? {
                    last = out;
                    if last.done {
                        break;
                    }
                }
            }
        }
        Ok(played)
    }

    /// The factored indices that express a typed action (JSON text of `{action_type, payload}`)
    /// now; `None` when it cannot be expressed.
    pub fn express(&self, action: &str) -> Result<Option<Vec<usize>>, Refusal> {
        let a = request::step_action(action)?;
        Ok(self
            .composer
            .express(layout(), &self.ledger, &a.action_type, &a.payload)
            .ok())
    }
}

impl Poison for StructuredSlot {
    fn poison(&mut self) {
        self.slot.poison();
        self.last = None;
    }
}

/// ControlBench with the structured observation and the factored action space.
#[pyclass(module = "ledgershield._native", name = "StructuredControlBench")]
pub struct StructuredControlBench {
    slot: Mutex<StructuredSlot>,
}

#[pymethods]
impl StructuredControlBench {
    #[new]
    #[pyo3(signature = (track_mode = "blind"))]
    fn new(py: Python<'_>, track_mode: &str) -> PyResult<Self> {
        let slot = cb::track_mode(track_mode)
            .and_then(|track_mode| StructuredSlot::new(EnvConfig { track_mode }))
            .map_err(|e| e.into_py(py))?;
        Ok(Self {
            slot: Mutex::new(slot),
        })
    }

    /// Reset from a `POST /reset` body (JSON text); returns the reply's JSON text.
    fn reset(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        call(py, &self.slot, |s| {
            let req = request::reset(request)?;
            let out = s.reset_any(&req)?;
            cb::reply_text(&out)
        })
    }

    /// Play factored action `index`: the environment's reply as JSON text, or `None` when the
    /// action only composed (reward 0, nothing else changed).
    fn step(&self, py: Python<'_>, index: usize) -> PyResult<Option<String>> {
        call(py, &self.slot, |s| match s.step(index)? {
            Played::Env(out) => cb::reply_text(&out).map(Some),
            Played::Composed => Ok(None),
        })
    }

    /// `(global, rows, row_mask, action_mask)`: float32, float32 (rows × features), uint8, uint8
    /// bytes of the current observation.
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (g, r, rm, m) = call(py, &self.slot, |s| {
            Ok((
                f32_bytes(&s.obs.global),
                f32_bytes(&s.obs.rows),
                s.obs.row_mask.clone(),
                s.mask.iter().map(|b| u8::from(*b)).collect::<Vec<u8>>(),
            ))
        })?;
        PyTuple::new(
            py,
            [
                PyBytes::new(py, &g),
                PyBytes::new(py, &r),
                PyBytes::new(py, &rm),
                PyBytes::new(py, &m),
            ],
        )
    }

    /// The factored indices expressing a typed action now (`{action_type, payload}` JSON text),
    /// or `None` when it cannot be expressed (for behaviour cloning from another agent).
    fn express(&self, py: Python<'_>, action: &str) -> PyResult<Option<Vec<usize>>> {
        call(py, &self.slot, |s| s.express(action))
    }

    /// Play the rest of the episode as the teacher decides it, through the factored space; the
    /// indices played (see `StructuredSlot::teacher_play`).
    fn teacher_play(&self, py: Python<'_>) -> PyResult<Vec<usize>> {
        call(py, &self.slot, |s| s.teacher_play())
    }

    /// The evidence ledger as text (one line per row with its relations).
    fn ledger_text(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, |s| Ok(s.ledger.render()))
    }

    /// Where the case of the last episode that ended came from (generator, template, family,
    /// seed, splits) as JSON text; `None` before one has ended or after a server-style reset.
    /// Never shown mid-episode (a quarter slot's template follows its label plan).
    fn finished_task(&self, py: Python<'_>) -> PyResult<Option<String>> {
        call(py, &self.slot, |s| Ok(s.slot.task_text()))
    }

    /// The submission the composer would send now, as JSON text.
    fn draft(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, |s| {
            Ok(serde_json::Value::Object(s.composer.submission(&s.ledger)).to_string())
        })
    }
}

/// The factored layout's action names (`tool.ocr`, `point.3`, ...), in index order.
pub fn action_names() -> Vec<String> {
    layout()
        .actions()
        .iter()
        .map(|a| {
            use ls_rl::FactoredAction as F;
            match a {
                F::Tool(t) => format!("tool.{}", t.action().as_str()),
                F::LookupPolicy => "lookup_policy".into(),
                F::Intervene(x) => format!("intervene.{}", x.as_str()),
                F::Decide(d) => format!("decide.{}", d.as_str()),
                F::Target(t) => format!("target.{}", observe::target_name(*t)),
                F::Check(c, pass) => format!(
                    "check.{}.{}",
                    c.as_str(),
                    if *pass { "pass" } else { "fail" }
                ),
                F::Submit => "submit".into(),
                F::PointBest => "point.best".into(),
                F::Point(r) => format!("point.{r}"),
            }
        })
        .collect()
}

/// The structured vector's row: `features` carries `global`, `rl_vector` the rows (row-major),
/// `mask` the action mask followed by the row mask.
impl VecSlot for StructuredSlot {
    type Template = request::Reset;
    type Action = request::Action;
    type Reply = Played;
    const FEATURES: usize = observe::GLOBAL_FEATURES;
    const RL_VECTOR: usize = ls_rl::ledger::MAX_ROWS * observe::ROW_FEATURES;
    const MASK: usize = ls_rl::vocab::ACTIONS + ls_rl::ledger::MAX_ROWS;

    fn parse_template(text: &str) -> Result<request::Reset, Refusal> {
        request::reset(text)
    }
    fn parse_action(text: &str) -> Result<request::Action, Refusal> {
        request::step_action(text)
    }
    /// A body `seed` wins; else the environment's stream gives the seed.
    fn reset_from(
        &mut self,
        template: &request::Reset,
        stream: &mut SeedStream,
    ) -> Result<Played, Refusal> {
        let seeded = match template {
            request::Reset::Server(req) if req.seed.is_none() && req.case_id.is_none() => {
                let mut req = req.clone();
                req.seed = Some(stream.next_seed());
                request::Reset::Server(req)
            }
            request::Reset::Task(t) if t.seed.is_none() => {
                let mut t = t.clone();
                t.seed = Some(stream.next_seed());
                request::Reset::Task(t)
            }
            other => other.clone(),
        };
        self.reset_any(&seeded).map(Played::Env)
    }
    fn step_index(&mut self, index: usize) -> Result<Played, Refusal> {
        self.step(index)
    }
    fn step_typed(&mut self, _: &request::Action) -> Result<Played, Refusal> {
        Err(Refusal::validation(
            "the factored vector takes action indices (step), not typed actions",
        ))
    }
    fn write_row(&self, reply: &Played, row: &mut RowOut<'_>, text: bool) -> Result<(), Refusal> {
        row.features.copy_from_slice(&self.obs.global);
        row.rl_vector.copy_from_slice(&self.obs.rows);
        self.write_masks(row);
        match reply {
            Played::Env(out) => {
                *row.reward = out.reward;
                *row.terminated = u8::from(out.terminated);
                *row.truncated = u8::from(out.truncated);
                if text {
                    *row.text = Some(cb::reply_text(out)?);
                }
            }
            Played::Composed => {
                *row.reward = 0.0;
                *row.terminated = 0;
                *row.truncated = 0;
            }
        }
        Ok(())
    }
    fn write_masks(&self, row: &mut RowOut<'_>) {
        let (actions, rows) = row.mask.split_at_mut(self.mask.len());
        for (m, legal) in actions.iter_mut().zip(&self.mask) {
            *m = u8::from(*legal);
        }
        rows.copy_from_slice(&self.obs.row_mask);
    }
    /// The legal actions' names, as JSON text.
    fn candidates_text(&self) -> String {
        let names = action_names();
        let legal: Vec<&String> = names
            .iter()
            .zip(&self.mask)
            .filter(|(_, l)| **l)
            .map(|(n, _)| n)
            .collect();
        serde_json::to_string(&legal).unwrap_or_default()
    }
    fn finished_text(&self) -> Option<String> {
        self.slot.finished_text()
    }
}

/// Register the class and the layout's constants on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StructuredControlBench>()?;
    m.add("STRUCTURED_GLOBAL_FEATURES", observe::GLOBAL_FEATURES)?;
    m.add("STRUCTURED_ROW_FEATURES", observe::ROW_FEATURES)?;
    m.add("STRUCTURED_MAX_ROWS", ls_rl::ledger::MAX_ROWS)?;
    m.add("FACTORED_ACTIONS", layout().len())?;
    m.add("FACTORED_ACTION_NAMES", action_names())?;
    m.add("STRUCTURED_GLOBAL_NAMES", observe::global_names())?;
    m.add("STRUCTURED_ROW_NAMES", observe::row_names())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random legal factored actions on random seeds never fail, composing steps leave the
    /// environment untouched, and every episode ends (composing is bounded).
    #[test]
    fn random_legal_play_ends_every_episode() {
        let mut s = StructuredSlot::new(EnvConfig::default()).unwrap();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for seed in 0..12u64 {
            s.reset(&ResetRequest {
                seed: Some(seed),
                ..Default::default()
            })
            .unwrap();
            let mut steps = 0;
            while !s.last.as_ref().unwrap().done {
                let legal: Vec<usize> = (0..s.mask.len()).filter(|i| s.mask[*i]).collect();
                assert!(
                    !legal.is_empty(),
                    "seed {seed}: no legal action before the end"
                );
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let before = s.slot.env.episode().unwrap().step_count;
                match s.step(legal[(x >> 33) as usize % legal.len()]).unwrap() {
                    Played::Composed => {
                        assert_eq!(s.slot.env.episode().unwrap().step_count, before)
                    }
                    Played::Env(_) => {}
                }
                steps += 1;
                assert!(steps < 2_000, "seed {seed}: the episode did not end");
            }
        }
    }
}
