//! The Python classes. Requests arrive as JSON text (the Python package writes it), replies
//! leave as the server's JSON text; batched arrays leave as `bytearray`s the package views with
//! NumPy (writable, no further copy). Every call releases the GIL while Rust works and turns a
//! panic into `RuntimeError`.
//!
//! The ControlBench and Audit classes share their method bodies through [`SingleEnv`] and
//! [`single_env_class!`]; the two vector classes through [`VecSlot`] and [`vector_class!`].

use crate::bridge::{call, f32_bytes, f64_bytes};
use crate::campaign::CampaignSlot;
use crate::errors::Refusal;
use crate::vector::{Batch, Input, Poison, RowOut, SeedStream, VecSlot, VecState};
use crate::{audit, controlbench as cb, request};
use audit_env::adversarial::FraudDifficulty;
use audit_env::episode::EnvConfig as AuditConfig;
use audit_env::episode::{AuditResetRequest, AuditStepEnvelope, AuditStepRequest};
use ls_env::{EnvConfig, StepEnvelope};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyTuple};
use std::sync::Mutex;

fn audit_config(
    max_findings_per_step: usize,
    fraud_difficulty: &str,
) -> Result<AuditConfig, Refusal> {
    let difficulty = FraudDifficulty::parse(fraud_difficulty)
        .ok_or_else(|| Refusal::validation("fraud_difficulty must be auto or 0-4"))?;
    Ok(AuditConfig {
        max_findings_per_step: max_findings_per_step
            .clamp(1, audit_env::model::limits::MAX_FINDINGS_PER_STEP_CEILING),
        fraud_difficulty: difficulty,
    })
}

/// The refusal of a call that needs an episode before the first reset.
fn not_reset() -> Refusal {
    ls_env::EnvStepError::NotReset.into()
}

fn cb_config(track_mode: &str) -> Result<EnvConfig, Refusal> {
    Ok(EnvConfig {
        track_mode: cb::track_mode(track_mode)?,
    })
}

// ------------------------------------------------------------------------------------------
// Single environments.
// ------------------------------------------------------------------------------------------

/// What the single-environment classes do, on text in and text out (their candidates are
/// [`VecSlot::candidates_text`]).
trait SingleEnv: Send + Poison {
    fn reset_text(&mut self, request: &str) -> Result<String, Refusal>;
    fn step_text(&mut self, action: &str) -> Result<String, Refusal>;
    fn step_index_text(&mut self, index: usize) -> Result<String, Refusal>;
    fn is_done(&self) -> bool;
}

impl SingleEnv for cb::Slot {
    fn reset_text(&mut self, request: &str) -> Result<String, Refusal> {
        let req = request::reset(request)?;
        cb::reply_text(&self.reset_any(&req, None)?)
    }
    fn step_text(&mut self, action: &str) -> Result<String, Refusal> {
        let action = request::step_action(action)?;
        cb::reply_text(&self.step(&action)?)
    }
    fn step_index_text(&mut self, index: usize) -> Result<String, Refusal> {
        cb::reply_text(&self.step_candidate(index)?)
    }
    fn is_done(&self) -> bool {
        self.done
    }
}

impl SingleEnv for audit::Slot {
    /// A `session_id` in the body is echoed as the server echoes the session it used.
    fn reset_text(&mut self, request: &str) -> Result<String, Refusal> {
        let req: AuditResetRequest = request::audit_typed(request)?;
        let sid = req.session_id.clone();
        audit::reply_text(&self.reset(req, sid)?)
    }
    fn step_text(&mut self, action: &str) -> Result<String, Refusal> {
        let req: AuditStepRequest = request::audit_typed(action)?;
        let sid = req.session_id.clone();
        audit::reply_text(&self.step(req, sid)?)
    }
    fn step_index_text(&mut self, index: usize) -> Result<String, Refusal> {
        audit::reply_text(&self.step_candidate(index, None)?)
    }
    fn is_done(&self) -> bool {
        self.done
    }
}

