//! Generating a standard 100-case ControlBench AP quarter (target: < 50 ms).

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

criterion_group!(benches, quarter);
criterion_main!(benches);
