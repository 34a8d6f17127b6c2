//! N environments stepped in one call, each in a Rust worker thread's share of the batch, with
//! Gymnasium's next-step autoreset: the step after an episode ended reports that environment's
//! reset (its action is ignored; reward 0, neither terminated nor truncated) instead of stepping
//! it. The reset itself happens eagerly, right after the step that ended the episode, so the
//! ended row's action mask is the reset's (the action a policy picks for that row is the ignored
//! one, and a masked policy needs a legal entry to pick from); the next call reports the reset
//! it kept ([`VecState::take_pending`] reports it at once, for same-step autoreset).
//! Rows are written straight into the vector's reused output buffers ([`Batch`]); a reply is
//! serialized to JSON text only when asked.

use crate::errors::Refusal;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Most environments one vector holds: each holds an episode, an institution and its row
/// buffers, so a number past this is refused (`ValueError`) before anything is allocated
/// instead of exhausting memory.
pub const MAX_NUM_ENVS: usize = 4096;

/// `num_envs` within 1..=[`MAX_NUM_ENVS`], or the refusal naming the bound.
pub fn check_num_envs(num_envs: usize) -> Result<(), Refusal> {
    if num_envs == 0 || num_envs > MAX_NUM_ENVS {
        return Err(Refusal::validation(format!(
            "num_envs must be between 1 and {MAX_NUM_ENVS}, got {num_envs}"
        )));
    }
    Ok(())
}

/// An environment a vector holds: how it resets from the vector's template, steps, and writes
/// its row of the batch.
pub trait VecSlot: Send + Poison {
    /// The reset body every autoreset uses (its seed drawn from the environment's stream when
    /// it has none).
    type Template: Clone + Default + Send + Sync;
    /// A typed action.
    type Action: Send + Sync;
    /// The reply of a reset or step (kept across calls for an eager reset).
    type Reply: Send;
    const FEATURES: usize;
    const RL_VECTOR: usize;
    const MASK: usize;

    fn parse_template(text: &str) -> Result<Self::Template, Refusal>;
    fn parse_action(text: &str) -> Result<Self::Action, Refusal>;
    fn reset_from(
        &mut self,
        template: &Self::Template,
        stream: &mut SeedStream,
    ) -> Result<Self::Reply, Refusal>;
    fn step_index(&mut self, index: usize) -> Result<Self::Reply, Refusal>;
    fn step_typed(&mut self, action: &Self::Action) -> Result<Self::Reply, Refusal>;
    /// Write this environment's row (features, export vector, mask, reward, end flags and,
    /// when `text`, the reply's JSON text).
    fn write_row(
        &self,
        reply: &Self::Reply,
        row: &mut RowOut<'_>,
        text: bool,
    ) -> Result<(), Refusal>;
    /// Write the masks of the environment's current state into `row` (called after the eager
    /// reset of an ended episode, so that the ended row carries the reset's masks).
    fn write_masks(&self, row: &mut RowOut<'_>);
    fn candidates_text(&self) -> String;
    /// The last ended episode (its case, score, end flags and provenance), as JSON text
    /// (`None` when unknown).
    fn finished_text(&self) -> Option<String> {
        None
    }
}

/// One environment's row of a batch, borrowed from the vector's output buffers.
pub struct RowOut<'a> {
    pub features: &'a mut [f32],
    pub rl_vector: &'a mut [f32],
    pub mask: &'a mut [u8],
    pub reward: &'a mut f64,
    pub terminated: &'a mut u8,
    pub truncated: &'a mut u8,
    pub text: &'a mut Option<String>,
}

/// A batch's output buffers, environment by environment, reused from call to call.
#[derive(Debug, Default)]
pub struct Batch {
    pub features: Vec<f32>,
    pub rl_vector: Vec<f32>,
    pub mask: Vec<u8>,
    pub reward: Vec<f64>,
    pub terminated: Vec<u8>,
    pub truncated: Vec<u8>,
    pub texts: Vec<Option<String>>,
}

impl Batch {
    fn sized(n: usize, features: usize, rl: usize, mask: usize) -> Self {
        Batch {
            features: vec![0.0; n * features],
            rl_vector: vec![0.0; n * rl],
            mask: vec![0; n * mask],
            reward: vec![0.0; n],
            terminated: vec![0; n],
            truncated: vec![0; n],
            texts: vec![None; n],
        }
    }

    /// The per-environment rows (a zero-width field gives empty slices).
    fn rows(&mut self, features: usize, rl: usize, mask: usize) -> Vec<RowOut<'_>> {
        // `chunks_mut` needs a non-zero width; a zero-width field's buffer is empty, so its
        // iterator yields nothing and every row gets the empty slice.
        let mut f = self.features.chunks_mut(features.max(1));
        let mut r = self.rl_vector.chunks_mut(rl.max(1));
        let mut m = self.mask.chunks_mut(mask.max(1));
        self.reward
            .iter_mut()
            .zip(self.terminated.iter_mut())
            .zip(self.truncated.iter_mut())
            .zip(self.texts.iter_mut())
            .map(|(((reward, terminated), truncated), text)| RowOut {
                features: f.next().unwrap_or_default(),
                rl_vector: r.next().unwrap_or_default(),
                mask: m.next().unwrap_or_default(),
                reward,
                terminated,
                truncated,
                text,
            })
            .collect()
    }
}