/// A single-environment class: the shared methods over [`SingleEnv`], then the class's own.
macro_rules! single_env_class {
    ($(#[$meta:meta])* $name:ident($slot:ty) { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            slot: Mutex<$slot>,
        }

        #[pymethods]
        impl $name {
            /// Reset from a `POST /reset` body (JSON text); returns the reply's JSON text.
            fn reset(&self, py: Python<'_>, request: &str) -> PyResult<String> {
                call(py, &self.slot, |s| s.reset_text(request))
            }

            /// Step from a `POST /step` body (JSON text); returns the reply's JSON text.
            fn step(&self, py: Python<'_>, action: &str) -> PyResult<String> {
                call(py, &self.slot, |s| s.step_text(action))
            }

            /// Step the `index`-th legal candidate of the last reply.
            fn step_index(&self, py: Python<'_>, index: usize) -> PyResult<String> {
                call(py, &self.slot, |s| s.step_index_text(index))
            }

            /// The legal candidate actions of the last reply, as JSON text.
            fn candidates(&self, py: Python<'_>) -> PyResult<String> {
                call(py, &self.slot, |s| Ok(VecSlot::candidates_text(s)))
            }

            /// Has the last reply ended the episode?
            #[getter]
            fn done(&self, py: Python<'_>) -> PyResult<bool> {
                call(py, &self.slot, |s| Ok(s.is_done()))
            }

            /// Test seam: panic inside the environment call, to check that a Rust panic
            /// reaches Python as `RuntimeError` and discards the environment until the next
            /// reset.
            fn _debug_panic(&self, py: Python<'_>) -> PyResult<()> {
                call(py, &self.slot, |_| -> Result<(), Refusal> {
                    panic!("debug panic requested")
                })
            }

            $($own)*
        }
    };
}

single_env_class!(
    /// One ControlBench environment (one HTTP session's worth: memory persists across resets).
    #[pyclass(module = "ledgershield._native", name = "ControlBench")]
    ControlBench(cb::Slot) {
        #[new]
        #[pyo3(signature = (track_mode = "blind"))]
        fn new(py: Python<'_>, track_mode: &str) -> PyResult<Self> {
            let slot = cb_config(track_mode)
                .and_then(|config| Ok(cb::Slot::new(cb::embedded_pool()?, config)))
                .map_err(|e| e.into_py(py))?;
            Ok(Self { slot: Mutex::new(slot) })
        }

        /// `(features, rl_vector, mask)` of the last reply: float32, float32 and uint8 bytes.
        fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
            let (f, r, m) = call(py, &self.slot, |s| Ok((s.features, s.rl_vector, s.mask())))?;
            PyTuple::new(
                py,
                [
                    PyBytes::new(py, &f32_bytes(&f)),
                    PyBytes::new(py, &f32_bytes(&r)),
                    PyBytes::new(py, &m),
                ],
            )
        }

        /// Where the last ended episode's case came from (JSON text: generator, base
        /// template, family, seed and splits of its task draw), or `None` (no episode ended
        /// yet, or it was a server reset). Shown only once the episode is over.
        fn task(&self, py: Python<'_>) -> PyResult<Option<String>> {
            call(py, &self.slot, |s| Ok(s.task_text()))
        }

        /// The watchdog's stream of the current episode (JSON text: what
        /// `GET /watchdog/observation` answers).
        fn watchdog_observation(&self, py: Python<'_>) -> PyResult<String> {
            call(py, &self.slot, |s| {
                let ep = s.env.episode().ok_or_else(not_reset)?;
                serde_json::to_string(&ls_env::watchdog_stream::observation(ep))
                    .map_err(|e| Refusal::new(500, "internal_error", e.to_string()))
            })
        }

        /// Record a watchdog verdict (`veto`, `escalate`, `warn`, `approve`) on the current
        /// episode, as `POST /watchdog/verdict` does; returns the verdict count.
        #[pyo3(signature = (verdict, reason = ""))]
        fn watchdog_verdict(&self, py: Python<'_>, verdict: &str, reason: &str) -> PyResult<usize> {
            call(py, &self.slot, |s| {
                let kind = ls_env::watchdog::VerdictKind::parse(verdict).ok_or_else(|| {
                    Refusal::validation("verdict must be one of veto, escalate, warn, approve")
                })?;
                let ep = s.env.episode_mut().ok_or_else(not_reset)?;
                ls_env::watchdog_stream::record_verdict(ep, kind, reason)
                    .map_err(Refusal::validation)
            })
        }

        /// The joint analyst + watchdog score (JSON text, `GET /watchdog/joint`), or `None`
        /// before the analyst's submission is graded.
        fn watchdog_joint(&self, py: Python<'_>) -> PyResult<Option<String>> {
            call(py, &self.slot, |s| {
                let ep = s.env.episode().ok_or_else(not_reset)?;
                ls_env::watchdog_stream::external_joint(ep)
                    .map(|j| {
                        serde_json::to_string(&j)
                            .map_err(|e| Refusal::new(500, "internal_error", e.to_string()))
                    })
                    .transpose()
            })
        }

        /// `GET /state`'s JSON text, or `None` before the first reset.
        fn state(&self, py: Python<'_>) -> PyResult<Option<String>> {
            call(py, &self.slot, |s| {
                s.env
                    .state()
                    .map(|st| {
                        ls_json::to_string(&st)
                            .map_err(|e| Refusal::new(500, "internal_error", e.to_string()))
                    })
                    .transpose()
            })
        }
    }
);

