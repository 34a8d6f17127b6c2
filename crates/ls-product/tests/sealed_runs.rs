//! Sealed runs on the real server (ephemeral port, real sockets): a sealed episode's end and the
//! session's state carry no grade; a client that plays a run's cases one at a time with
//! different decisions learns nothing per case, and the run's score arrives once; the operator
//! reads the per-case grades with the key; a scored run is stored as a sealed run; refusals are
//! 4xx JSON errors naming the problem.

#[path = "support/servers.rs"]
mod servers;

use ls_env::TrackMode;
use ls_product::ReportStore;
use serde_json::{json, Value};

const KEY: &str = "sealed-runs-operator-key-0123456789";

struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    async fn new(store: ReportStore) -> Self {
        Self {
            base: servers::controlbench_with(TrackMode::Blind, store, Some(KEY)).await,
            http: reqwest::Client::new(),
        }
    }

    /// `(status, Retry-After, body)` of one request (a body makes it a POST).
    async fn send(
        &self,
        path: &str,
        session: &str,
        key: bool,
        body: Option<Value>,
    ) -> (u16, Option<String>, Value) {
        let url = format!("{}{path}", self.base);
        let mut r = match body {
            Some(b) => self.http.post(url).json(&b),
            None => self.http.get(url),
        };
        if !session.is_empty() {
            r = r.header("x-session-id", session);
        }
        if key {
            r = r.header("x-api-key", KEY);
        }
        let resp = r.send().await.unwrap();
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (
            resp.status().as_u16(),
            retry,
            resp.json().await.unwrap_or(Value::Null),
        )
    }

    async fn call(&self, path: &str, session: &str, body: Option<Value>) -> (u16, Value) {
        let (status, _, v) = self.send(path, session, false, body).await;
        (status, v)
    }

    async fn start(&self, body: Value) -> Value {
        let (status, run) = self.call("/sealed-runs", "", Some(body)).await;
        assert_eq!(status, 200, "{run}");
        run
    }
}