/// A failure of one environment of a batch.
pub enum Failure {
    Refused(usize, Refusal),
    Panicked(usize, Box<dyn std::any::Any + Send>),
}

/// A per-environment seed stream (SplitMix64), so every environment of a seeded vector draws
/// its own reproducible sequence of reset seeds.
#[derive(Debug, Clone, Copy)]
pub struct SeedStream(u64);

impl SeedStream {
    pub fn new(seed: u64, index: usize) -> Self {
        Self(seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The next seed, in the HTTP reset's range (0 ..= i32::MAX).
    pub fn next_seed(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % (i32::MAX as u64 + 1)
    }
}

/// Run `f` on every item, the items split between `threads` scoped workers (inline for one);
/// a panic in one environment is caught there and marks it poisoned. The first failure, in
/// environment order, is returned.
pub fn run_all<T, F>(items: &mut [T], threads: usize, f: F) -> Result<(), Failure>
where
    T: Send + Poison,
    F: Fn(&mut T) -> Result<(), Refusal> + Sync,
{
    let n = items.len();
    let one = |offset: usize, chunk: &mut [T]| -> Option<Failure> {
        chunk.iter_mut().enumerate().find_map(|(k, item)| {
            let i = offset + k;
            match catch_unwind(AssertUnwindSafe(|| f(item))) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(Failure::Refused(i, e)),
                Err(p) => {
                    item.poison();
                    Some(Failure::Panicked(i, p))
                }
            }
        })
    };
    let threads = threads.clamp(1, n.max(1));
    let first = if threads == 1 {
        one(0, items)
    } else {
        let size = n.div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = items
                .chunks_mut(size)
                .enumerate()
                .map(|(c, chunk)| {
                    let one = &one;
                    s.spawn(move || one(c * size, chunk))
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok().flatten())
                .next()
        })
    };
    first.map_or(Ok(()), Err)
}

/// What a vector step does with one environment.
pub enum Input<A> {
    Index(usize),
    Typed(A),
}

/// One environment's share of a batch call.
struct Job<'a, S: VecSlot> {
    slot: &'a mut S,
    stream: &'a mut SeedStream,
    reset: bool,
    /// The eager reset of this environment, not yet reported.
    pending: &'a mut Option<S::Reply>,
    input: Input<S::Action>,
    row: RowOut<'a>,
}

impl<S: VecSlot> Poison for Job<'_, S> {
    fn poison(&mut self) {
        self.slot.poison();
    }
}

/// The state of a vector: its environments, which must report a reset on their next step (and
/// the eager resets kept for it), each one's reset-seed stream, the reset template and the
/// output buffers.
pub struct VecState<S: VecSlot> {
    pub slots: Vec<S>,
    needs_reset: Vec<bool>,
    pending: Vec<Option<S::Reply>>,
    streams: Vec<SeedStream>,
    template: S::Template,
    pub threads: usize,
    pub batch: Batch,
}

impl<S: VecSlot> Poison for VecState<S> {
    fn poison(&mut self) {}
}

impl<S: VecSlot> VecState<S> {
    pub fn new(slots: Vec<S>, threads: Option<usize>) -> Self {
        let n = slots.len();
        Self {
            needs_reset: vec![false; n],
            pending: (0..n).map(|_| None).collect(),
            streams: (0..n).map(|i| SeedStream::new(42, i)).collect(),
            template: S::Template::default(),
            threads: threads.unwrap_or_else(|| default_threads(n)),
            batch: Batch::sized(n, S::FEATURES, S::RL_VECTOR, S::MASK),
            slots,
        }
    }

    /// Reset every environment from a reset body; with `seed`, environment `i`'s reset seeds
    /// restart from its own stream of `seed` (a body `seed` or `case_id` wins).
    pub fn reset(&mut self, request: &str, seed: Option<u64>, text: bool) -> Result<(), Refusal> {
        self.template = S::parse_template(request)?;
        if let Some(seed) = seed {
            self.streams = (0..self.slots.len())
                .map(|i| SeedStream::new(seed, i))
                .collect();
        }
        self.needs_reset.fill(true);
        // Eager resets drawn under the previous template and streams are dropped.
        self.pending.iter_mut().for_each(|p| *p = None);
        let inputs = (0..self.slots.len()).map(|_| Input::Index(0)).collect();
        self.step(inputs, text)
    }