single_env_class!(
    /// One Financial Audit environment (its adversary and history persist across resets).
    #[pyclass(module = "ledgershield._native", name = "Audit")]
    Audit(audit::Slot) {
        #[new]
        #[pyo3(signature = (max_findings_per_step = 50, fraud_difficulty = "auto"))]
        fn new(
            py: Python<'_>,
            max_findings_per_step: usize,
            fraud_difficulty: &str,
        ) -> PyResult<Self> {
            let config = audit_config(max_findings_per_step, fraud_difficulty)
                .map_err(|e| e.into_py(py))?;
            Ok(Self { slot: Mutex::new(audit::Slot::new(config)) })
        }

        /// `(features, mask)`: float32 and uint8 bytes.
        fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
            let (f, m) = call(py, &self.slot, |s| Ok((s.features, s.mask())))?;
            PyTuple::new(py, [PyBytes::new(py, &f32_bytes(&f)), PyBytes::new(py, &m)])
        }

        /// `GET /state`'s JSON text.
        fn state(&self, py: Python<'_>) -> PyResult<String> {
            call(py, &self.slot, |s| {
                serde_json::to_value(s.env.state())
                    .and_then(|v| serde_json::to_string(&v))
                    .map_err(|_| audit_env::AuditError::Internal.into())
            })
        }
    }
);

// ------------------------------------------------------------------------------------------
// Audit campaigns.
// ------------------------------------------------------------------------------------------

impl Poison for CampaignSlot {
    fn poison(&mut self) {
        self.poisoned = true;
    }
}

/// One Financial Audit multi-period campaign, as the audit server's campaign routes serve it.
#[pyclass(module = "ledgershield._native", name = "AuditCampaign")]
pub struct AuditCampaign {
    slot: Mutex<CampaignSlot>,
}

#[pymethods]
impl AuditCampaign {
    #[new]
    #[pyo3(signature = (max_findings_per_step = 50))]
    fn new(max_findings_per_step: usize) -> Self {
        let max =
            max_findings_per_step.clamp(1, audit_env::model::limits::MAX_FINDINGS_PER_STEP_CEILING);
        Self {
            slot: Mutex::new(CampaignSlot::new(max)),
        }
    }

    /// `POST /campaign/start` (a new campaign replaces this object's).
    fn start(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.start(body))
    }

    /// `GET /campaign/state/{campaign_id}`.
    fn state(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, CampaignSlot::state)
    }

    /// `POST /campaign/task/start`.
    fn task_start(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.task_start(body))
    }

    /// `POST /campaign/task/submit`.
    fn task_submit(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.submit(body, "submitted"))
    }

    /// `POST /campaign/action` (the submit's alias; `status: accepted`).
    fn action(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.submit(body, "accepted"))
    }

    /// `POST /campaign/period/advance`.
    fn advance(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.advance(body))
    }

    /// `POST /overseer/review`.
    fn review(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.review(body))
    }

    /// `GET /overseer/report`.
    fn report(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, CampaignSlot::report)
    }

    /// `POST /self-improve`.
    fn self_improve(&self, py: Python<'_>, body: &str) -> PyResult<String> {
        call(py, &self.slot, |s| s.self_improve(body))
    }

    /// `GET /self-improve/history`.
    fn improve_history(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, CampaignSlot::improve_history)
    }

    /// Specialist `role`'s view of its episode this period: `(features, mask, candidates)`,
    /// float32 and uint8 bytes of the audit environment's layout and the candidate list as JSON
    /// text (submit-final first; empty without an open episode).
    fn role_view<'py>(&self, py: Python<'py>, role: &str) -> PyResult<Bound<'py, PyTuple>> {
        let (list, features) = call(py, &self.slot, |s| s.role_view(role))?;
        let mut mask = vec![0u8; audit::MAX_CANDIDATES];
        mask[..list.len()].fill(1);
        let text = audit::candidates_text(&list);
        PyTuple::new(
            py,
            [
                PyBytes::new(py, &f32_bytes(&features)).into_any(),
                PyBytes::new(py, &mask).into_any(),
                text.into_pyobject(py)?.into_any(),
            ],
        )
    }

    /// The running campaign's id (`None` before the first start).
    #[getter]
    fn campaign_id(&self, py: Python<'_>) -> PyResult<Option<String>> {
        call(py, &self.slot, |s| Ok(s.id()))
    }

    /// Has the running campaign closed its last period?
    #[getter]
    fn finished(&self, py: Python<'_>) -> PyResult<bool> {
        call(py, &self.slot, |s| Ok(s.finished()))
    }
}