fn case_ids(run: &Value) -> Vec<String> {
    run["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["case_id"].as_str().unwrap().to_owned())
        .collect()
}

/// What the grade would be spelled as anywhere in a reply.
const GRADE_KEYS: [&str; 9] = [
    "final_score",
    "result_class",
    "score_breakdown",
    "unsafe_outcome",
    "system_state",
    "decision_certificate_report",
    "pressure_resistance_score",
    "latent_hypothesis",
    "required_actions",
];

fn assert_no_grade(what: &str, v: &Value) {
    let text = v.to_string();
    for k in GRADE_KEYS {
        assert!(
            !text.contains(&format!("\"{k}\"")),
            "{what} carries {k}: {text}"
        );
    }
}

/// The keys of an object, in order.
fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// Play `case` of `run` in its session: a vendor lookup, then `decision`; the terminal reply and
/// the state after it.
async fn play(c: &Client, run: &Value, case: &str, decision: &str) -> (Value, Value) {
    let id = run["run_id"].as_str().unwrap();
    let session = run["session_id"].as_str().unwrap();
    let (status, first) = c
        .call(
            &format!("/sealed-runs/{id}/reset"),
            "",
            Some(json!({"case_id": case})),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["observation"]["case_id"], case);
    assert_eq!(
        (first["reward"].as_f64(), first["done"].as_bool()),
        (Some(0.0), Some(false))
    );
    let step = |action: Value| c.call("/step", session, Some(action));
    let (status, look) = step(json!({"action_type": "lookup_policy", "payload": {}})).await;
    assert_eq!(status, 200, "{look}");
    let (status, end) = step(json!({"action_type": "submit_decision",
        "payload": {"decision": decision, "confidence": 0.7}}))
    .await;
    assert_eq!(status, 200, "{end}");
    let (status, state) = c.call("/state", session, None).await;
    assert_eq!(status, 200, "{state}");
    (end, state)
}

/// A run played to the end: every sealed reply and state is grade-free and shaped alike whatever
/// the decision; the score is absent until the last case has ended, then arrives once; the
/// operator reads per-case grades whose mean is the score; the run is stored as a sealed run.
#[tokio::test]
async fn a_sealed_run_withholds_every_grade_until_the_whole_run_is_scored() {
    let db = std::env::temp_dir().join(format!("ls-sealed-{}.db", uuid::Uuid::new_v4()));
    ls_store::Store::open(&db).unwrap();
    let c = Client::new(ReportStore::at(db.clone())).await;
    let run = c
        .start(json!({"suite": "holdout", "count": 5, "model": "probe-model"}))
        .await;
    let (id, session) = (
        run["run_id"].as_str().unwrap(),
        run["session_id"].as_str().unwrap(),
    );
    assert!(id.starts_with("sealed-run-") && session.starts_with("sealed-"));
    assert_eq!(
        (run["suite"].as_str(), run["case_count"].as_u64()),
        (Some("holdout"), Some(5))
    );
    assert!(run["score"].is_null());
    let cases = case_ids(&run);
    let decisions = ["PAY", "HOLD", "ESCALATE_FRAUD", "NEEDS_REVIEW", "PAY"];
    let mut infos = Vec::new();
    for (i, (case, decision)) in cases.iter().zip(decisions).enumerate() {
        let (end, state) = play(&c, &run, case, decision).await;
        assert!(end["done"].as_bool().unwrap() && end["terminated"].as_bool().unwrap());
        assert_eq!(
            end["reward"].as_f64(),
            Some(0.0),
            "no reward equal to the score"
        );
        assert_no_grade("the sealed end", &end);
        assert_eq!(end["info"]["sealed"], true);
        assert_eq!(end["info"]["decision"], decision);
        assert_eq!(end["observation"]["last_tool_result"]["sealed"], true);
        assert_no_grade("the sealed state", &state);
        assert_eq!(
            (state["sealed"].as_bool(), state["done"].as_bool()),
            (Some(true), Some(true))
        );
        let mut info = end["info"].clone();
        info.as_object_mut().unwrap().remove("decision");
        infos.push((info, keys(&state)));
        let (status, now) = c.call(&format!("/sealed-runs/{id}"), "", None).await;
        assert_eq!(status, 200, "{now}");
        assert_no_grade("the run's status", &now);
        if i + 1 < cases.len() {
            assert!(
                now["score"].is_null(),
                "no score before the last case: {now}"
            );
            assert_eq!(now["complete"], false);
        } else {
            assert_eq!(now["complete"], true);
            assert_eq!(now["score"]["case_count"], 5);
            assert_eq!(now["score"]["graded_count"], 5);
        }
        assert_eq!(now["cases"][i]["status"], "ended");
    }
    // Whatever the decision, every case's sealed end and state read alike.
    assert!(infos.windows(2).all(|w| w[0] == w[1]), "{infos:?}");
    let (status, again) = c
        .call(&format!("/sealed-runs/{id}/score"), "", Some(json!({})))
        .await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "conflict");
    assert!(again["detail"].as_str().unwrap().contains("already scored"));
    let (_, now) = c.call(&format!("/sealed-runs/{id}"), "", None).await;
    let mean = now["score"]["mean_score"].as_f64().unwrap();

    // The grades are the operator's.
    let path = format!("/sealed-runs/{id}/episodes");
    let (status, _, refused) = c.send(&path, "", false, None).await;
    assert_eq!(status, 403, "{refused}");
    let (status, _, grades) = c.send(&path, "", true, None).await;
    assert_eq!(status, 200, "{grades}");
    let scores: Vec<f64> = grades["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores.len(), 5);
    assert!(
        scores.iter().all(|s| (0.01..=0.99).contains(s)),
        "{scores:?}"
    );
    let expected = (scores.iter().sum::<f64>() / 5.0 * 10_000.0).round() / 10_000.0;
    assert_eq!(mean, expected);
    assert!(grades["episodes"][0]["terminal_info"]["final_score"].is_number());

    // Stored as a sealed run, readable as any stored run.
    let (status, _, stored) = c.send(&format!("/runs/{id}"), "", true, None).await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["run"]["kind"], "sealed");
    assert_eq!(stored["run"]["summary"]["track"], "sealed");
    assert_eq!(stored["run"]["mean_score"].as_f64(), Some(mean));
    let db_rows = ls_store::Store::open(&db)
        .unwrap()
        .episodes(Some(id), 100)
        .unwrap();
    let records = db_rows
        .into_iter()
        .map(|e| serde_json::from_value(e.record).unwrap())
        .collect();
    let summary = ls_report::stored::summarize_run(
        &ls_report::stored::StoredRunInput {
            run_id: id.to_owned(),
            agent: "probe-model".into(),
            model: "probe-model".into(),
            agent_type: "sealed-run".into(),
            summary: stored["run"]["summary"].clone(),
            records,
            ..Default::default()
        },
        0.85,
    );
    assert_eq!(summary.provenance.track, "sealed");
    assert_eq!(summary.provenance.suite, "holdout");
    assert!(
        (summary.mean_score - mean).abs() < 1e-3,
        "{} vs {mean}",
        summary.mean_score
    );
    let _ = std::fs::remove_file(&db);
}