    /// Step environment `i` with typed step bodies (JSON text); every body is read before any
    /// environment steps.
    pub fn step_json(&mut self, actions: &[String], text: bool) -> Result<(), Refusal> {
        let inputs = actions
            .iter()
            .enumerate()
            .map(|(i, a)| {
                S::parse_action(a).map(Input::Typed).map_err(|mut e| {
                    e.message = format!("environment {i}: {}", e.message);
                    e
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.step(inputs, text)
    }

    /// Step every environment with its input (an ended one resets instead, Gymnasium's
    /// next-step autoreset: its input ignored, reward 0, neither terminated nor truncated).
    pub fn step(&mut self, inputs: Vec<Input<S::Action>>, text: bool) -> Result<(), Refusal> {
        let n = self.slots.len();
        if inputs.len() != n {
            return Err(Refusal::validation(format!(
                "expected {n} actions, got {}",
                inputs.len()
            )));
        }
        let template = &self.template;
        let rows = self.batch.rows(S::FEATURES, S::RL_VECTOR, S::MASK);
        let mut jobs: Vec<Job<'_, S>> = self
            .slots
            .iter_mut()
            .zip(self.streams.iter_mut())
            .zip(self.needs_reset.iter().copied())
            .zip(self.pending.iter_mut())
            .zip(inputs)
            .zip(rows)
            .map(|(((((slot, stream), reset), pending), input), row)| Job {
                slot,
                stream,
                reset,
                pending,
                input,
                row,
            })
            .collect();
        run_all(&mut jobs, self.threads, |job| {
            *job.row.text = None;
            if job.reset {
                let reply = match job.pending.take() {
                    Some(r) => r,
                    None => job.slot.reset_from(template, job.stream)?,
                };
                job.slot.write_row(&reply, &mut job.row, text)?;
                *job.row.reward = 0.0;
                return Ok(());
            }
            let reply = match &job.input {
                Input::Index(i) => job.slot.step_index(*i)?,
                Input::Typed(a) => job.slot.step_typed(a)?,
            };
            job.slot.write_row(&reply, &mut job.row, text)?;
            if *job.row.terminated != 0 || *job.row.truncated != 0 {
                // The eager reset: the ended row keeps its observation and takes the reset's
                // masks; the reset is reported on the next call.
                *job.pending = Some(job.slot.reset_from(template, job.stream)?);
                job.slot.write_masks(&mut job.row);
            }
            Ok(())
        })
        .map_err(raise_failure)?;
        drop(jobs);
        let b = &self.batch;
        for (i, flag) in self.needs_reset.iter_mut().enumerate() {
            *flag = !*flag && (b.terminated[i] != 0 || b.truncated[i] != 0);
        }
        Ok(())
    }

    /// Report the kept eager resets now (same-step autoreset): each environment whose episode
    /// ended on the last step gets its reset's row (reward 0, neither terminated nor truncated)
    /// and will not report it again; the other rows keep what the last call wrote.
    pub fn take_pending(&mut self, text: bool) -> Result<(), Refusal> {
        let rows = self.batch.rows(S::FEATURES, S::RL_VECTOR, S::MASK);
        for (((slot, pending), needs), mut row) in self
            .slots
            .iter_mut()
            .zip(self.pending.iter_mut())
            .zip(self.needs_reset.iter_mut())
            .zip(rows)
        {
            if let Some(reply) = pending.take() {
                *row.text = None;
                slot.write_row(&reply, &mut row, text)?;
                *row.reward = 0.0;
                *needs = false;
            }
        }
        Ok(())
    }

    /// Environment `i`'s last ended episode (JSON text), if known.
    pub fn finished(&self, i: usize) -> Result<Option<String>, Refusal> {
        self.slots
            .get(i)
            .map(S::finished_text)
            .ok_or_else(|| Refusal::validation(format!("no environment {i}")))
    }

    /// Environment `i`'s candidate actions (JSON text).
    pub fn candidates(&self, i: usize) -> Result<String, Refusal> {
        self.slots
            .get(i)
            .map(S::candidates_text)
            .ok_or_else(|| Refusal::validation(format!("no environment {i}")))
    }
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

/// A slot a panic can mark as discarded.
pub trait Poison {
    fn poison(&mut self);
}

/// The worker threads a vector uses by default: one per core, at most one per environment.
pub fn default_threads(n: usize) -> usize {
    std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(1)
        .min(n.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_streams_are_reproducible_and_distinct() {
        let draw = |seed, i| {
            let mut s = SeedStream::new(seed, i);
            (0..4).map(|_| s.next_seed()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7, 0), draw(7, 0));
        assert_ne!(draw(7, 0), draw(7, 1));
        assert!(draw(7, 3).iter().all(|s| *s <= i32::MAX as u64));
    }

    #[test]
    fn num_envs_is_bounded_before_anything_is_allocated() {
        assert!(check_num_envs(1).is_ok() && check_num_envs(MAX_NUM_ENVS).is_ok());
        for n in [0, MAX_NUM_ENVS + 1, 100_000_000] {
            let e = check_num_envs(n).unwrap_err();
            assert!(
                format!("{e:?}").contains("num_envs must be between 1 and 4096"),
                "{e:?}"
            );
        }
    }
}