// ------------------------------------------------------------------------------------------
// Vectors.
// ------------------------------------------------------------------------------------------

impl VecSlot for cb::Slot {
    type Template = request::Reset;
    type Action = request::Action;
    type Reply = StepEnvelope;
    const FEATURES: usize = cb::FEATURES;
    const RL_VECTOR: usize = cb::RL_VECTOR_LEN;
    const MASK: usize = cb::MAX_CANDIDATES;

    fn parse_template(text: &str) -> Result<request::Reset, Refusal> {
        request::reset(text)
    }
    fn parse_action(text: &str) -> Result<request::Action, Refusal> {
        request::step_action(text)
    }
    /// A body `seed` wins; else the environment's stream gives the seed (of the server's
    /// seeded selection, or of the task draw).
    fn reset_from(
        &mut self,
        template: &request::Reset,
        stream: &mut SeedStream,
    ) -> Result<StepEnvelope, Refusal> {
        match template {
            request::Reset::Server(req) if req.seed.is_some() => self.reset(req),
            request::Reset::Server(req) => {
                let mut req = req.clone();
                req.seed = Some(stream.next_seed());
                self.reset(&req)
            }
            request::Reset::Task(t) => {
                let seed = t.seed.unwrap_or_else(|| stream.next_seed());
                self.reset_task(t, seed)
            }
        }
    }
    fn step_index(&mut self, index: usize) -> Result<StepEnvelope, Refusal> {
        self.step_candidate(index)
    }
    fn step_typed(&mut self, action: &request::Action) -> Result<StepEnvelope, Refusal> {
        self.step(action)
    }
    fn write_row(
        &self,
        out: &StepEnvelope,
        row: &mut RowOut<'_>,
        text: bool,
    ) -> Result<(), Refusal> {
        row.features.copy_from_slice(&self.features);
        row.rl_vector.copy_from_slice(&self.rl_vector);
        self.write_masks(row);
        *row.reward = out.reward;
        *row.terminated = u8::from(out.terminated);
        *row.truncated = u8::from(out.truncated);
        if text {
            *row.text = Some(cb::reply_text(out)?);
        }
        Ok(())
    }
    fn write_masks(&self, row: &mut RowOut<'_>) {
        let n = self.candidates.len();
        row.mask[..n].fill(1);
        row.mask[n..].fill(0);
    }
    fn candidates_text(&self) -> String {
        cb::candidates_text(&self.candidates)
    }
    fn finished_text(&self) -> Option<String> {
        self.finished_text()
    }
}

impl VecSlot for audit::Slot {
    type Template = AuditResetRequest;
    type Action = AuditStepRequest;
    type Reply = AuditStepEnvelope;
    const FEATURES: usize = audit::FEATURES;
    const RL_VECTOR: usize = 0;
    const MASK: usize = audit::MAX_CANDIDATES;

