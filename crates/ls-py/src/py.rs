//! The Python classes. Requests arrive as JSON text (the Python package writes it), replies
//! leave as the server's JSON text; batched arrays leave as `bytes` the package views with
//! NumPy. Every call releases the GIL while Rust works and turns a panic into `RuntimeError`.

use crate::errors::{panic_error, Refusal};
use crate::vector::{self, Batch, Failure, Poison, Row, SeedStream};
use crate::{audit, controlbench as cb, request};
use audit_env::adversarial::FraudDifficulty;
use audit_env::episode::{AuditResetRequest, AuditStepRequest, EnvConfig as AuditConfig};
use ls_env::{EnvConfig, ResetRequest};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Run `f` on the locked state without the GIL; refusals become `EnvError`, a panic
/// `RuntimeError` (and poisons the state).
fn call<S, T>(
    py: Python<'_>,
    m: &Mutex<S>,
    f: impl FnOnce(&mut S) -> Result<T, Refusal> + Send,
) -> PyResult<T>
where
    S: Send + Poison,
    T: Send,
{
    let r = py.detach(|| {
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        match catch_unwind(AssertUnwindSafe(|| f(&mut g))) {
            Ok(r) => Ok(r),
            Err(p) => {
                g.poison();
                Err(p)
            }
        }
    });
    match r {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(e.into_py()),
        Err(p) => Err(panic_error(p)),
    }
}

fn audit_config(max_findings_per_step: usize, fraud_difficulty: &str) -> PyResult<AuditConfig> {
    let difficulty = FraudDifficulty::parse(fraud_difficulty)
        .ok_or_else(|| Refusal::validation("fraud_difficulty must be auto or 0-4").into_py())?;
    Ok(AuditConfig {
        max_findings_per_step: max_findings_per_step
            .clamp(1, audit_env::model::limits::MAX_FINDINGS_PER_STEP_CEILING),
        fraud_difficulty: difficulty,
    })
}

/// One ControlBench environment (one HTTP session's worth: memory persists across resets).
#[pyclass(module = "ledgershield._native", name = "ControlBench")]
pub struct ControlBench {
    slot: Mutex<cb::Slot>,
}

#[pymethods]
impl ControlBench {
    #[new]
    #[pyo3(signature = (track_mode = "blind"))]
    fn new(track_mode: &str) -> PyResult<Self> {
        let config = EnvConfig {
            track_mode: cb::track_mode(track_mode).map_err(Refusal::into_py)?,
        };
        let pool = cb::embedded_pool().map_err(Refusal::into_py)?;
        Ok(Self {
            slot: Mutex::new(cb::Slot::new(pool, config)),
        })
    }

    /// Reset from a `POST /reset` body (JSON text); returns the reply's JSON text.
    fn reset(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        call(py, &self.slot, |s| {
            let req = request::reset_request(request)?;
            cb::reply_text(&s.reset(&req)?)
        })
    }

    /// Step from a `POST /step` body (JSON text); returns the reply's JSON text.
    fn step(&self, py: Python<'_>, action: &str) -> PyResult<String> {
        call(py, &self.slot, |s| {
            let action = request::step_action(action)?;
            cb::reply_text(&s.step(&action)?)
        })
    }

    /// Step the `index`-th legal candidate of the last reply.
    fn step_index(&self, py: Python<'_>, index: usize) -> PyResult<String> {
        call(py, &self.slot, |s| {
            cb::reply_text(&s.step_candidate(index)?)
        })
    }

    /// The legal candidate actions of the last reply, as JSON text.
    fn candidates(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, |s| Ok(cb::candidates_text(&s.candidates)))
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

