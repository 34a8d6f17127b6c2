//! Helpers shared by the attacker's tests (`leak.rs`, `learned_attacker.rs`).

use rand::Rng;
use std::collections::BTreeSet;

/// `n` distinct seeds drawn at random (spaced by 10, so the derived per-kind seeds of two draws
/// never collide), in a random order, or read from `var` to replay a run.
pub fn draw_seeds(var: &str, n: usize) -> Vec<u64> {
    if let Ok(v) = std::env::var(var) {
        let s: Vec<u64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        assert_eq!(s.len(), n, "{var} needs {n} seeds");
        return s;
    }
    let mut rng = rand::rng();
    let mut drawn = BTreeSet::new();
    while drawn.len() < n {
        drawn.insert(rng.random_range(100..90_000u64) * 10);
    }
    let mut v: Vec<u64> = drawn.into_iter().collect();
    let k = rng.random_range(0..n);
    v.rotate_left(k);
    v
}