    fn parse_template(text: &str) -> Result<AuditResetRequest, Refusal> {
        request::audit_typed(text)
    }
    fn parse_action(text: &str) -> Result<AuditStepRequest, Refusal> {
        request::audit_typed(text)
    }
    fn reset_from(
        &mut self,
        template: &AuditResetRequest,
        stream: &mut SeedStream,
    ) -> Result<AuditStepEnvelope, Refusal> {
        let mut req = template.clone();
        if req.seed.is_none() {
            req.seed = Some(stream.next_seed());
        }
        self.reset(req, None)
    }
    fn step_index(&mut self, index: usize) -> Result<AuditStepEnvelope, Refusal> {
        self.step_candidate(index, None)
    }
    fn step_typed(&mut self, action: &AuditStepRequest) -> Result<AuditStepEnvelope, Refusal> {
        self.step(action.clone(), None)
    }
    fn write_row(
        &self,
        out: &AuditStepEnvelope,
        row: &mut RowOut<'_>,
        text: bool,
    ) -> Result<(), Refusal> {
        row.features.copy_from_slice(&self.features);
        self.write_masks(row);
        *row.reward = out.reward;
        // An audit episode ends by its final submission (terminated) or its step budget
        // (truncated).
        *row.terminated = u8::from(out.done && self.final_submitted);
        *row.truncated = u8::from(out.done && !self.final_submitted);
        if text {
            *row.text = Some(audit::reply_text(out)?);
        }
        Ok(())
    }
    fn write_masks(&self, row: &mut RowOut<'_>) {
        let n = self.candidates.len();
        row.mask[..n].fill(1);
        row.mask[n..].fill(0);
    }
    fn candidates_text(&self) -> String {
        audit::candidates_text(&self.candidates)
    }
    fn finished_text(&self) -> Option<String> {
        self.finished.clone()
    }
}

/// An index from Python (negative means none): past every list, so an invalid-index step.
fn index_of(i: i64) -> usize {
    usize::try_from(i).unwrap_or(usize::MAX)
}

/// A batch's arrays as little-endian bytes, taken inside the locked call (so a concurrent call
/// cannot interleave), and its texts.
struct BatchBytes {
    arrays: [Vec<u8>; 6],
    texts: Option<Vec<String>>,
}

fn batch_bytes(b: &mut Batch, with_text: bool) -> BatchBytes {
    BatchBytes {
        arrays: [
            f32_bytes(&b.features),
            f32_bytes(&b.rl_vector),
            b.mask.clone(),
            f64_bytes(&b.reward),
            b.terminated.clone(),
            b.truncated.clone(),
        ],
        texts: with_text.then(|| {
            b.texts
                .iter_mut()
                .map(|t| t.take().unwrap_or_default())
                .collect()
        }),
    }
}

/// The batch as Python receives it: `(features, rl_vector, mask, reward, terminated,
/// truncated, texts)`, the arrays as `bytearray`s (NumPy views them writable, without a copy),
/// `texts` a list of the replies' JSON text or `None`.
fn batch_tuple(py: Python<'_>, b: BatchBytes) -> PyResult<Bound<'_, PyTuple>> {
    let mut items: Vec<Bound<'_, PyAny>> = b
        .arrays
        .iter()
        .map(|a| PyByteArray::new(py, a).into_any())
        .collect();
    items.push(b.texts.into_pyobject(py)?.into_any());
    PyTuple::new(py, items)
}

/// A vector class: the shared methods over [`VecState`], then the class's own constructor.
macro_rules! vector_class {
    ($(#[$meta:meta])* $name:ident($slot:ty) { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            state: Mutex<VecState<$slot>>,
        }

        #[pymethods]
        impl $name {
            /// Reset every environment from a reset body (JSON text). With `seed`, environment
            /// `i`'s reset seeds restart from its own stream of `seed` (a body `seed` wins).
            #[pyo3(signature = (request, seed = None, with_text = false))]
            fn reset<'py>(
                &self,
                py: Python<'py>,
                request: &str,
                seed: Option<u64>,
                with_text: bool,
            ) -> PyResult<Bound<'py, PyTuple>> {
                let b = call(py, &self.state, |st| {
                    st.reset(request, seed, with_text)?;
                    Ok(batch_bytes(&mut st.batch, with_text))
                })?;
                batch_tuple(py, b)
            }

            /// Step environment `i` with candidate `indices[i]` (an ended one resets instead).
            #[pyo3(signature = (indices, with_text = false))]
            fn step<'py>(
                &self,
                py: Python<'py>,
                indices: Vec<i64>,
                with_text: bool,
            ) -> PyResult<Bound<'py, PyTuple>> {
                let inputs = indices.into_iter().map(|i| Input::Index(index_of(i))).collect();
                let b = call(py, &self.state, |st| {
                    st.step(inputs, with_text)?;
                    Ok(batch_bytes(&mut st.batch, with_text))
                })?;
                batch_tuple(py, b)
            }

            /// Step environment `i` with the step body `actions[i]` (JSON text). Every body is
            /// read before any environment steps.
            #[pyo3(signature = (actions, with_text = false))]
            fn step_json<'py>(
                &self,
                py: Python<'py>,
                actions: Vec<String>,
                with_text: bool,
            ) -> PyResult<Bound<'py, PyTuple>> {
                let b = call(py, &self.state, |st| {
                    st.step_json(&actions, with_text)?;
                    Ok(batch_bytes(&mut st.batch, with_text))
                })?;
                batch_tuple(py, b)
            }

            /// Report the resets kept for the environments whose episode ended on the last
            /// step (same-step autoreset): their rows become the resets' (reward 0); the other
            /// rows are the last step's.
            #[pyo3(signature = (with_text = false))]
            fn take_pending<'py>(
                &self,
                py: Python<'py>,
                with_text: bool,
            ) -> PyResult<Bound<'py, PyTuple>> {
                let b = call(py, &self.state, |st| {
                    st.take_pending(with_text)?;
                    Ok(batch_bytes(&mut st.batch, with_text))
                })?;
                batch_tuple(py, b)
            }

            /// Environment `i`'s candidate actions (JSON text).
            fn candidates(&self, py: Python<'_>, i: usize) -> PyResult<String> {
                call(py, &self.state, |st| st.candidates(i))
            }

            /// Environment `i`'s last ended episode (JSON text: case, score, end flags, task
            /// draw), if any.
            fn finished(&self, py: Python<'_>, i: usize) -> PyResult<Option<String>> {
                call(py, &self.state, |st| st.finished(i))
            }

            #[getter]
            fn num_envs(&self, py: Python<'_>) -> PyResult<usize> {
                call(py, &self.state, |st| Ok(st.slots.len()))
            }

            #[getter]
            fn threads(&self, py: Python<'_>) -> PyResult<usize> {
                call(py, &self.state, |st| Ok(st.threads))
            }

            $($own)*
        }
    };
}

