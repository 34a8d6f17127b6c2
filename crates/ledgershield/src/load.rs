//! `ledgershield load`: play whole episodes over HTTP and measure the server.
//!
//! Each worker owns a session (`X-Session-Id`) and plays a fixed six-action script on the curated
//! cases in turn, starting at a different case per worker. Institutional memory carries over
//! between a session's episodes and legitimately moves grades, so the reference for a worker is
//! its whole sequence: before the timed runs, every distinct worker sequence is played alone, one
//! at a time, in a fresh session; under load each episode must reproduce the score it had at the
//! same position of that solo sequence, or it counts as interference. Session ids carry a tag of
//! the run, so repeated runs against one long-lived `--url` server never share memory.
//! Each worker holds one keep-alive connection ([`crate::http1`]): the generator shares the
//! machine with the server, so it is kept as light as it can be.
//! Server CPU and RSS come from `/proc/<pid>` of the server process.

use crate::http1::{self, Conn};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Server to test; without it a server is started as a child process.
    #[arg(long)]
    url: Option<String>,
    /// PID of the server process, for CPU and RSS figures when `--url` is given.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Concurrency levels to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,
    /// Episodes per concurrency level.
    #[arg(long, default_value_t = 2000)]
    episodes: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Transport floor: also time "episodes" of seven `GET /health` requests (no environment
    /// work), to separate HTTP and kernel cost from environment cost.
    #[arg(long)]
    transport_floor: bool,
    /// Play every run this many times (each round in fresh sessions) and also report the median
    /// of each figure: on a shared or virtual machine one run can be off by a quarter.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    rounds: u32,
}

