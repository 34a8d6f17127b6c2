//! Attacker tests: no keyless route of the audit server is an oracle on held-out data.
//!
//! Two attacks that worked before (issue 45): group testing through campaigns (a campaign's final
//! submit reports `TP: k`, so submitting groups of candidate findings and reading the count
//! recovered every true finding; the replay scored 0.990 on held-out seeds 100 and 107023), and
//! the leaderboard probe (one candidate finding per episode, `POST /leaderboard` after each, the
//! entry's score tells whether it was true; the replay scored 0.990 on seed 102 and left 100
//! entries on the public board). Each attack is played as written against the real server; the
//! evaluator scores its replay on the held-out seed in process, and the replay must score no
//! better than the blind baseline (an empty submission: what an agent knows with no oracle).
//! The same group-testing code is also run on a training seed, where campaigns are open, to show
//! the attack itself is real.

use audit_env::data;
use audit_env::episode::{AuditAction, AuditEnv, AuditResetRequest, AuditStepRequest, EnvConfig};
use audit_env::model::{Finding, TaskId, WorldRules, HELD_OUT_RANGE};
use ls_server::audit::AuditConfig;
use ls_server::{SecurityConfig, ServerConfig};
use serde_json::{json, Value};
use std::collections::BTreeSet;

async fn spawn(server: ServerConfig) -> String {
    let shutdown = ls_server::Shutdown::new();
    let app = ls_server::audit::router(AuditConfig::default(), &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

/// A server with an operator key, so "keyless" means something even from loopback.
async fn keyed() -> String {
    spawn(ServerConfig {
        security: SecurityConfig {
            admin_api_key: Some("op-key".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
}

async fn post(c: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = c.post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn post_in(c: &reqwest::Client, url: &str, session: &str, body: Value) -> (u16, Value) {
    let r = c
        .post(url)
        .header("X-Session-Id", session)
        .json(&body)
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

type Cand = (String, String);

fn finding(c: &Cand) -> Value {
    json!({"document_id": c.0, "error_type": c.1})
}

/// The evaluator's score of `findings` submitted on `task`/`seed` (the full grade, in process).
fn evaluate(task: TaskId, seed: u64, findings: &[Cand]) -> f64 {
    let mut env = AuditEnv::new(EnvConfig::default());
    env.reset(AuditResetRequest {
        task_id: Some(task),
        seed: Some(seed),
        ..Default::default()
    })
    .unwrap();
    let findings: Vec<Finding> = findings
        .iter()
        .map(|c| serde_json::from_value(finding(c)).unwrap())
        .collect();
    env.step(AuditStepRequest {
        action: Some(AuditAction {
            findings,
            submit_final: Some(true),
        }),
        ..Default::default()
    })
    .unwrap();
    env.last_grade().unwrap().score
}

/// One group test through a one-period campaign: the expense specialist submits `group` as its
/// final submit and reads the true-positive count from the reply. `None` when the server
/// refuses the campaign (the status is returned for the test to check).
async fn group_test(
    c: &reqwest::Client,
    base: &str,
    seed: u64,
    group: &[Cand],
) -> Result<u64, (u16, Value)> {
    let (s, start) = post(
        c,
        &format!("{base}/campaign/start"),
        json!({"seed": seed, "total_periods": 1}),
    )
    .await;
    if s != 200 {
        return Err((s, start));
    }
    let cid = start["campaign_id"].as_str().unwrap().to_string();
    let (s, _) = post(
        c,
        &format!("{base}/campaign/task/start"),
        json!({"campaign_id": cid, "role": "expense"}),
    )
    .await;
    assert_eq!(s, 200);
    let (s, r) = post(
        c,
        &format!("{base}/campaign/task/submit"),
        json!({"campaign_id": cid, "role": "expense", "findings": group.iter().map(finding).collect::<Vec<_>>(), "submit_final": true}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    Ok(r["grader"]["true_positives"].as_u64().unwrap())
}

/// The group-testing attack on the expense task of `seed`: one group per document (every type
/// on it), then each type of the documents whose group had a hit. Returns the findings it
/// confirmed, or what refused it.
async fn group_testing_attack(
    c: &reqwest::Client,
    base: &str,
    seed: u64,
) -> (Vec<Cand>, Option<(u16, Value)>) {
    let docs = data::generate(TaskId::ExpenseAudit, seed, &WorldRules::default())
        .documents
        .document_ids();
    let types: Vec<String> = TaskId::ExpenseAudit
        .error_types()
        .iter()
        .map(|t| t.as_str().to_string())
        .collect();
    let mut confirmed = Vec::new();
    for d in &docs {
        let group: Vec<Cand> = types.iter().map(|t| (d.clone(), t.clone())).collect();
        match group_test(c, base, seed, &group).await {
            Err(refused) => return (confirmed, Some(refused)),
            Ok(0) => {}
            Ok(_) => {
                for cand in group {
                    if group_test(c, base, seed, std::slice::from_ref(&cand))
                        .await
                        .is_ok_and(|k| k > 0)
                    {
                        confirmed.push(cand);
                    }
                }
            }
        }
    }
    (confirmed, None)
}

#[tokio::test]
async fn group_testing_through_campaigns_gains_nothing_on_held_out_seeds() {
    let base = keyed().await;
    let c = reqwest::Client::new();

    // The attack is real: on a training seed (campaigns open) it recovers the true findings.
    let (found, refused) = group_testing_attack(&c, &base, 42).await;
    assert!(refused.is_none(), "{refused:?}");
    let train = evaluate(TaskId::ExpenseAudit, 42, &found);
    let blind_train = evaluate(TaskId::ExpenseAudit, 42, &[]);
    eprintln!(
        "group testing on training seed 42: {} findings confirmed, replay {train} (blind {blind_train})",
        found.len()
    );
    assert!(
        train >= 0.8,
        "the attack works where it is allowed: {train}"
    );

    // On held-out seeds every keyless campaign is refused before it reports anything.
    for seed in [100u64, 107_023] {
        let (found, refused) = group_testing_attack(&c, &base, seed).await;
        let (status, body) = refused.expect("held-out campaign refused");
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "held_out_seed", "{body}");
        assert!(found.is_empty());
        let replay = evaluate(TaskId::ExpenseAudit, seed, &found);
        let blind = evaluate(TaskId::ExpenseAudit, seed, &[]);
        assert!(
            replay <= blind,
            "seed {seed}: replay {replay} > blind {blind}"
        );
    }
    // A campaign whose later periods reach a held-out seed is refused too (period p plays
    // seed + p - 1).
    let (s, b) = post(
        &c,
        &format!("{base}/campaign/start"),
        json!({"seed": 97, "total_periods": 5}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("held_out_seed"))
    );
    // The evaluator (operator key) may still run one.
    let r = c
        .post(format!("{base}/campaign/start"))
        .header("X-API-Key", "op-key")
        .json(&json!({"seed": 100, "total_periods": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn leaderboard_probe_gains_nothing_and_runs_are_whole_and_bounded() {
    let base = keyed().await;
    let c = reqwest::Client::new();
    let seed = 102u64;
    let task = TaskId::InvoiceMatch;
    let docs = data::generate(task, seed, &WorldRules::default())
        .documents
        .document_ids();
    let types: Vec<String> = task
        .error_types()
        .iter()
        .map(|t| t.as_str().to_string())
        .collect();
    // The old probe: one candidate per episode on the held-out seed, then POST /leaderboard.
    let mut confirmed: Vec<Cand> = Vec::new();
    let mut probes = 0;
    'probe: for d in docs.iter().take(8) {
        for t in &types {
            let cand = (d.clone(), t.clone());
            let (s, _) = post(
                &c,
                &format!("{base}/reset"),
                json!({"task_id": task.as_str(), "seed": seed}),
            )
            .await;
            assert_eq!(s, 200);
            post(
                &c,
                &format!("{base}/step"),
                json!({"findings": [finding(&cand)], "submit_final": true}),
            )
            .await;
            let (s, r) = post(
                &c,
                &format!("{base}/leaderboard"),
                json!({"model": format!("probe-{probes}")}),
            )
            .await;
            probes += 1;
            assert_eq!(s, 409, "a single episode is not a run: {r}");
            assert!(r.get("entry").is_none() && !r.to_string().contains("score\":"));
            if r["entry"]["score"].as_f64().is_some_and(|x| x > 0.01) {
                confirmed.push(cand);
            }
            if probes >= 20 {
                break 'probe;
            }
        }
    }
    let replay = evaluate(task, seed, &confirmed);
    let blind = evaluate(task, seed, &[]);
    assert!(replay <= blind, "replay {replay} > blind {blind}");
    let lb: Value = c
        .get(format!("{base}/leaderboard"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(lb["total_entries"], 0, "no probe reached the board: {lb}");

    // A run: the server draws the seeds; the client cannot put seed 102 in it.
    let session = "sess-attacker";
    let (s, run) = post_in(
        &c,
        &format!("{base}/leaderboard/run"),
        session,
        json!({"task_id": task.as_str()}),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let seeds: Vec<u64> = run["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(seeds.len(), 5);
    assert!(
        seeds.iter().all(|s| HELD_OUT_RANGE.contains(s)),
        "{seeds:?}"
    );
    let play = |seed: u64, findings: Value| {
        let c = c.clone();
        let base = base.clone();
        async move {
            post_in(
                &c,
                &format!("{base}/reset"),
                session,
                json!({"task_id": task.as_str(), "seed": seed}),
            )
            .await;
            let (_, r) = post_in(
                &c,
                &format!("{base}/step"),
                session,
                json!({"findings": findings, "submit_final": true}),
            )
            .await;
            assert!(r.get("grader").is_none(), "run episodes are sealed: {r}");
        }
    };
    let submit = |model: &'static str| {
        let (c, base) = (c.clone(), base.clone());
        async move {
            post_in(
                &c,
                &format!("{base}/leaderboard"),
                session,
                json!({ "model": model }),
            )
            .await
        }
    };
    // Probing seed 102 inside the run counts for nothing: the run stays incomplete.
    play(
        seed,
        json!([finding(&(
            docs.iter().next().unwrap().clone(),
            types[0].clone()
        ))]),
    )
    .await;
    let (s, r) = submit("m").await;
    assert_eq!(s, 409, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not complete"));
    // The whole run, empty submissions: the blind baseline's entry.
    for &s in &seeds {
        play(s, json!([])).await;
    }
    let (s, r) = submit("m").await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["entry"]["score"], 0.01);
    assert_eq!(r["entry"]["seeds"], json!(seeds));
    // A run is scored once.
    let (s, _) = submit("m2").await;
    assert_eq!(s, 409);

    // Bounded: at most six runs start per minute on the server.
    let mut statuses = BTreeSet::new();
    for i in 0..6 {
        let (s, _) = post_in(
            &c,
            &format!("{base}/leaderboard/run"),
            &format!("sess-flood-{i}"),
            json!({"task_id": "expense_audit"}),
        )
        .await;
        statuses.insert(s);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}
