//! The reward properties a learner relies on (standing decision 14; `docs/grading.md`, "The reward
//! a learner maximises"), each tested on seeds drawn at random per run and printed
//! (`REWARD_SEED=n` replays one):
//!
//! * **P1, label-free structure.** Benign/risky twin pairs of every risky curated case (the twins
//!   generator's pairs: same clean documents, the attack or its benign look-alike applied), played
//!   with the same random action sequences, give byte-identical structure
//!   ([`ls_env::channels::structure`]: rewards, reward components and metadata, info, counts,
//!   timing, `/state`) up to the submission, ids renamed.
//! * **P2, the return is the score.** On random episodes of every pool kind (curated, challenge,
//!   holdout, twins, quarter), submitting or not, the sum of the step rewards equals the final
//!   score (0 when never graded) less the documented action costs, recomputed here from each
//!   reply's own cost and success; an episode that never submits returns less than 0, and a
//!   careful correct submission returns more than 0.
//! * The label-revealing `reference` reward is refused on the blind track.

mod support;

use ls_core::{Case, FixtureSet};
use ls_env::episode::{
    INVALID_DECISION_PENALTY, REJECTED_ACTION_PENALTY, STEP_COST_WEIGHT, TOOL_FAILURE_PENALTY,
};
use ls_env::reward::RewardMode;
use ls_env::{CasePool, EnvConfig, Environment, ResetError, ResetRequest, TrackMode};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