/// The scripted episode: six actions after reset, as pre-serialized request bodies.
fn script(doc: &str) -> Vec<Vec<u8>> {
    [
        json!({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
        json!({"action_type": "zoom", "payload": {"doc_id": doc, "page": 1, "bbox": [0, 0, 300, 200]}}),
        json!({"action_type": "lookup_policy", "payload": {}}),
        json!({"action_type": "search_ledger", "payload": {"amount": 2478}}),
        json!({"action_type": "request_callback_verification", "payload": {}}),
        json!({"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}}}),
    ]
    .iter()
    .map(|v| serde_json::to_vec(v).expect("static JSON"))
    .collect()
}

/// The few reply fields the load client checks, read without parsing the rest
/// ([`crate::reply_fields`]): the generator shares the cores with the server it measures.
/// Kept over the plain reader (one `serde_json::from_slice` into the same fields, unknown ones
/// skipped) because it measured above the 5 % bar: on the 7 replies of the load script for five
/// curated cases (about 107 KB per episode), release build, five rounds on the 2-core machine,
/// this reader took 118–147 µs per episode and the plain one 271–404 µs, a difference of
/// roughly half the server's whole CPU per episode (0.267 ms, BENCHMARKS.md).
#[derive(Default)]
struct Reply {
    case_id: String,
    step_count: u64,
    first_doc_id: Option<String>,
    final_score: Option<f64>,
}

#[derive(serde::Deserialize)]
struct ReplyDocument {
    doc_id: String,
}

impl Reply {
    /// The envelope's leading `observation` up to its step count, and its trailing `info`.
    fn read(body: &[u8]) -> Result<Self> {
        use crate::reply_fields::{first_member, last_member, members, parse, Walk};
        let mut r = Reply::default();
        let (key, observation_at) = first_member(body, 0)?;
        if key != "observation" {
            bail!("reply does not start with its observation (found {key:?})");
        }
        let mut step_count = false;
        members(body, observation_at, |key, value| {
            match key {
                "case_id" => r.case_id = parse(value)?,
                "visible_documents" => {
                    let docs: Vec<ReplyDocument> = parse(value)?;
                    r.first_doc_id = docs.into_iter().next().map(|d| d.doc_id);
                }
                "step_count" => {
                    r.step_count = parse(value)?;
                    step_count = true;
                    return Ok(Walk::Stop);
                }
                _ => {}
            }
            Ok(Walk::Continue)
        })?;
        if !step_count {
            bail!("reply's observation has no step count");
        }
        let (key, info) = last_member(body)?;
        if key != "info" {
            bail!("reply does not end with its info (found {key:?})");
        }
        // A graded step's info leads with its final score; other steps' infos have none.
        members(info, 0, |key, value| {
            if key == "final_score" {
                r.final_score = parse(value)?;
            }
            Ok(Walk::Stop)
        })?;
        Ok(r)
    }
}

struct Sample {
    latencies_us: Vec<u64>,
    interference: usize,
    episodes: usize,
}

async fn post(
    conn: &mut Conn,
    path: &str,
    session: &str,
    body: &[u8],
    lat: &mut Vec<u64>,
) -> Result<Reply> {
    let t = Instant::now();
    let reply = conn.send("POST", path, Some(session), Some(body)).await?;
    lat.push(t.elapsed().as_micros() as u64);
    if !(200..300).contains(&reply.status) {
        bail!(
            "{path} returned {}: {}",
            reply.status,
            String::from_utf8_lossy(reply.body)
        );
    }
    Reply::read(reply.body).with_context(|| format!("{path}: unexpected reply"))
}

/// One episode on `conn`. `scripts` caches each document's pre-serialized request bodies.
async fn play(
    conn: &mut Conn,
    scripts: &mut BTreeMap<String, Vec<Vec<u8>>>,
    session: &str,
    case_id: &str,
    lat: &mut Vec<u64>,
) -> Result<(f64, bool)> {
    let env = post(
        conn,
        "/reset",
        session,
        &serde_json::to_vec(&json!({"case_id": case_id}))?,
        lat,
    )
    .await?;
    let mut consistent = env.case_id == case_id;
    let doc = env.first_doc_id.as_deref().unwrap_or("");
    let bodies = scripts.entry(doc.to_owned()).or_insert_with(|| script(doc));
    let mut score = -1.0;
    for (i, body) in bodies.iter().enumerate() {
        let last = post(conn, "/step", session, body, lat).await?;
        consistent &= last.case_id == case_id && last.step_count == i as u64 + 1;
        score = last.final_score.unwrap_or(-1.0);
        if i + 1 == bodies.len() && last.final_score.is_none() {
            bail!("the submit step's info does not lead with a final score");
        }
    }
    Ok((score, consistent))
}

/// CPU time of a process (all its threads) split into user and kernel time, and its RSS.
#[derive(Clone, Copy)]
struct ProcSample {
    user_s: f64,
    system_s: f64,
    rss_kb: u64,
}

fn proc_stat(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = 100.0; // USER_HZ on Linux
    let user_s = f.get(11)?.parse::<f64>().ok()? / ticks;
    let system_s = f.get(12)?.parse::<f64>().ok()? / ticks;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(ProcSample {
        user_s,
        system_s,
        rss_kb,
    })
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx] as f64 / 1000.0
}

/// Per (kind, concurrency): the median of every numeric figure over the rounds, and the total of
/// interference errors (any is a failure, never averaged away).
fn median_rows(runs: &[serde_json::Value]) -> Vec<serde_json::Value> {
    const FIGURES: [&str; 9] = [
        "episodes_per_s",
        "steps_per_s",
        "latency_ms_p50",
        "latency_ms_p99",
        "server_cpu_ms_per_episode",
        "server_cpu_user_ms_per_episode",
        "server_cpu_system_ms_per_episode",
        "server_rss_mb",
        "wall_s",
    ];
    let mut groups: BTreeMap<(u64, String), Vec<&serde_json::Value>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((
                r["concurrency"].as_u64().unwrap_or(0),
                r["kind"].as_str().unwrap_or("").to_owned(),
            ))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|((conc, kind), rows)| {
            let mut m = serde_json::Map::new();
            m.insert("kind".into(), json!(kind));
            m.insert("concurrency".into(), json!(conc));
            m.insert("rounds".into(), json!(rows.len()));
            // Every round plays the same number of episodes.
            m.insert("episodes".into(), rows[0]["episodes"].clone());
            for f in FIGURES {
                let mut v: Vec<f64> = rows.iter().filter_map(|r| r[f].as_f64()).collect();
                v.sort_by(f64::total_cmp);
                let median = match v.len() {
                    0 => None,
                    n if n % 2 == 1 => Some(v[n / 2]),
                    n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
                };
                m.insert(
                    f.into(),
                    json!(median.map(|x| (x * 1000.0).round() / 1000.0)),
                );
            }
            m.insert(
                "interference_errors".into(),
                json!(rows
                    .iter()
                    .map(|r| r["interference_errors"].as_u64().unwrap_or(0))
                    .sum::<u64>()),
            );
            serde_json::Value::Object(m)
        })
        .collect()
}

struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The 21 curated cases the workers play.
const CASES: [&str; 21] = [
    "A-001", "A-002", "A-003", "A-004", "B-001", "B-002", "B-003", "B-004", "B-005", "C-001",
    "C-002", "C-003", "C-004", "D-001", "D-002", "D-003", "D-004", "D-005", "D-006", "E-001",
    "E-002",
];

/// The server under test: its base URL, its PID (for CPU and RSS) and, when this command
/// started it, the guard that stops it.
fn server(args: &LoadArgs) -> Result<(String, Option<u32>, Option<ChildGuard>)> {
    if let Some(u) = &args.url {
        return Ok((u.trim_end_matches('/').to_owned(), args.server_pid, None));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = std::process::Command::new(std::env::current_exe()?)
        .args([
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--max-sessions",
            "4096",
        ])
        .env("LEDGERSHIELD_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .context("starting the server")?;
    let pid = child.id();
    Ok((
        format!("http://127.0.0.1:{port}"),
        Some(pid),
        Some(ChildGuard(child)),
    ))
}

/// Wait up to 20 s for `GET /health` to answer 200.
async fn wait_for(authority: &str, base: &str) -> Result<()> {
    let start = Instant::now();
    loop {
        if let Ok(mut c) = Conn::connect(authority).await {
            if c.send("GET", "/health", None, None)
                .await
                .is_ok_and(|r| r.status == 200)
            {
                return Ok(());
            }
        }
        if start.elapsed() > Duration::from_secs(20) {
            bail!("server at {base} did not come up");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Solo references: the score sequence of a worker that starts at case `start`, played alone in
/// a fresh session. Workers that start at the same case share one reference.
async fn solo_references(
    args: &LoadArgs,
    authority: &str,
    cases: &[String],
    run_tag: &str,
) -> Result<BTreeMap<(usize, usize), Vec<f64>>> {
    let mut solo = BTreeMap::new();
    for &conc in &args.concurrency {
        let conc = conc.max(1);
        let per_worker = args.episodes.div_ceil(conc);
        for start in 0..conc.min(cases.len()) {
            if solo.contains_key(&(start, per_worker)) {
                continue;
            }
            let session = format!("load-{run_tag}-solo-{start}-{per_worker}");
            let (mut scores, mut lat) = (Vec::with_capacity(per_worker), Vec::new());
            let (mut conn, mut scripts) = (Conn::connect(authority).await?, BTreeMap::new());
            for i in 0..per_worker {
                let case = &cases[(start + i) % cases.len()];
                scores.push(
                    play(&mut conn, &mut scripts, &session, case, &mut lat)
                        .await?
                        .0,
                );
            }
            solo.insert((start, per_worker), scores);
        }
    }
    Ok(solo)
}

/// One worker of a timed run: `per_worker` episodes (or transport-floor rounds of seven
/// `GET /health`), each episode's score checked against the worker's solo reference.
async fn worker(
    authority: String,
    cases: Vec<String>,
    solo: Vec<f64>,
    session: String,
    w: usize,
    per_worker: usize,
    floor: bool,
) -> Result<Sample> {
    let mut s = Sample {
        latencies_us: Vec::with_capacity(per_worker * 7),
        interference: 0,
        episodes: 0,
    };
    let (mut conn, mut scripts) = (Conn::connect(&authority).await?, BTreeMap::new());
    for i in 0..per_worker {
        if floor {
            for _ in 0..7 {
                let t = Instant::now();
                let ok = conn.send("GET", "/health", None, None).await?.status == 200;
                s.latencies_us.push(t.elapsed().as_micros() as u64);
                s.interference += usize::from(!ok);
            }
            s.episodes += 1;
            continue;
        }
        let case = &cases[(w + i) % cases.len()];
        let (score, consistent) =
            play(&mut conn, &mut scripts, &session, case, &mut s.latencies_us).await?;
        if !consistent || score.to_bits() != solo[i].to_bits() {
            s.interference += 1;
        }
        s.episodes += 1;
    }
    Ok(s)
}

/// What a timed run needs besides its round, concurrency and kind.
struct Target<'a> {
    authority: &'a str,
    pid: Option<u32>,
    cases: &'a [String],
    solo: &'a BTreeMap<(usize, usize), Vec<f64>>,
    run_tag: &'a str,
    episodes: usize,
}

/// One timed run at concurrency `conc`: its figures as a report row.
async fn timed_run(
    t: &Target<'_>,
    round: u32,
    conc: usize,
    floor: bool,
) -> Result<serde_json::Value> {
    let per_worker = t.episodes.div_ceil(conc);
    let before = t.pid.and_then(proc_stat);
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for w in 0..conc {
        handles.push(tokio::spawn(worker(
            t.authority.to_owned(),
            t.cases.to_vec(),
            t.solo[&(w % t.cases.len(), per_worker)].clone(),
            format!("load-{}-r{round}-{conc}-{w}", t.run_tag),
            w,
            per_worker,
            floor,
        )));
    }
    let mut lat = Vec::new();
    let (mut episodes, mut interference) = (0, 0);
    for h in handles {
        let s = h.await??;
        lat.extend(s.latencies_us);
        episodes += s.episodes;
        interference += s.interference;
    }
    let wall = t0.elapsed().as_secs_f64();
    let after = t.pid.and_then(proc_stat);
    lat.sort_unstable();
    let per_episode_ms = |f: fn(&ProcSample) -> f64| match (before, after) {
        (Some(b), Some(a)) => {
            Some(((f(&a) - f(&b)) * 1000.0 / episodes as f64 * 1000.0).round() / 1000.0)
        }
        _ => None,
    };
    Ok(json!({
        "round": round,
        "kind": if floor { "transport_floor" } else { "episodes" },
        "concurrency": conc,
        "episodes": episodes,
        "requests": lat.len(),
        "wall_s": (wall * 1000.0).round() / 1000.0,
        "episodes_per_s": (episodes as f64 / wall * 10.0).round() / 10.0,
        "steps_per_s": ((lat.len() - episodes) as f64 / wall * 10.0).round() / 10.0,
        "latency_ms_p50": pct(&lat, 0.50),
        "latency_ms_p99": pct(&lat, 0.99),
        "server_cpu_ms_per_episode": per_episode_ms(|p| p.user_s + p.system_s),
        "server_cpu_user_ms_per_episode": per_episode_ms(|p| p.user_s),
        "server_cpu_system_ms_per_episode": per_episode_ms(|p| p.system_s),
        "server_rss_mb": after.map(|a| (a.rss_kb as f64 / 1024.0 * 10.0).round() / 10.0),
        "interference_errors": interference,
    }))
}

/// The report as a table: every run, then the medians over rounds.
fn print_table(out: &serde_json::Value, base: &str) {
    println!(
        "server {base}  idle RSS {} MB (before any episode)",
        out["idle_rss_mb"]
    );
    println!(
        "{:>23} {:>5} {:>8} {:>11} {:>10} {:>9} {:>9} {:>14} {:>6} {:>6} {:>8} {:>12}",
        "run",
        "conc",
        "episodes",
        "episodes/s",
        "steps/s",
        "p50 ms",
        "p99 ms",
        "cpu ms/episode",
        "user",
        "system",
        "RSS MB",
        "interference"
    );
    let rows = out["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (r, ""))
        .chain(
            out["medians"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| (r, "median ")),
        );
    for (r, tag) in rows {
        println!(
            "{:>23} {:>5} {:>8} {:>11} {:>10} {:>9.3} {:>9.3} {:>14} {:>6} {:>6} {:>8} {:>12}",
            format!("{tag}{}", r["kind"].as_str().unwrap_or("")),
            r["concurrency"],
            r["episodes"],
            r["episodes_per_s"],
            r["steps_per_s"],
            r["latency_ms_p50"].as_f64().unwrap_or(0.0),
            r["latency_ms_p99"].as_f64().unwrap_or(0.0),
            r["server_cpu_ms_per_episode"],
            r["server_cpu_user_ms_per_episode"],
            r["server_cpu_system_ms_per_episode"],
            r["server_rss_mb"],
            r["interference_errors"]
        );
    }
}

pub fn run(args: LoadArgs) -> Result<()> {
    let (base, pid, _guard) = server(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let authority = http1::authority(&base)?;
        wait_for(&authority, &base).await?;
        let cases: Vec<String> = CASES.iter().map(|n| format!("CASE-{n}")).collect();
        let idle_rss = pid.and_then(proc_stat).map(|s| s.rss_kb);
        // Sessions keep institutional memory across episodes, so every run gets session ids of its
        // own: a second run against the same `--url` server must not inherit the first run's memory.
        let run_tag = format!(
            "{:x}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or(0)
        );
        let solo = solo_references(&args, &authority, &cases, &run_tag).await?;
        let target = Target {
            authority: &authority,
            pid,
            cases: &cases,
            solo: &solo,
            run_tag: &run_tag,
            episodes: args.episodes,
        };
        let runs: Vec<(usize, bool)> = args
            .concurrency
            .iter()
            .flat_map(|&c| [(c.max(1), false), (c.max(1), true)])
            .filter(|&(_, floor)| !floor || args.transport_floor)
            .collect();
        // Rounds alternate over the runs (not run after run) so slow phases of the machine spread
        // over every concurrency level alike.
        let mut report = Vec::new();
        for round in 1..=args.rounds {
            for &(conc, floor) in &runs {
                report.push(timed_run(&target, round, conc, floor).await?);
            }
        }
        let medians = if args.rounds > 1 {
            median_rows(&report)
        } else {
            Vec::new()
        };
        let out = json!({"server": base, "idle_rss_mb": idle_rss.map(|r| (r as f64 / 1024.0 * 10.0).round() / 10.0), "runs": report, "medians": medians});
        if args.json {
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print_table(&out, &base);
        }
        let total_interference: u64 = report
            .iter()
            .map(|r| r["interference_errors"].as_u64().unwrap_or(0))
            .sum();
        if total_interference > 0 {
            bail!("{total_interference} episode(s) diverged from their solo result under concurrency");
        }
        Ok(())
    })
}
