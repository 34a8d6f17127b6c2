//! Any sequence of legal factored actions is a valid episode: on random seeds over every pool kind,
//! random legal actions never make the environment refuse a request (no 4xx), composing steps
//! never reach it, and every episode ends (composing is bounded). Seeds are drawn per run and
//! printed (`RANDOM_PLAY_SEED=n` replays one).

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use ls_rl::{Composer, Layout, Ledger, Step};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

#[test]
fn random_legal_actions_are_always_valid_requests() {
    let seed = std::env::var("RANDOM_PLAY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random_range(0..1_000_000u64));
    eprintln!("RANDOM_PLAY_SEED={seed}");
    let set = FixtureSet::embedded().unwrap();
    let cases = ls_gen::pool::curated_and_every_pool_kind(&set, seed, 8);
    let pool = Arc::new(CasePool::from_parts(
        cases.iter().cloned().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ));
    let layout = Layout::new();
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let (mut env_steps, mut composed) = (0usize, 0usize);
    for case in &cases {
        for _ in 0..2 {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            let mut last = env
                .reset(&ResetRequest {
                    case_id: Some(case.case_id.clone()),
                    ..Default::default()
                })
                .unwrap();
            let mut ledger = Ledger::new();
            ledger.absorb(&last);
            let mut composer = Composer::new();
            for _ in 0..5_000 {
                if last.done {
                    break;
                }
                let mask = composer.mask(&layout, &ledger);
                let legal: Vec<usize> = (0..mask.len()).filter(|i| mask[*i]).collect();
                assert!(!legal.is_empty(), "{}: nothing legal", case.case_id);
                let i = *legal.choose(&mut r).unwrap();
                match composer.apply(&layout, &ledger, i) {
                    Step::Composed => composed += 1,
                    Step::Env {
                        action_type,
                        payload,
                    } => {
                        last = env.step(&action_type, &payload).unwrap_or_else(|e| {
                            panic!(
                                "{}: {action_type} refused: {e} (RANDOM_PLAY_SEED={seed})",
                                case.case_id
                            )
                        });
                        ledger.absorb(&last);
                        env_steps += 1;
                    }
                }
            }
            assert!(last.done, "{}: the episode did not end", case.case_id);
        }
    }
    assert!(
        env_steps > 200 && composed > 200,
        "{env_steps} env steps, {composed} composed"
    );
}
