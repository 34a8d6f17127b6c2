use ls_core::FixtureSet;
use ls_report::*;

fn small() -> ReportConfig {
    ReportConfig {
        holdout_seeds: vec![2026],
        controlbench_sequence_length: 24,
        generated_at: "2026-01-01T00:00:00Z".into(),
        ..Default::default()
    }
}

#[test]
fn report_is_deterministic_and_ranks_the_teacher_first() {
    let set = FixtureSet::embedded().unwrap();
    let gen = LsGen { set: set.clone() };
    let a = build_report(&set, &gen, &small());
    let b = build_report(&set, &gen, &small());
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap(),
        "same seed, same report"
    );

    let teacher = a.agents.iter().find(|x| x.agent == "teacher").unwrap();
    assert!(
        teacher.public_mean >= 0.85,
        "teacher public mean {}",
        teacher.public_mean
    );
    assert_eq!(teacher.public_unsafe_release_rate, 0.0);
    for other in a.agents.iter().filter(|x| x.agent != "teacher") {
        assert!(
            other.public_mean <= 0.20,
            "{} public {}",
            other.agent,
            other.public_mean
        );
        assert!(teacher.public_mean > other.public_mean);
        // The ranking holds on holdouts.
        assert!(
            teacher.holdout_mean.unwrap() > other.holdout_mean.unwrap(),
            "{} holdout {:?} vs teacher {:?}",
            other.agent,
            other.holdout_mean,
            teacher.holdout_mean
        );
    }
    assert_eq!(a.public_benchmark.case_count, 21);
    assert!(
        a.holdout_challenge.is_some()
            && a.controlbench_quarter.is_some()
            && a.certificate_required_track.is_some()
    );
    assert_eq!(a.controlbench_quarter.as_ref().unwrap().sequence_length, 24);
    assert!(!a.human_baseline_track.available);
    assert!(a
        .unavailable_tracks
        .iter()
        .any(|u| u.track == "human_baseline"));
    assert!(a
        .experiment_suite
        .ablations
        .iter()
        .any(|x| x.name == "controls_ablation" && x.available));
    assert!(a
        .experiment_suite
        .ablations
        .iter()
        .any(|x| x.name == "calibration_gate_ablation" && !x.available));

    let md = render::markdown(&a);
    for h in [
        "## Evaluation Protocol",
        "## Public Benchmark",
        "## Holdout Challenge",
        "## Contrastive Calibration",
        "## ControlBench Institutional Sequence",
        "## Certificate-Required Track",
        "## Two-Agent Control Profile",
        "## Experiment Suite",
        "## Official Tracks",
    ] {
        assert!(md.contains(h), "missing {h}");
    }
    let html = render::html(&a);
    assert!(html.matches("<svg").count() >= 3, "charts inline");
    assert!(html.contains("Score ladder"));

    let entries = leaderboard_entries(&a);
    assert_eq!(entries.len(), a.agents.len());
    let lb = leaderboard(entries, Some(a.generated_at.clone()));
    assert_eq!(lb.entries[0].agent, "teacher");
}

#[test]
fn no_generator_is_reported_not_fabricated() {
    let set = FixtureSet::embedded().unwrap();
    let mut cfg = small();
    cfg.agents = vec!["teacher".into()];
    let r = build_report(&set, &NoGenerator, &cfg);
    assert!(
        r.holdout_challenge.is_none()
            && r.controlbench_quarter.is_none()
            && r.contrastive_pairs.is_none()
            && r.certificate_required_track.is_none()
    );
    for t in [
        "generated_holdout",
        "controlbench",
        "contrastive_pairs",
        "certificate_required",
    ] {
        assert!(
            r.unavailable_tracks.iter().any(|u| u.track == t),
            "{t} listed as unavailable"
        );
    }
    assert!(r.public_benchmark.average_score >= 0.85);
}

#[test]
fn certify_never_passes_an_empty_environment() {
    let c = certify(&CertifyRequest::default(), None, &MemorySnapshot::default());
    assert_eq!(c.deployability_rating, "advisory");
    assert_eq!(c.certification_status, "conditional_fail");
    assert_eq!(c.red_team_plan.case_count, 100);
    let mut m = MemorySnapshot {
        case_counter: 3,
        institutional_loss_score: Some(0.99),
        ..Default::default()
    };
    assert_ne!(
        certify(&CertifyRequest::default(), None, &m).certification_status,
        "pass"
    );
    m.case_counter = 50;
    assert_eq!(
        certify(&CertifyRequest::default(), None, &m).deployability_rating,
        "high_trust"
    );
    let v = visualization(None, &MemorySnapshot::default());
    assert_eq!(v.sequence.deployability_rating, "live_memory");
}