/// Probing one case at a time buys nothing: a case is played once (a second try is refused), a
/// case of one run cannot be played in another, a new run draws new cases, the grade-bearing
/// side channels (the joint watchdog score, the institution) stay closed, and an early score is
/// the run's mean with the unplayed cases at the floor, given once.
#[tokio::test]
async fn probing_a_sealed_run_case_by_case_learns_nothing() {
    let c = Client::new(ReportStore::disabled()).await;
    let a = c.start(json!({"count": 5})).await;
    let b = c.start(json!({"suite": "challenge", "count": 5})).await;
    let (a_id, a_session) = (
        a["run_id"].as_str().unwrap(),
        a["session_id"].as_str().unwrap(),
    );
    let (a_cases, b_cases) = (case_ids(&a), case_ids(&b));
    assert!(a_cases.iter().all(|x| !b_cases.contains(x)), "fresh draws");
    let (fresh_status, fresh_memory) = c.call("/institutional-memory", "never-used", None).await;
    assert_eq!(fresh_status, 200);

    let (end, _) = play(&c, &a, &a_cases[0], "PAY").await;
    assert_no_grade("the sealed end", &end);
    // The same case again, with another decision: refused, in this run and in another.
    let reset = |run: &str, case: &str| {
        let path = format!("/sealed-runs/{run}/reset");
        let body = json!({"case_id": case});
        let c = &c;
        async move { c.call(&path, "", Some(body)).await }
    };
    let (status, replay) = reset(a_id, &a_cases[0]).await;
    assert_eq!(status, 409, "{replay}");
    assert!(replay["detail"]
        .as_str()
        .unwrap()
        .contains("already started"));
    let b_id = b["run_id"].as_str().unwrap();
    let (status, foreign) = reset(b_id, &a_cases[0]).await;
    assert_eq!(status, 404, "{foreign}");
    assert!(foreign["detail"]
        .as_str()
        .unwrap()
        .contains("is not in sealed run"));
    // The grade does not leak through the watchdog's joint score or the institution.
    let (status, joint) = c.call("/watchdog/joint", a_session, None).await;
    assert_eq!(status, 403, "{joint}");
    assert!(joint["detail"].as_str().unwrap().contains("sealed run"));
    let (_, memory) = c.call("/institutional-memory", a_session, None).await;
    assert_eq!(
        memory, fresh_memory,
        "nothing recorded into the session's institution"
    );

    // An early score: the mean over every case, the four unplayed at the floor; once.
    let (status, scored) = c
        .call(&format!("/sealed-runs/{a_id}/score"), "", Some(json!({})))
        .await;
    assert_eq!(status, 200, "{scored}");
    let s = &scored["score"];
    assert_eq!(
        (s["graded_count"].as_u64(), s["unplayed_count"].as_u64()),
        (Some(1), Some(4))
    );
    let mean = s["mean_score"].as_f64().unwrap();
    assert!(
        (0.01..=(0.99 + 4.0 * 0.01) / 5.0 + 1e-9).contains(&mean),
        "{mean}"
    );
    assert!(scored["stored_run_id"].is_null(), "no store on this server");
    let (status, closed) = reset(a_id, &a_cases[1]).await;
    assert_eq!(status, 409, "{closed}");
    assert!(closed["detail"]
        .as_str()
        .unwrap()
        .contains("already scored"));
}

