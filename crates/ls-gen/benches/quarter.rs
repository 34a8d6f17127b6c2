//! Generating a standard 100-case ControlBench AP quarter (target: < 50 ms), and one draw of
//! the task distribution per generator (what a random reset generates).

use criterion::{criterion_group, criterion_main, Criterion};
use ls_core::FixtureSet;
use ls_gen::QuarterConfig;

fn quarter(c: &mut Criterion) {
    let set = FixtureSet::embedded().expect("embedded fixtures");
    let cfg = QuarterConfig::default();
    c.bench_function("controlbench_quarter_100", |b| {
        b.iter(|| ls_gen::controlbench(&set, std::hint::black_box(&cfg)))
    });
    c.bench_function("controlbench_quarter_100_with_checks", |b| {
        b.iter(|| {
            let cases = ls_gen::controlbench(&set, &cfg);
            cases
                .iter()
                .map(|x| ls_gen::checks::check_generated(x, &set.world(x)).len())
                .sum::<usize>()
        })
    });
}

/// One draw of the task distribution per generator: seeds cycle, so each iteration builds a new
/// case (a curated draw hands out the template).
fn task_draws(c: &mut Criterion) {
    let dist = ls_gen::TaskDistribution::embedded().expect("embedded fixtures");
    let sel = ls_gen::Selection::default();
    let mut seeds: std::collections::BTreeMap<ls_gen::Generator, Vec<u64>> = Default::default();
    for seed in 0..20_000u64 {
        let g = dist.draw(sel, seed).expect("draw").generator;
        seeds.entry(g).or_default().push(seed);
    }
    for (g, list) in seeds {
        let mut i = 0usize;
        c.bench_function(&format!("task_draw_{}", g.as_str()), |b| {
            b.iter(|| {
                i = (i + 1) % list.len();
                dist.draw(sel, std::hint::black_box(list[i])).expect("draw")
            })
        });
    }
}

criterion_group!(benches, quarter, task_draws);
criterion_main!(benches);
