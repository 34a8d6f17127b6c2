//! Time of one `ls_grading::grade` call on the reference (oracle) submission after a careful
//! episode: for CASE-D-001 alone (also without its certificate, graded on a synthesized one, as
//! for most agents) and for every curated case in turn. Inputs are built once, outside the timed
//! loop.

#[path = "../tests/common.rs"]
mod common;

use common::{careful_episode, careful_payload, grading_input, submit_boundary, Episode, Extras};
use criterion::{criterion_group, criterion_main, Criterion};
use ls_core::{Case, FixtureSet, Submission};
use ls_grading::{BoundaryReport, GradingInput};
use std::hint::black_box;

// As in the server binary and the ls-env episode bench.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Everything a `GradingInput` borrows, owned.
struct Prepared<'a> {
    case: &'a Case,
    ep: Episode,
    sub: Submission,
    boundary: BoundaryReport,
    extras: Extras,
}

impl<'a> Prepared<'a> {
    /// The oracle submission; `legacy` drops its certificate (graded on a synthesized one).
    fn new(case: &'a Case, legacy: bool) -> Self {
        let ep = careful_episode(case);
        let mut payload = careful_payload(case, &ep);
        if legacy {
            payload.remove("decision_certificate");
        }
        let sub = Submission::from_payload(&payload).expect("oracle payload parses");
        let boundary = submit_boundary(&ep, &sub, 0, false);
        Prepared {
            case,
            ep,
            sub,
            boundary,
            extras: Extras::default(),
        }
    }

    fn input(&self, set: &'a FixtureSet) -> GradingInput<'_> {
        grading_input(
            self.case,
            set.world(self.case),
            &self.ep,
            &self.sub,
            &self.boundary,
            "case",
            &self.extras,
        )
    }
}

fn bench(c: &mut Criterion) {
    let set = FixtureSet::embedded().expect("embedded fixtures parse");
    let prepared: Vec<Prepared<'_>> = set.cases.iter().map(|c| Prepared::new(c, false)).collect();
    let d1 = prepared
        .iter()
        .find(|p| p.case.case_id == "CASE-D-001")
        .expect("CASE-D-001 is curated");
    let d1_input = d1.input(&set);
    c.bench_function("grade_oracle_case_d_001", |b| {
        b.iter(|| ls_grading::grade(black_box(&d1_input)))
    });
    let d1_legacy = Prepared::new(d1.case, true);
    let d1_legacy_input = d1_legacy.input(&set);
    c.bench_function("grade_legacy_case_d_001", |b| {
        b.iter(|| ls_grading::grade(black_box(&d1_legacy_input)))
    });
    let inputs: Vec<GradingInput<'_>> = prepared.iter().map(|p| p.input(&set)).collect();
    c.bench_function("grade_oracle_all_curated", |b| {
        b.iter(|| {
            for i in &inputs {
                black_box(ls_grading::grade(black_box(i)));
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
