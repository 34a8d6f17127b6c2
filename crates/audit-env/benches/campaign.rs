//! Server-side time of a whole 5-period campaign (perfect specialists, overseer review).

use audit_env::campaign::{Campaign, OverseerAction, Role};
use audit_env::episode::AuditAction;
use audit_env::grading::perfect_findings;
use criterion::{criterion_group, criterion_main, Criterion};

fn run_campaign(seed: u64) -> f64 {
    let mut c = Campaign::new("bench".into(), seed, 5, 50).expect("campaign");
    for _ in 0..5 {
        for r in Role::SPECIALISTS {
            c.start_task(r).expect("start");
            loop {
                let f = perfect_findings(c.episodes[&r].gt());
                if c.submit(
                    r,
                    AuditAction {
                        findings: f,
                        submit_final: Some(true),
                    },
                )
                .expect("submit")
                .done
                {
                    break;
                }
            }
        }
        c.review(OverseerAction::default()).expect("review");
        c.advance().expect("advance");
    }
    c.score()
}

fn bench(cr: &mut Criterion) {
    cr.bench_function("campaign_5_periods", |b| {
        b.iter(|| run_campaign(std::hint::black_box(42)))
    });
    cr.bench_function("episode_generate_and_grade_fraud", |b| {
        b.iter(|| {
            audit_env::episode::evaluate(
                audit_env::model::TaskId::FraudDetection,
                std::hint::black_box(42),
                vec![],
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