    /// Has the last reply ended the episode?
    #[getter]
    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        call(py, &self.slot, |s| Ok(s.done))
    }

    /// Test seam: panic inside the environment call, to check that a Rust panic reaches
    /// Python as `RuntimeError` and discards the environment until the next reset.
    fn _debug_panic(&self, py: Python<'_>) -> PyResult<()> {
        call(py, &self.slot, |_| -> Result<(), Refusal> {
            panic!("debug panic requested")
        })
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One Financial Audit environment (its adversary and history persist across resets).
#[pyclass(module = "ledgershield._native", name = "Audit")]
pub struct Audit {
    slot: Mutex<audit::Slot>,
}

#[pymethods]
impl Audit {
    #[new]
    #[pyo3(signature = (max_findings_per_step = 50, fraud_difficulty = "auto"))]
    fn new(max_findings_per_step: usize, fraud_difficulty: &str) -> PyResult<Self> {
        let config = audit_config(max_findings_per_step, fraud_difficulty)?;
        Ok(Self {
            slot: Mutex::new(audit::Slot::new(config)),
        })
    }

    /// Reset from a `POST /reset` body; a `session_id` in it is echoed as the server does.
    fn reset(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        call(py, &self.slot, |s| {
            let req: AuditResetRequest = request::audit_typed(request)?;
            let sid = req.session_id.clone();
            audit::reply_text(&s.reset(req, sid)?)
        })
    }

    fn step(&self, py: Python<'_>, action: &str) -> PyResult<String> {
        call(py, &self.slot, |s| {
            let req: AuditStepRequest = request::audit_typed(action)?;
            let sid = req.session_id.clone();
            audit::reply_text(&s.step(req, sid)?)
        })
    }

    fn step_index(&self, py: Python<'_>, index: usize) -> PyResult<String> {
        call(py, &self.slot, |s| {
            audit::reply_text(&s.step_candidate(index, None)?)
        })
    }

    fn candidates(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, |s| {
            Ok(audit::candidates_text(&s.candidates))
        })
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

    #[getter]
    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        call(py, &self.slot, |s| Ok(s.done))
    }

    fn _debug_panic(&self, py: Python<'_>) -> PyResult<()> {
        call(py, &self.slot, |_| -> Result<(), Refusal> {
            panic!("debug panic requested")
        })
    }
}

/// The state of a vector: its environments, which must reset on their next step, and each
/// one's reset-seed stream.
pub struct VecState<S, R> {
    slots: Vec<S>,
    needs_reset: Vec<bool>,
    streams: Vec<SeedStream>,
    template: R,
    threads: usize,
}

impl<S, R> Poison for VecState<S, R> {
    fn poison(&mut self) {}
}

/// An index from Python (negative means none): past every list, so an invalid-index step.
fn index_of(i: i64) -> usize {
    usize::try_from(i).unwrap_or(usize::MAX)
}

fn raise_failure(f: Failure) -> Refusal {
    match f {
        Failure::Refused(i, mut e) => {
            e.message = format!("environment {i}: {}", e.message);
            e
        }
        Failure::Panicked(i, p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Refusal::new(
                500,
                "internal_error",
                format!("environment {i} panicked ({what}); it was discarded and resets on its next step"),
            )
        }
    }
}

fn batch_tuple<'py>(py: Python<'py>, b: Batch) -> PyResult<Bound<'py, PyTuple>> {
    let texts = b.texts.into_pyobject(py)?.into_any();
    PyTuple::new(
        py,
        [
            PyBytes::new(py, &f32_bytes(&b.features)).into_any(),
            PyBytes::new(py, &f32_bytes(&b.rl_vector)).into_any(),
            PyBytes::new(py, &b.mask).into_any(),
            PyBytes::new(py, &f64_bytes(&b.reward)).into_any(),
            PyBytes::new(py, &b.terminated).into_any(),
            PyBytes::new(py, &b.truncated).into_any(),
            texts,
        ],
    )
}

type CbVec = VecState<cb::Slot, ResetRequest>;

fn cb_row(s: &cb::Slot, out: &ls_env::StepEnvelope, text: bool) -> Result<Row, Refusal> {
    Ok(Row {
        features: s.features.to_vec(),
        rl_vector: s.rl_vector.to_vec(),
        mask: s.mask().to_vec(),
        reward: out.reward,
        terminated: out.terminated,
        truncated: out.truncated,
        text: if text {
            Some(cb::reply_text(out)?)
        } else {
            None
        },
    })
}