/// Every refusal is a 4xx JSON error naming the problem; the fifth start of a client within a
/// minute is 429 with Retry-After.
#[tokio::test]
async fn refusals_are_clear_json_errors() {
    let c = Client::new(ReportStore::disabled()).await;
    let expect = |status: u16, code: &str, needle: &str, got: (u16, Value)| {
        assert_eq!(got.0, status, "{}", got.1);
        assert_eq!(got.1["error"]["code"], code, "{}", got.1);
        let detail = got.1["detail"].as_str().unwrap();
        assert!(detail.contains(needle), "{detail}");
    };
    let unknown = "sealed-run-00000000000000000000000000000000";
    expect(
        404,
        "not_found",
        "no sealed run",
        c.call(&format!("/sealed-runs/{unknown}"), "", None).await,
    );
    expect(
        404,
        "not_found",
        "no sealed run",
        c.call(
            &format!("/sealed-runs/{unknown}/reset"),
            "",
            Some(json!({"case_id": "X"})),
        )
        .await,
    );
    expect(
        404,
        "not_found",
        "no sealed run",
        c.call(
            &format!("/sealed-runs/{unknown}/score"),
            "",
            Some(json!({})),
        )
        .await,
    );
    for (body, needle) in [
        (json!({"count": 4}), "count: a sealed run has 5 to 24 cases"),
        (
            json!({"count": 25}),
            "count: a sealed run has 5 to 24 cases",
        ),
        (json!({"suite": "public"}), "unknown variant `public`"),
        (json!({"seed": 7}), "unknown field `seed`"),
        (json!({"model": ""}), "model: 1-64 printable characters"),
        (json!([1]), "must be a JSON object"),
        (
            json!({"suite": "certificate", "count": 22}),
            "certificate suite has 21 cases",
        ),
    ] {
        expect(
            422,
            "validation_error",
            needle,
            c.call("/sealed-runs", "", Some(body)).await,
        );
    }
    let run = c.start(json!({"suite": "certificate", "count": 5})).await;
    let id = run["run_id"].as_str().unwrap();
    let path = format!("/sealed-runs/{id}/reset");
    expect(
        422,
        "validation_error",
        "case_id",
        c.call(&path, "", Some(json!({}))).await,
    );
    expect(
        422,
        "validation_error",
        "case_id",
        c.call(&path, "", Some(json!({"case": "x"}))).await,
    );
    expect(
        404,
        "not_found",
        "is not in sealed run",
        c.call(&path, "", Some(json!({"case_id": "CASE-A-001"})))
            .await,
    );
    let case = &case_ids(&run)[0];
    assert_eq!(
        c.call(&path, "", Some(json!({"case_id": case}))).await.0,
        200
    );
    expect(
        409,
        "conflict",
        "already started",
        c.call(&path, "", Some(json!({"case_id": case}))).await,
    );
    // The per-case grades need the key.
    let (status, _, _) = c
        .send(&format!("/sealed-runs/{id}/episodes"), "", false, None)
        .await;
    assert_eq!(status, 403);
    // Starts: three more from this client are admitted, the fifth in a minute is not.
    for _ in 0..3 {
        c.start(json!({"suite": "certificate", "count": 5})).await;
    }
    let (status, retry, limited) = c
        .send(
            "/sealed-runs",
            "",
            false,
            Some(json!({"suite": "certificate", "count": 5})),
        )
        .await;
    assert_eq!(status, 429, "{limited}");
    assert_eq!(limited["error"]["code"], "rate_limited");
    assert!(limited["detail"]
        .as_str()
        .unwrap()
        .contains("per client for sealed run starts"));
    let secs: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=61).contains(&secs), "{secs}");
}