vector_class!(
    /// N ControlBench environments stepped in Rust worker threads, with next-step autoreset.
    #[pyclass(module = "ledgershield._native", name = "ControlBenchVector")]
    ControlBenchVector(cb::Slot) {
        #[new]
        #[pyo3(signature = (num_envs, track_mode = "blind", threads = None))]
        fn new(
            py: Python<'_>,
            num_envs: usize,
            track_mode: &str,
            threads: Option<usize>,
        ) -> PyResult<Self> {
            let slots = crate::vector::check_num_envs(num_envs)
                .and_then(|()| cb_config(track_mode))
                .and_then(|config| {
                    let pool = cb::embedded_pool()?;
                    Ok((0..num_envs).map(|_| cb::Slot::new(pool.clone(), config)).collect())
                })
                .map_err(|e| e.into_py(py))?;
            Ok(Self { state: Mutex::new(VecState::new(slots, threads)) })
        }
    }
);

vector_class!(
    /// N Financial Audit environments stepped in Rust worker threads, with next-step autoreset.
    #[pyclass(module = "ledgershield._native", name = "AuditVector")]
    AuditVector(audit::Slot) {
        #[new]
        #[pyo3(signature = (
            num_envs, max_findings_per_step = 50, fraud_difficulty = "auto", threads = None
        ))]
        fn new(
            py: Python<'_>,
            num_envs: usize,
            max_findings_per_step: usize,
            fraud_difficulty: &str,
            threads: Option<usize>,
        ) -> PyResult<Self> {
            let slots = crate::vector::check_num_envs(num_envs)
                .and_then(|()| audit_config(max_findings_per_step, fraud_difficulty))
                .map(|config| (0..num_envs).map(|_| audit::Slot::new(config.clone())).collect())
                .map_err(|e| e.into_py(py))?;
            Ok(Self { state: Mutex::new(VecState::new(slots, threads)) })
        }
    }
);

vector_class!(
    /// N ControlBench environments with the structured observation and the factored action
    /// space, stepped in Rust worker threads, with next-step autoreset (`crate::structured`).
    #[pyclass(module = "ledgershield._native", name = "StructuredControlBenchVector")]
    StructuredControlBenchVector(crate::structured::StructuredSlot) {
        #[new]
        #[pyo3(signature = (num_envs, track_mode = "blind", threads = None))]
        fn new(
            py: Python<'_>,
            num_envs: usize,
            track_mode: &str,
            threads: Option<usize>,
        ) -> PyResult<Self> {
            let slots = crate::vector::check_num_envs(num_envs)
                .and_then(|()| cb_config(track_mode))
                .and_then(|config| {
                    (0..num_envs)
                        .map(|_| crate::structured::StructuredSlot::new(config))
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| e.into_py(py))?;
            Ok(Self { state: Mutex::new(VecState::new(slots, threads)) })
        }
    }
);