fn cb_reset_one(
    s: &mut cb::Slot,
    template: &ResetRequest,
    stream: &mut SeedStream,
    text: bool,
) -> Result<Row, Refusal> {
    let mut req = template.clone();
    if req.seed.is_none() {
        req.seed = Some(stream.next_seed());
    }
    let out = s.reset(&req)?;
    let mut row = cb_row(s, &out, text)?;
    // Gymnasium: the autoreset step carries reward 0, neither terminated nor truncated.
    row.reward = 0.0;
    Ok(row)
}

/// What a vector step does with one environment's action.
enum CbAction {
    Index(usize),
    Typed(request::Action),
}

fn cb_step_all(st: &mut CbVec, actions: Vec<CbAction>, text: bool) -> Result<Batch, Refusal> {
    if actions.len() != st.slots.len() {
        return Err(Refusal::validation(format!(
            "expected {} actions, got {}",
            st.slots.len(),
            actions.len()
        )));
    }
    let inputs: Vec<(CbAction, bool, SeedStream)> = actions
        .into_iter()
        .zip(st.needs_reset.iter().copied())
        .zip(st.streams.iter().copied())
        .map(|((a, r), s)| (a, r, s))
        .collect();
    let template = &st.template;
    let mut paired: Vec<(&mut cb::Slot, &mut SeedStream)> =
        st.slots.iter_mut().zip(st.streams.iter_mut()).collect();
    let rows = vector::run_all(
        &mut paired,
        &inputs,
        st.threads,
        |_, (slot, stream), (action, reset, _)| {
            if *reset {
                return cb_reset_one(slot, template, stream, text);
            }
            let out = match action {
                CbAction::Index(i) => slot.step_candidate(*i)?,
                CbAction::Typed(a) => slot.step(a)?,
            };
            cb_row(slot, &out, text)
        },
    )
    .map_err(raise_failure)?;
    for (flag, row) in st.needs_reset.iter_mut().zip(&rows) {
        *flag = !*flag && (row.terminated || row.truncated);
    }
    Ok(Batch::of(rows, text))
}

impl<S: Poison> Poison for (&mut S, &mut SeedStream) {
    fn poison(&mut self) {
        self.0.poison();
    }
}

/// N ControlBench environments stepped in Rust worker threads, with next-step autoreset.
#[pyclass(module = "ledgershield._native", name = "ControlBenchVector")]
pub struct ControlBenchVector {
    state: Mutex<CbVec>,
}

#[pymethods]
impl ControlBenchVector {
    #[new]
    #[pyo3(signature = (num_envs, track_mode = "blind", threads = None))]
    fn new(num_envs: usize, track_mode: &str, threads: Option<usize>) -> PyResult<Self> {
        if num_envs == 0 {
            return Err(Refusal::validation("num_envs must be at least 1").into_py());
        }
        let config = EnvConfig {
            track_mode: cb::track_mode(track_mode).map_err(Refusal::into_py)?,
        };
        let pool = cb::embedded_pool().map_err(Refusal::into_py)?;
        Ok(Self {
            state: Mutex::new(VecState {
                slots: (0..num_envs)
                    .map(|_| cb::Slot::new(pool.clone(), config))
                    .collect(),
                needs_reset: vec![false; num_envs],
                streams: (0..num_envs).map(|i| SeedStream::new(42, i)).collect(),
                template: ResetRequest::default(),
                threads: threads.unwrap_or_else(|| vector::default_threads(num_envs)),
            }),
        })
    }

