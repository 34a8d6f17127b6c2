//! N environments stepped in one call, each in a Rust worker thread's share of the batch, with
//! Gymnasium's next-step autoreset: the step after an episode ended resets that environment
//! (its action is ignored; reward 0, neither terminated nor truncated) instead of stepping it.

use crate::errors::Refusal;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What one environment reports for a batch.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub features: Vec<f32>,
    pub rl_vector: Vec<f32>,
    pub mask: Vec<u8>,
    pub reward: f64,
    pub terminated: bool,
    pub truncated: bool,
    /// The reply JSON, when asked for.
    pub text: Option<String>,
}

/// A batch: the rows laid out as flat arrays, environment by environment.
#[derive(Debug, Default)]
pub struct Batch {
    pub features: Vec<f32>,
    pub rl_vector: Vec<f32>,
    pub mask: Vec<u8>,
    pub reward: Vec<f64>,
    pub terminated: Vec<u8>,
    pub truncated: Vec<u8>,
    pub texts: Option<Vec<String>>,
}

impl Batch {
    pub fn of(rows: Vec<Row>, with_text: bool) -> Self {
        let mut b = Batch {
            texts: with_text.then(|| Vec::with_capacity(rows.len())),
            ..Default::default()
        };
        for r in rows {
            b.features.extend_from_slice(&r.features);
            b.rl_vector.extend_from_slice(&r.rl_vector);
            b.mask.extend_from_slice(&r.mask);
            b.reward.push(r.reward);
            b.terminated.push(u8::from(r.terminated));
            b.truncated.push(u8::from(r.truncated));
            if let (Some(t), Some(text)) = (b.texts.as_mut(), r.text) {
                t.push(text);
            }
        }
        b
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

/// Run `f` on every (slot, input) pair, the slots split between `threads` scoped workers; a
/// panic in one environment is caught there and marks it poisoned.
pub fn run_all<S, I, F>(
    slots: &mut [S],
    inputs: &[I],
    threads: usize,
    f: F,
) -> Result<Vec<Row>, Failure>
where
    S: Send + Poison,
    I: Sync,
    F: Fn(usize, &mut S, &I) -> Result<Row, Refusal> + Sync,
{
    let n = slots.len();
    let one = |offset: usize, chunk: &mut [S], ins: &[I]| -> Vec<Result<Row, Failure>> {
        chunk
            .iter_mut()
            .zip(ins)
            .enumerate()
            .map(|(k, (slot, input))| {
                let i = offset + k;
                match catch_unwind(AssertUnwindSafe(|| f(i, slot, input))) {
                    Ok(r) => r.map_err(|e| Failure::Refused(i, e)),
                    Err(p) => {
                        slot.poison();
                        Err(Failure::Panicked(i, p))
                    }
                }
            })
            .collect()
    };
    let threads = threads.clamp(1, n.max(1));
    let results: Vec<Result<Row, Failure>> = if threads == 1 {
        one(0, slots, inputs)
    } else {
        let size = n.div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = slots
                .chunks_mut(size)
                .zip(inputs.chunks(size))
                .enumerate()
                .map(|(c, (chunk, ins))| {
                    let one = &one;
                    s.spawn(move || one(c * size, chunk, ins))
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    results.into_iter().collect()
}

/// A slot a panic can mark as discarded.
pub trait Poison {
    fn poison(&mut self);
}

impl Poison for crate::controlbench::Slot {
    fn poison(&mut self) {
        self.poisoned = true;
    }
}

impl Poison for crate::audit::Slot {
    fn poison(&mut self) {
        self.poisoned = true;
    }
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
}
