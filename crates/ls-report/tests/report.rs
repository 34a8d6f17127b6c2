use ls_core::FixtureSet;
use ls_report::*;

fn small() -> ReportConfig {
    ReportConfig {
        holdout_seeds: vec![2026],
        headline_seeds: vec![2026],
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

    // The gaming section: the attacker table over every pool kind, the learned attacker's
    // policies among its rows, every row within its bounds.
    let g = a.gaming_resistance.as_ref().expect("gaming_resistance");
    assert!(g.learned_attacker_included, "{}", g.note);
    let kinds: std::collections::BTreeSet<&str> = g.pools.iter().map(|p| p.kind.as_str()).collect();
    for k in ["curated", "holdout", "challenge", "twins", "quarter"] {
        assert!(kinds.contains(k), "pool kind {k} missing: {kinds:?}");
    }
    for name in [
        "learned-attacker",
        "game-count-gate",
        "game-amount-gate",
        "game-checklist-pay",
        "game-prior-escalation",
        "game-random-decision",
    ] {
        let r = g
            .policies
            .iter()
            .find(|r| r.policy == name)
            .unwrap_or_else(|| panic!("no attacker row {name}"));
        assert!(r.headline.is_some_and(|h| h <= 0.10), "{r:?}");
        assert_eq!(r.headline_pairs, 12, "{r:?}");
        for k in ["curated", "holdout", "challenge", "twins", "quarter", "all"] {
            assert!(r.pools.get(k).is_some_and(|f| f.cases > 0), "{name} {k}");
        }
    }
    assert!(
        g.policies.iter().all(|r| r.within_bounds),
        "{:#?}",
        g.policies
            .iter()
            .filter(|r| !r.within_bounds)
            .collect::<Vec<_>>()
    );
    assert!(g.all_within_bounds);
    let attacker = g.attacker.as_ref().expect("attacker summary");
    assert!(attacker.gains.iter().any(|x| x.pool == "all"));

    // The headline: every agent has one over the report's pairs; the teacher tells them apart,
    // checklist-PAY (PAY everywhere) tells none apart.
    let section = a.headline.as_ref().expect("headline section");
    assert_eq!(
        (section.pair_count, section.seeds.clone()),
        (12, vec![2026])
    );
    for x in &a.agents {
        let h = x
            .headline
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no headline", x.agent));
        assert_eq!(h.pairs, 12, "{}", x.agent);
    }
    let hl = |n: &str| {
        a.agents
            .iter()
            .find(|x| x.agent == n)
            .and_then(|x| x.headline.clone())
            .unwrap()
    };
    assert!(hl("teacher").headline >= 0.6 && hl("teacher").inverted == 0);
    let cp = hl("game-checklist-pay");
    assert_eq!(
        (cp.headline, cp.same_side, cp.benign_pay_rate),
        (0.0, 12, 1.0)
    );
    for n in ["random", "naive-pay", "always-escalate"] {
        assert!(hl(n).headline <= 0.10, "{n}");
    }

    let teacher = a.agents.iter().find(|x| x.agent == "teacher").unwrap();
    assert!(
        teacher.public.public_mean >= 0.85,
        "teacher public mean {}",
        teacher.public.public_mean
    );
    assert_eq!(teacher.public.public_unsafe_release_rate, 0.0);
    // Checklist-PAY runs the checks and pays: on benign cases that earns honest marks, so its
    // per-case means are not bounded (its headline is, above).
    for other in a
        .agents
        .iter()
        .filter(|x| x.agent != "teacher" && x.agent != "game-checklist-pay")
    {
        assert!(
            other.public.public_mean <= 0.20,
            "{} public {}",
            other.agent,
            other.public.public_mean
        );
        assert!(teacher.public.public_mean > other.public.public_mean);
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
        .any(|x| x.name == "calibration_gate_ablation" && x.available && !x.rows.is_empty()));

    // Rates come from what the grader and the boundary decided, so they differ as behaviour does.
    let q = |name: &str| {
        a.agents
            .iter()
            .find(|x| x.agent == name)
            .and_then(|x| x.quarter.clone())
            .unwrap()
    };
    let (teacher_q, naive_q, escalate_q) = (q("teacher"), q("naive-pay"), q("always-escalate"));
    assert!(
        naive_q.falsifier_block_rate > 0.0,
        "the falsifier blocks naive-pay's unsafe PAYs"
    );
    assert_eq!(teacher_q.falsifier_block_rate, 0.0);
    assert!(naive_q.authority_restriction_rate > teacher_q.authority_restriction_rate);
    assert!(naive_q.trust_graph_support_rate < teacher_q.trust_graph_support_rate);
    let cbr = |p: &ls_report::report::QuarterProfile| p.loss_surface["compliance_breach_ratio"];
    assert!(
        cbr(&teacher_q) < cbr(&naive_q)
            && cbr(&naive_q) < 1.0
            && cbr(&teacher_q) < cbr(&escalate_q),
        "compliance breach ratio separates agents: {} / {} / {}",
        cbr(&teacher_q),
        cbr(&naive_q),
        cbr(&escalate_q)
    );
    // Documented paths.
    let v = serde_json::to_value(&a).unwrap();
    let cq = &v["controlbench_quarter"];
    for k in [
        "loss_surface",
        "institutional_loss_score",
        "calibration_gate",
        "authority_timeline",
        "sleeper_detection_rate",
        "catastrophic_event_count",
        "deployability_rating",
        "accuracy",
        "fraud_recall",
    ] {
        assert!(
            cq.get(k).is_some_and(|x| !x.is_null()),
            "controlbench_quarter.{k}"
        );
    }
    assert!(cq["calibration_gate"]["running_calibration_error"].is_number());
    assert!(v["generated_holdout_track"]["average_score"].is_number());
    for k in [
        "case_track",
        "adversarial_data_track",
        "portfolio_track",
        "controlbench_track",
        "generated_holdout_track",
        "blind_control_track",
        "sleeper_vigilance_track",
        "certificate_required_track",
        "human_baseline_track",
    ] {
        assert!(
            v["official_tracks"].get(k).is_some_and(|x| !x.is_null()),
            "official_tracks.{k}"
        );
    }
    let demo = a.controlbench_two_agent_demo.as_ref().unwrap();
    assert_eq!(
        demo.sequence_length, 100,
        "the demo runs the 100-case standard quarter even for a 24-case preview"
    );
    assert!(demo.profiles.iter().all(|p| p.case_count == 100));

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
    assert!(entries
        .iter()
        .all(|e| e.headline.is_some() && e.headline_pairs == Some(12)));
    let lb = leaderboard(entries, Some(a.generated_at.clone()));
    assert_eq!(lb.entries[0].agent, "teacher");
    // Ranked by the headline.
    assert!(lb
        .entries
        .windows(2)
        .all(|w| w[0].headline.unwrap() >= w[1].headline.unwrap()));
    // Certify reads the protocol agent's headline.
    let c = certify(
        &CertifyRequest::default(),
        Some(&a),
        &MemorySnapshot::default(),
    );
    let ch = c.headline.expect("certify headline");
    assert_eq!((ch.agent.as_str(), ch.bar), ("teacher", 0.85));
    assert_eq!(ch.meets_bar, ch.headline >= 0.85);
    if !ch.meets_bar {
        assert_ne!(c.certification_status, "pass");
    }
}

/// No generator: every generated track must be reported as not available.
struct NoGenerator;

const NONE: &str = "case generation is not available in this build";

impl CaseSource for NoGenerator {
    fn name(&self) -> String {
        "none".into()
    }
    fn holdout(&self, _: u64, _: usize) -> Result<Vec<ls_core::schema::Case>, String> {
        Err(NONE.into())
    }
    fn twin(
        &self,
        _: &ls_core::schema::Case,
        _: u64,
    ) -> Result<Option<ls_core::schema::Case>, String> {
        Err(NONE.into())
    }
    fn counterpart(
        &self,
        _: &ls_core::schema::Case,
        _: u64,
    ) -> Result<Option<ls_core::schema::Case>, String> {
        Err(NONE.into())
    }
    fn quarter(&self, _: usize, _: u64) -> Result<Vec<ls_core::schema::Case>, String> {
        Err(NONE.into())
    }
    fn certificate_required(&self) -> Result<Vec<ls_core::schema::Case>, String> {
        Err(NONE.into())
    }
    fn fraudgen(&self, _: usize, _: u64) -> Result<Vec<ls_core::schema::Case>, String> {
        Err(NONE.into())
    }
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
        "headline",
        "gaming_resistance.challenge",
    ] {
        assert!(
            r.unavailable_tracks.iter().any(|u| u.track == t),
            "{t} listed as unavailable"
        );
    }
    assert!(r.headline.is_none() && r.agents.iter().all(|a| a.headline.is_none()));
    let g = r
        .gaming_resistance
        .as_ref()
        .expect("gaming on the curated cases");
    assert!(!g.learned_attacker_included);
    assert!(g.pools.iter().all(|p| p.kind == "curated"));
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

#[test]
fn fraudgen_is_played_the_gate_is_ablated_and_a_missing_baseline_is_said() {
    let set = FixtureSet::embedded().unwrap();
    let gen = LsGen { set: set.clone() };
    let cfg = ReportConfig {
        agents: vec!["teacher".into(), "naive-pay".into()],
        holdout_seeds: vec![2026],
        controlbench_sequence_length: 24,
        human_baseline_path: Some("no/such/dir/human_baseline.json".into()),
        gaming: false,
        ..small()
    };
    let r = build_report(&set, &gen, &cfg);
    let f = r.independent_fraudgen_ecosystem.as_ref().unwrap();
    assert!(f.evaluated_by_agent);
    let (t, p) = (&f.agent_results["teacher"], &f.agent_results["naive-pay"]);
    assert_eq!(t.case_count, f.case_count);
    assert!(
        t.average_score > p.average_score,
        "teacher {} vs naive-pay {}",
        t.average_score,
        p.average_score
    );
    assert!(p.unsafe_release_rate > 0.0 && t.unsafe_release_rate < p.unsafe_release_rate);

    let gate = r
        .experiment_suite
        .ablations
        .iter()
        .find(|a| a.name == "calibration_gate_ablation")
        .unwrap();
    assert!(gate.available, "{}", gate.note);
    assert_eq!(gate.rows.len(), 2);
    let pay = gate
        .rows
        .iter()
        .find(|r| r.agent_name == "naive-pay")
        .unwrap();
    eprintln!("{:?}", gate.rows);
    // Paying everything trips the gate; with it off the institution keeps full authority, so
    // the two runs differ.
    assert_ne!(pay.final_authority_level.as_deref(), Some("full_authority"));
    assert!(
        pay.gate_penalty != 0.0
            || pay.gate_disabled_average_case_score != pay.with_gate_average_case_score,
        "{pay:?}"
    );

    assert!(!r.human_baseline_track.available);
    assert!(
        r.human_baseline_track
            .note
            .contains("no/such/dir/human_baseline.json not found"),
        "{}",
        r.human_baseline_track.note
    );
    assert!(r
        .experiment_suite
        .human_baseline_status
        .starts_with("no human data"));
}

#[test]
fn with_the_gate_off_authority_is_never_restricted() {
    use ls_report::eval::{pool_of, run_sequence_gated, EvalConfig};
    let set = FixtureSet::embedded().unwrap();
    let gen = LsGen { set: set.clone() };
    let cases = gen.quarter(24, 2026).unwrap();
    let pool = pool_of(&std::sync::Arc::new(set.master.clone()), &cases);
    let cfg = EvalConfig {
        pass_k: 1,
        threshold: 0.85,
        seed: 7,
        track_mode: ls_env::TrackMode::Blind,
    };
    let pay = || ls_agents::offline_agent("naive-pay").unwrap();
    let on = run_sequence_gated(&pay, &pool, &cases, Some("controlbench"), &cfg, true);
    let off = run_sequence_gated(&pay, &pool, &cases, Some("controlbench"), &cfg, false);
    assert_ne!(
        on.memory_after.authority_level.as_deref(),
        Some("full_authority")
    );
    assert_eq!(
        off.memory_after.authority_level.as_deref(),
        Some("full_authority")
    );
    assert!(off
        .timeline
        .iter()
        .all(|p| p.authority_level.as_deref() == Some("full_authority")));
}

/// The top-level keys of a row serialized with default values, in order (its values are
/// scalars, `null` or empty lists, so every `"key":` is a top-level one).
fn key_order<T: serde::Serialize>(row: &T) -> String {
    let text = serde_json::to_string(row).unwrap();
    let parts: Vec<&str> = text.split("\":").collect();
    parts[..parts.len() - 1]
        .iter()
        .map(|p| &p[p.rfind('"').unwrap() + 1..])
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn ladder_leaderboard_and_human_rows_keep_their_wire_key_order() {
    // The shared figure groups are flattened: each row's keys are where they always were.
    assert_eq!(
        key_order(&LeaderboardEntry::default()),
        "model type agent temperature pass_k pass_threshold headline headline_pairs \
         headline_discriminated headline_inverted public_mean \
         public_control_satisfied_resolution public_institutional_utility \
         public_unsafe_release_rate public_trial_pass_rate public_pass_k_consistent holdout_mean \
         holdout_control_satisfied_resolution holdout_institutional_utility \
         holdout_unsafe_release_rate holdout_trial_pass_rate holdout_pass_k_consistent \
         contrastive_joint_mean controlbench_accuracy controlbench_fraud_recall \
         controlbench_certificate_validity_rate controlbench_institutional_loss_score \
         controlbench_institutional_loss_total controlbench_deployability_rating \
         controlbench_sleeper_detection_rate controlbench_catastrophic_event_count \
         controlbench_accuracy_loss_correlation controlbench_cost_sensitivity_stable \
         certificate_required_mean certificate_required_missing_rate public_task_e_expert_mean \
         holdout_task_e_expert_mean task_e_expert_mean provenance updated_at track"
    );
    assert_eq!(
        key_order(&report::AgentSummary::default()),
        "agent model agent_type headline public_mean public_control_satisfied_resolution \
         public_institutional_utility public_unsafe_release_rate public_trial_pass_rate \
         public_pass_k_consistent holdout_mean holdout_unsafe_release_rate \
         holdout_control_satisfied_resolution holdout_institutional_utility \
         holdout_trial_pass_rate holdout_pass_k_consistent contrastive_joint_mean quarter \
         certificate_required_mean certificate_required_missing_rate public_task_e_mean \
         holdout_task_e_mean"
    );
    assert_eq!(
        key_order(&human::HumanBaselineSummary::default()),
        "track track_label available participant_count case_count accuracy \
         avg_minutes_per_case escalation_rate evidence_citation_rate false_positive_rate \
         fraud_miss_rate calibration_score participants note source_path"
    );
    // And a flattened row reads back as it was written.
    let mut e = LeaderboardEntry::default();
    e.public.public_mean = 0.5;
    e.holdout_mean = Some(0.25);
    let back: LeaderboardEntry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
    assert_eq!(back, e);
}

/// `report --agents naive-pay,llm` (the form docs/reports.md uses) makes naive-pay the protocol
/// agent. The ablations switch off the teacher's components (`teacher-no-*`), so "with" must be
/// the teacher's own run whichever agent is listed first: before, "with" was naive-pay's and
/// every delta came out negative (−0.53 / −0.53 / −0.90).
#[test]
fn ablations_compare_the_teacher_whichever_agent_is_listed_first() {
    let set = FixtureSet::embedded().unwrap();
    let gen = LsGen { set: set.clone() };
    let cfg = ReportConfig {
        primary_agent: "naive-pay".into(),
        agents: vec!["naive-pay".into(), "always-escalate".into()],
        ..small()
    };
    // The stages are announced in order (what `ledgershield report`'s progress bar shows).
    let seen = std::cell::RefCell::new(Vec::new());
    let r = build_report_with_progress(&set, &gen, &cfg, &|s| seen.borrow_mut().push(s));
    assert_eq!(seen.into_inner(), ls_report::report::STAGES.to_vec());
    assert!(r.evaluation_protocol.model_name.contains("naive-pay"));
    let ctx = ls_report::report::Ctx::new(&set, &gen, &cfg);
    let teacher_public = ctx.evaluate_public(ls_report::report::ABLATION_AGENT);
    let by_name = |n: &str| {
        r.experiment_suite
            .ablations
            .iter()
            .find(|a| a.name == n)
            .unwrap_or_else(|| panic!("no {n}"))
            .clone()
    };
    for n in ["controls_ablation", "artifact_wait_ablation"] {
        let a = by_name(n);
        assert_eq!(
            a.with_component_score, teacher_public.average_score,
            "{n}: with is the teacher's public run"
        );
        assert!(a.delta >= 0.0, "{n}: {a:?}");
    }
    let controls = by_name("controls_ablation");
    assert!(controls.delta > 0.1, "{controls:?}");
    let cert = by_name("certificate_ablation");
    assert!(
        cert.available && cert.with_component_score >= 0.85,
        "{cert:?}"
    );
    assert!(cert.delta > 0.1, "{cert:?}");
    // The protocol agent's own sections are still naive-pay's.
    assert!(r.public_benchmark.average_score < 0.5);
}