    /// Reset every environment from a reset body (JSON text). With `seed`, environment `i`'s
    /// reset seeds restart from its own stream of `seed` (a body `seed` or `case_id` wins).
    #[pyo3(signature = (request, seed = None, with_text = false))]
    fn reset<'py>(
        &self,
        py: Python<'py>,
        request: &str,
        seed: Option<u64>,
        with_text: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let b = call(py, &self.state, |st: &mut CbVec| {
            st.template = request::reset_request(request)?;
            if let Some(seed) = seed {
                st.streams = (0..st.slots.len())
                    .map(|i| SeedStream::new(seed, i))
                    .collect();
            }
            st.needs_reset.fill(true);
            let n = st.slots.len();
            cb_step_all(st, (0..n).map(|_| CbAction::Index(0)).collect(), with_text)
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
        let actions = indices
            .into_iter()
            .map(|i| CbAction::Index(index_of(i)))
            .collect();
        let b = call(py, &self.state, |st: &mut CbVec| {
            cb_step_all(st, actions, with_text)
        })?;
        batch_tuple(py, b)
    }

    /// Step environment `i` with the step body `actions[i]` (JSON text). Every body is read
    /// before any environment steps.
    #[pyo3(signature = (actions, with_text = false))]
    fn step_json<'py>(
        &self,
        py: Python<'py>,
        actions: Vec<String>,
        with_text: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let b = call(py, &self.state, |st: &mut CbVec| {
            let parsed = actions
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    request::step_action(a)
                        .map(CbAction::Typed)
                        .map_err(|mut e| {
                            e.message = format!("environment {i}: {}", e.message);
                            e
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            cb_step_all(st, parsed, with_text)
        })?;
        batch_tuple(py, b)
    }

    /// Environment `i`'s candidate actions (JSON text).
    fn candidates(&self, py: Python<'_>, i: usize) -> PyResult<String> {
        call(py, &self.state, |st: &mut CbVec| {
            st.slots
                .get(i)
                .map(|s| cb::candidates_text(&s.candidates))
                .ok_or_else(|| Refusal::validation(format!("no environment {i}")))
        })
    }

    #[getter]
    fn num_envs(&self, py: Python<'_>) -> PyResult<usize> {
        call(py, &self.state, |st: &mut CbVec| Ok(st.slots.len()))
    }

    #[getter]
    fn threads(&self, py: Python<'_>) -> PyResult<usize> {
        call(py, &self.state, |st: &mut CbVec| Ok(st.threads))
    }
}

type AuditVec = VecState<audit::Slot, AuditResetRequest>;

fn audit_row(
    s: &audit::Slot,
    out: &audit_env::episode::AuditStepEnvelope,
    text: bool,
) -> Result<Row, Refusal> {
    Ok(Row {
        features: s.features.to_vec(),
        rl_vector: vec![],
        mask: s.mask(),
        reward: out.reward,
        // An audit episode ends by its final submission (terminated) or its step budget
        // (truncated).
        terminated: out.done && s.final_submitted,
        truncated: out.done && !s.final_submitted,
        text: if text {
            Some(audit::reply_text(out)?)
        } else {
            None
        },
    })
}

enum AuditAction {
    Index(usize),
    Typed(Box<AuditStepRequest>),
}

fn audit_step_all(
    st: &mut AuditVec,
    actions: Vec<AuditAction>,
    text: bool,
) -> Result<Batch, Refusal> {
    if actions.len() != st.slots.len() {
        return Err(Refusal::validation(format!(
            "expected {} actions, got {}",
            st.slots.len(),
            actions.len()
        )));
    }
    let inputs: Vec<(AuditAction, bool)> = actions
        .into_iter()
        .zip(st.needs_reset.iter().copied())
        .collect();
    let template = &st.template;
    let mut paired: Vec<(&mut audit::Slot, &mut SeedStream)> =
        st.slots.iter_mut().zip(st.streams.iter_mut()).collect();
    let rows = vector::run_all(
        &mut paired,
        &inputs,
        st.threads,
        |_, (slot, stream), (action, reset)| {
            if *reset {
                let mut req = template.clone();
                if req.seed.is_none() {
                    req.seed = Some(stream.next_seed());
                }
                let out = slot.reset(req, None)?;
                let mut row = audit_row(slot, &out, text)?;
                row.reward = 0.0;
                return Ok(row);
            }
            let out = match action {
                AuditAction::Index(i) => slot.step_candidate(*i, None)?,
                AuditAction::Typed(r) => slot.step((**r).clone(), None)?,
            };
            audit_row(slot, &out, text)
        },
    )
    .map_err(raise_failure)?;
    for (flag, row) in st.needs_reset.iter_mut().zip(&rows) {
        *flag = !*flag && (row.terminated || row.truncated);
    }
    Ok(Batch::of(rows, text))
}

/// N Financial Audit environments stepped in Rust worker threads, with next-step autoreset.
#[pyclass(module = "ledgershield._native", name = "AuditVector")]
pub struct AuditVector {
    state: Mutex<AuditVec>,
}

#[pymethods]
impl AuditVector {
    #[new]
    #[pyo3(signature = (num_envs, max_findings_per_step = 50, fraud_difficulty = "auto", threads = None))]
    fn new(
        num_envs: usize,
        max_findings_per_step: usize,
        fraud_difficulty: &str,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        if num_envs == 0 {
            return Err(Refusal::validation("num_envs must be at least 1").into_py());
        }
        let config = audit_config(max_findings_per_step, fraud_difficulty)?;
        Ok(Self {
            state: Mutex::new(VecState {
                slots: (0..num_envs)
                    .map(|_| audit::Slot::new(config.clone()))
                    .collect(),
                needs_reset: vec![false; num_envs],
                streams: (0..num_envs).map(|i| SeedStream::new(42, i)).collect(),
                template: AuditResetRequest::default(),
                threads: threads.unwrap_or_else(|| vector::default_threads(num_envs)),
            }),
        })
    }

    #[pyo3(signature = (request, seed = None, with_text = false))]
    fn reset<'py>(
        &self,
        py: Python<'py>,
        request: &str,
        seed: Option<u64>,
        with_text: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let b = call(py, &self.state, |st: &mut AuditVec| {
            st.template = request::audit_typed(request)?;
            if let Some(seed) = seed {
                st.streams = (0..st.slots.len())
                    .map(|i| SeedStream::new(seed, i))
                    .collect();
            }
            st.needs_reset.fill(true);
            let n = st.slots.len();
            audit_step_all(
                st,
                (0..n).map(|_| AuditAction::Index(0)).collect(),
                with_text,
            )
        })?;
        batch_tuple(py, b)
    }

    #[pyo3(signature = (indices, with_text = false))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<i64>,
        with_text: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let actions = indices
            .into_iter()
            .map(|i| AuditAction::Index(index_of(i)))
            .collect();
        let b = call(py, &self.state, |st: &mut AuditVec| {
            audit_step_all(st, actions, with_text)
        })?;
        batch_tuple(py, b)
    }

    #[pyo3(signature = (actions, with_text = false))]
    fn step_json<'py>(
        &self,
        py: Python<'py>,
        actions: Vec<String>,
        with_text: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let b = call(py, &self.state, |st: &mut AuditVec| {
            let parsed = actions
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    request::audit_typed::<AuditStepRequest>(a)
                        .map(|r| AuditAction::Typed(Box::new(r)))
                        .map_err(|mut e| {
                            e.message = format!("environment {i}: {}", e.message);
                            e
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            audit_step_all(st, parsed, with_text)
        })?;
        batch_tuple(py, b)
    }

    fn candidates(&self, py: Python<'_>, i: usize) -> PyResult<String> {
        call(py, &self.state, |st: &mut AuditVec| {
            st.slots
                .get(i)
                .map(|s| audit::candidates_text(&s.candidates))
                .ok_or_else(|| Refusal::validation(format!("no environment {i}")))
        })
    }

    #[getter]
    fn num_envs(&self, py: Python<'_>) -> PyResult<usize> {
        call(py, &self.state, |st: &mut AuditVec| Ok(st.slots.len()))
    }
}