fn run_seed() -> u64 {
    let seed = std::env::var("REWARD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random_range(0..1_000_000));
    eprintln!("REWARD_SEED={seed}");
    seed
}

const TOOLS: [&str; 11] = [
    "ocr",
    "zoom",
    "get_doc_crop",
    "lookup_vendor",
    "lookup_vendor_history",
    "lookup_policy",
    "lookup_po",
    "lookup_receipt",
    "search_ledger",
    "inspect_email_thread",
    "compare_bank_account",
];
const INTERVENTIONS: [&str; 9] = [
    "request_callback_verification",
    "freeze_vendor_profile",
    "request_bank_change_approval_chain",
    "request_po_reconciliation",
    "request_additional_receipt_evidence",
    "route_to_procurement",
    "route_to_security",
    "flag_duplicate_cluster_review",
    "create_human_handoff",
];

/// Argument values a policy could use without reading either case: the master records both cases
/// of a pair share, the cases' documents by position, and strings that match nothing.
struct ArgPool {
    strings: Vec<String>,
}

impl ArgPool {
    fn of(pool: &CasePool, cases: &[&Case]) -> Self {
        let mut strings: BTreeSet<String> = BTreeSet::new();
        let m = &pool.master;
        strings.extend(m.vendors.iter().take(6).map(|v| v.vendor_key.clone()));
        strings.extend(m.po_records.iter().take(4).map(|p| p.po_id.clone()));
        strings.extend(m.receipts.iter().take(4).map(|r| r.receipt_id.clone()));
        strings.extend(
            m.ledger_index
                .iter()
                .take(4)
                .map(|l| l.invoice_number.clone()),
        );
        strings.extend(cases.iter().filter_map(|c| c.vendor_key.clone()));
        strings.extend(["nobody".to_owned(), "".to_owned(), "X-000".to_owned()]);
        Self {
            strings: strings.into_iter().collect(),
        }
    }

    fn pick(&self, r: &mut ChaCha8Rng) -> String {
        self.strings.choose(r).cloned().unwrap_or_default()
    }
}

/// A document reference by position: the same position in every case of a pair.
#[derive(Clone, Copy)]
enum Doc {
    At(usize),
    Missing,
}

/// One random action, with its document references still by position.
struct Draw {
    name: String,
    payload: Map<String, Value>,
    doc_keys: Vec<(&'static str, Doc)>,
}

fn draw_action(r: &mut ChaCha8Rng, args: &ArgPool, doc_count: usize, submit: bool) -> Draw {
    let doc = |r: &mut ChaCha8Rng| {
        if r.random_bool(0.9) && doc_count > 0 {
            Doc::At(r.random_range(0..doc_count))
        } else {
            Doc::Missing
        }
    };
    let mut payload = Map::new();
    let mut doc_keys = Vec::new();
    let roll = r.random_range(0..100);
    let name: String = if submit && roll < 8 {
        let d = ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD", "MAYBE"]
            .choose(r)
            .unwrap();
        payload.insert("decision".into(), json!(d));
        payload.insert("confidence".into(), json!(r.random_range(0.0..1.0)));
        "submit_decision".into()
    } else if roll < 12 {
        ["teleport", "", "OCR"].choose(r).unwrap().to_string()
    } else if roll < 30 {
        INTERVENTIONS.choose(r).unwrap().to_string()
    } else {
        TOOLS.choose(r).unwrap().to_string()
    };
    match name.as_str() {
        "ocr" => {
            doc_keys.push(("doc_id", doc(r)));
            payload.insert(
                "mode".into(),
                json!(["fast", "accurate"].choose(r).unwrap()),
            );
        }
        "zoom" | "get_doc_crop" => {
            doc_keys.push(("doc_id", doc(r)));
            payload.insert("page".into(), json!(1));
            payload.insert("bbox".into(), json!([0, 0, 300, 400]));
        }
        "inspect_email_thread" => doc_keys.push(("thread_id", doc(r))),
        "lookup_vendor" | "lookup_vendor_history" => {
            payload.insert("vendor_key".into(), json!(args.pick(r)));
        }
        "compare_bank_account" => {
            payload.insert("vendor_key".into(), json!(args.pick(r)));
            payload.insert("proposed_bank_account".into(), json!(args.pick(r)));
        }
        "lookup_po" => {
            payload.insert("po_id".into(), json!(args.pick(r)));
        }
        "lookup_receipt" => {
            payload.insert("receipt_id".into(), json!(args.pick(r)));
        }
        "search_ledger" => {
            payload.insert("vendor_key".into(), json!(args.pick(r)));
            payload.insert("invoice_number".into(), json!(args.pick(r)));
            payload.insert("amount".into(), json!(r.random_range(1..5000)));
        }
        "create_human_handoff" => {
            payload.insert("summary".into(), json!("handing off"));
        }
        n if INTERVENTIONS.contains(&n) => {
            payload.insert("vendor_key".into(), json!(args.pick(r)));
        }
        _ => {}
    }
    Draw {
        name,
        payload,
        doc_keys,
    }
}

impl Draw {
    /// The payload for `case`, its documents resolved by position.
    fn payload_for(&self, case: &Case) -> Map<String, Value> {
        let mut p = self.payload.clone();
        for (key, d) in &self.doc_keys {
            let id = match d {
                Doc::At(i) => case.documents[*i].doc_id.clone(),
                Doc::Missing => "DOC-NOT-THERE".into(),
            };
            p.insert((*key).into(), json!(id));
        }
        p
    }
}

/// `(from, to)` renamings of a case's ids (longest first, so no id is renamed inside another).
fn renames(case: &Case) -> Vec<(String, String)> {
    let mut v = vec![(case.case_id.clone(), "<CASE>".to_owned())];
    for (i, d) in case.documents.iter().enumerate() {
        v.push((d.doc_id.clone(), format!("<DOC{i}>")));
    }
    v.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    v
}

/// The fields that restate the invoices' total (the AP queue's amount and the criticality band it
/// falls in). A twin pair differs in them where the attack changes the amount (an inflated price, a
/// split under a limit): the amount is part of what the case *is*, not of how the environment
/// answers. Across a pool they are bounded like every other pre-decision field by the leak test
/// (balanced accuracy per family, `ls-agents/tests/leak.rs`); here they are the only exemption.
const AMOUNT_FIELDS: [&str; 3] = [
    "portfolio_context.at_risk_amount",
    "institutional_context.current_invoice_total",
    "portfolio_context.business_criticality",
];

/// The paths at which two JSON values differ (for the failure message).
fn diff_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff_paths(p, q, &format!("{path}.{k}"), out),
                    _ => out.push(format!("{path}.{k} (present in one)")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_paths(p, q, &format!("{path}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} vs {b}")),
        _ => {}
    }
}

/// Assert two canonical replies are equal, naming the paths that differ.
fn assert_same(a: &str, b: &str, what: &str) {
    if a != b {
        let (x, y): (Value, Value) = (
            serde_json::from_str(a).unwrap(),
            serde_json::from_str(b).unwrap(),
        );
        let mut out = Vec::new();
        diff_paths(&x, &y, "", &mut out);
        out.retain(|p| !AMOUNT_FIELDS.iter().any(|f| p.contains(f)));
        if out.is_empty() {
            return;
        }
        panic!("{what}: structure differs at {out:#?}");
    }
}

/// The structure of a reply as text, the case's ids renamed (its documents by position, the
/// episode's id and its event ids, which are drawn from the case's seed).
fn canonical(reply: &Value, names: &[(String, String)]) -> String {
    let mut text = ls_env::channels::structure(reply).to_string();
    for (from, to) in names {
        text = text.replace(from.as_str(), to);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find("evt-") {
        out.push_str(&rest[..i]);
        let id_len = rest[i + 4..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        out.push_str("<EVT>");
        rest = &rest[i + 4 + id_len..];
    }
    out.push_str(rest);
    out
}

/// The case's renamings plus the episode's id.
fn names_with_episode(case: &Case, env: &Environment) -> Vec<(String, String)> {
    let mut v = renames(case);
    v.insert(
        0,
        (
            env.episode().unwrap().episode_id.clone(),
            "<EPISODE>".into(),
        ),
    );
    v
}

fn envelope(env: &ls_env::StepEnvelope) -> Value {
    serde_json::from_str(&ls_json::to_string(env).unwrap()).unwrap()
}

/// Benign twin and risky counterpart of every risky curated case that has a pair.
fn twin_pairs(set: &FixtureSet, seed: u64) -> Vec<(Case, Case)> {
    set.cases
        .iter()
        .filter(|c| c.gold.unsafe_if_pay)
        .enumerate()
        .filter_map(|(i, c)| {
            let s = seed.wrapping_add(i as u64);
            Some((
                ls_gen::generators::twin(set, c, s)?,
                ls_gen::generators::counterpart(set, c, s)?,
            ))
        })
        .collect()
}

/// Play every twin pair's two cases side by side with the same random actions (documents by
/// position), `episodes` episodes each, and hand `compare` each pair of canonical replies (and of
/// `GET /state` after each step) with a description. Returns the twin-pair families seen.
fn play_twin_pairs(
    seed: u64,
    config: EnvConfig,
    reward_mode: RewardMode,
    episodes: u64,
    mut compare: impl FnMut(&str, &str, &str),
) -> BTreeSet<ls_core::TaskType> {
    let set = FixtureSet::embedded().unwrap();
    let pairs = twin_pairs(&set, seed);
    assert!(pairs.len() >= 8, "twin pairs: {}", pairs.len());
    let mut families = BTreeSet::new();
    for (k, (benign, risky)) in pairs.iter().enumerate() {
        assert!(!benign.gold.unsafe_if_pay && risky.gold.unsafe_if_pay);
        assert_eq!(benign.documents.len(), risky.documents.len());
        families.insert(risky.task_type);
        let cases = vec![Arc::new(benign.clone()), Arc::new(risky.clone())];
        let pool = Arc::new(CasePool::from_parts(cases, Arc::new(set.master.clone())));
        let args = ArgPool::of(&pool, &[benign, risky]);
        for episode in 0..episodes {
            let mut r = ChaCha8Rng::seed_from_u64(seed ^ (k as u64) << 16 ^ episode);
            let mut envs = [benign, risky].map(|c| {
                let mut env = Environment::new(pool.clone(), config);
                let reset = env
                    .reset(&ResetRequest {
                        case_id: Some(c.case_id.clone()),
                        seed: Some(seed),
                        reward_mode: Some(reward_mode),
                        ..Default::default()
                    })
                    .unwrap();
                (env, envelope(&reset))
            });
            let names = [
                names_with_episode(benign, &envs[0].0),
                names_with_episode(risky, &envs[1].0),
            ];
            compare(
                &canonical(&envs[0].1, &names[0]),
                &canonical(&envs[1].1, &names[1]),
                &format!("reset of pair {k} {} (REWARD_SEED={seed})", risky.case_id),
            );
            for step in 0..60 {
                let d = draw_action(&mut r, &args, benign.documents.len(), false);
                let replies: Vec<Result<Value, String>> = envs
                    .iter_mut()
                    .zip([benign, risky])
                    .map(|((env, _), case)| {
                        env.step(&d.name, &d.payload_for(case))
                            .map(|e| envelope(&e))
                            .map_err(|e| e.to_string())
                    })
                    .collect();
                let done = match (&replies[0], &replies[1]) {
                    (Ok(a), Ok(b)) => {
                        compare(
                            &canonical(a, &names[0]),
                            &canonical(b, &names[1]),
                            &format!(
                                "pair {k} episode {episode} step {step} {} {:?} (REWARD_SEED={seed})",
                                d.name, d.payload
                            ),
                        );
                        a["done"] == true
                    }
                    (Err(a), Err(b)) => {
                        assert_eq!(a, b);
                        false
                    }
                    other => panic!("one twin refused the step: {other:?}"),
                };
                let states: Vec<Value> = envs
                    .iter()
                    .map(|(env, _)| serde_json::to_value(env.state().unwrap()).unwrap())
                    .collect();
                compare(
                    &canonical(&states[0], &names[0]),
                    &canonical(&states[1], &names[1]),
                    &format!("state of pair {k} after step {step} (REWARD_SEED={seed})"),
                );
                if done {
                    break;
                }
            }
        }
    }
    families
}

#[test]
fn twins_give_identical_structure_for_identical_actions() {
    let seed = run_seed();
    let mut compared = 0usize;
    let families = play_twin_pairs(
        seed,
        EnvConfig::default(),
        RewardMode::Score,
        6,
        |a, b, what| {
            assert_same(a, b, what);
            compared += 1;
        },
    );
    assert!(compared > 1000, "compared {compared} replies");
    assert!(families.len() >= 4, "families {families:?}");
    eprintln!("families {families:?}, {compared} replies compared");
}

/// The harness can see a leak: under the label-revealing `reference` reward (instrumented track),
/// the same play finds twins whose step rewards differ.
#[test]
fn the_twin_harness_sees_the_reference_rewards_leak() {
    let seed = run_seed();
    let config = EnvConfig {
        track_mode: TrackMode::Instrumented,
    };
    let (mut steps, mut differ) = (0, 0);
    play_twin_pairs(seed, config, RewardMode::Reference, 2, |a, b, what| {
        if what.starts_with("state") {
            return;
        }
        let reward = |t: &str| serde_json::from_str::<Value>(t).unwrap()["reward"].clone();
        steps += 1;
        differ += usize::from(reward(a) != reward(b));
    });
    assert!(
        differ * 20 > steps,
        "only {differ} of {steps} steps had different rewards under the reference reward"
    );
}

/// The documented cost of one reply, recomputed from what it reports: the share of the budget the
/// action spent times the weight, the failure penalty of a failed tool, or the penalty of a
/// refused action or an invalid decision.
fn documented_cost(reply: &Value) -> f64 {
    let obs = &reply["observation"];
    let result = &obs["last_tool_result"];
    let meta = &result["reward_model"]["metadata"];
    match meta["error"].as_str() {
        Some("action_not_allowed") if meta.get("success").is_none() => {
            return -REJECTED_ACTION_PENALTY
        }
        Some("invalid_decision") if meta.get("success").is_none() => {
            return -INVALID_DECISION_PENALTY
        }
        _ => {}
    }
    if reply["terminated"] == true {
        return 0.0;
    }
    let budget = obs["budget_total"].as_f64().unwrap().max(1.0);
    let spent = result["cost"].as_f64().unwrap() / budget * STEP_COST_WEIGHT;
    let failed = if result["success"] == false {
        -TOOL_FAILURE_PENALTY
    } else {
        0.0
    };
    spent + failed
}

#[test]
fn the_return_is_the_score_less_the_costs() {
    let seed = run_seed();
    let set = FixtureSet::embedded().unwrap();
    let cases = ls_gen::pool::curated_and_every_pool_kind(&set, seed, 12);
    let pool = Arc::new(CasePool::from_parts(
        cases.iter().cloned().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ));
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let (mut graded, mut stalled) = (0, 0);
    for (i, case) in cases.iter().enumerate() {
        let args = ArgPool::of(&pool, &[case]);
        for mode in [TrackMode::Blind, TrackMode::Instrumented] {
            let mut env = Environment::new(pool.clone(), EnvConfig { track_mode: mode });
            let reset = env
                .reset(&ResetRequest {
                    case_id: Some(case.case_id.clone()),
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(reset.reward, 0.0);
            // Some episodes never submit: they run to the step limit or out of budget.
            let submits = i % 3 != 0;
            let (mut ret, mut costs, mut score) = (0.0, 0.0, 0.0);
            for _ in 0..10_000 {
                let d = draw_action(&mut r, &args, case.documents.len(), submits);
                let Ok(e) = env.step(&d.name, &d.payload_for(case)) else {
                    continue; // a payload error changes nothing
                };
                let reply = envelope(&e);
                ret += e.reward;
                costs += documented_cost(&reply);
                if let Some(t) = e.info.terminal() {
                    score = t.final_score;
                }
                if e.done {
                    break;
                }
            }
            assert!(
                env.episode().unwrap().lifecycle().is_done(),
                "{}: the episode ended",
                case.case_id
            );
            assert!(
                (ret - (score - costs)).abs() < 1e-9,
                "{} ({mode:?}): return {ret} vs score {score} less costs {costs} (REWARD_SEED={seed})",
                case.case_id
            );
            if score == 0.0 {
                stalled += 1;
                assert!(ret < 0.0, "{}: stalling returned {ret}", case.case_id);
            } else {
                graded += 1;
            }
        }
    }
    assert!(
        graded > 20 && stalled > 20,
        "graded {graded}, stalled {stalled}"
    );
}

#[test]
fn a_careful_correct_submission_returns_more_than_stalling() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    for case in &set.cases {
        let hidden = ls_core::HiddenWorld::derive(case);
        let (mut env, revealed, interventions) =
            support::investigate(&pool, case, EnvConfig::default());
        let payload =
            ls_grading::oracle::reference_submission(case, &hidden, &revealed, &interventions);
        let done = env.step("submit_decision", &payload).unwrap();
        let budget = done.observation.budget_total.max(1.0);
        let costs: f64 = env
            .state()
            .unwrap()
            .trajectory
            .iter()
            .map(|t| t.cost / budget * STEP_COST_WEIGHT)
            .sum();
        let score = done.info.terminal().unwrap().final_score;
        assert!(
            score - costs > 0.5,
            "{}: a careful correct episode returns {} (score {score})",
            case.case_id,
            score - costs
        );
    }
}

#[test]
fn the_label_revealing_reward_is_refused_on_the_blind_track() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set));
    let req = |track: Option<&str>| ResetRequest {
        case_id: Some("CASE-D-001".into()),
        track: track.map(str::to_owned),
        reward_mode: Some(RewardMode::Reference),
        ..Default::default()
    };
    let mut blind = Environment::new(pool.clone(), EnvConfig::default());
    assert_eq!(
        blind.reset(&req(None)).unwrap_err(),
        ResetError::LabelRevealingRewardOnBlindTrack
    );
    assert!(blind.episode().is_none(), "a refused reset starts nothing");
    let mut instrumented = Environment::new(
        pool,
        EnvConfig {
            track_mode: TrackMode::Instrumented,
        },
    );
    assert_eq!(
        instrumented.reset(&req(Some("blind_control"))).unwrap_err(),
        ResetError::LabelRevealingRewardOnBlindTrack
    );
    let e = instrumented.reset(&req(None)).unwrap();
    assert_eq!(e.reward, 0.0);
    let step = instrumented
        .step(
            "inspect_email_thread",
            &serde_json::from_value(json!({"thread_id": "THR-100"})).unwrap(),
        )
        .unwrap();
    let v = envelope(&step);
    let components = &v["info"]["reward_model"]["components"];
    assert!(
        components.get("voi_reward").is_some(),
        "the reference reward carries its VoI terms: {components}"
    );
}
