//! `ledgershield load`: play whole episodes over HTTP and measure the server.
//!
//! Each worker owns a session (`X-Session-Id`) and plays a fixed six-action script on the curated
//! cases in turn. Before the timed runs, every case is played once alone to record its score;
//! under load each episode (after clearing the session's institutional memory, untimed) must
//! reproduce that score exactly, or it counts as interference.
//! Server CPU and RSS come from `/proc/<pid>` of the server process.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
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
}

/// The scripted episode: six actions after reset.
fn script(obs: &Value) -> Vec<Value> {
    let doc = obs["visible_documents"][0]["doc_id"].as_str().unwrap_or("").to_owned();
    vec![
        json!({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
        json!({"action_type": "zoom", "payload": {"doc_id": doc, "page": 1, "bbox": [0, 0, 300, 200]}}),
        json!({"action_type": "lookup_policy", "payload": {}}),
        json!({"action_type": "search_ledger", "payload": {"amount": 2478}}),
        json!({"action_type": "request_callback_verification", "payload": {}}),
        json!({"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}}}),
    ]
}

struct Sample {
    latencies_us: Vec<u64>,
    interference: usize,
    episodes: usize,
}

async fn post(client: &reqwest::Client, url: &str, session: &str, body: &Value, lat: &mut Vec<u64>) -> Result<Value> {
    let t = Instant::now();
    let resp = client.post(url).header("X-Session-Id", session).json(body).send().await?;
    let status = resp.status();
    let v: Value = resp.json().await?;
    lat.push(t.elapsed().as_micros() as u64);
    if !status.is_success() {
        bail!("{url} returned {status}: {v}");
    }
    Ok(v)
}

async fn play(client: &reqwest::Client, base: &str, session: &str, case_id: &str, lat: &mut Vec<u64>) -> Result<(f64, bool)> {
    // Institutional memory carries over between a session's episodes and legitimately moves
    // grades; clearing it makes every episode comparable with the same case played alone.
    let mut untimed = Vec::new();
    post(client, &format!("{base}/institutional-reset"), session, &json!({}), &mut untimed).await?;
    let env = post(client, &format!("{base}/reset"), session, &json!({"case_id": case_id}), lat).await?;
    let mut consistent = env["observation"]["case_id"] == case_id;
    let mut last = env.clone();
    for (i, action) in script(&env["observation"]).iter().enumerate() {
        last = post(client, &format!("{base}/step"), session, action, lat).await?;
        consistent &= last["observation"]["case_id"] == case_id && last["observation"]["step_count"] == json!(i + 1);
    }
    let score = last["info"]["final_score"].as_f64().unwrap_or(-1.0);
    Ok((score, consistent))
}

fn proc_stat(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = 100.0; // USER_HZ on Linux
    let cpu_s = (f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / ticks;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some((cpu_s, rss_kb))
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx] as f64 / 1000.0
}

struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(args: LoadArgs) -> Result<()> {
    let (base, pid, _guard) = match &args.url {
        Some(u) => (u.trim_end_matches('/').to_owned(), args.server_pid, None),
        None => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let child = std::process::Command::new(std::env::current_exe()?)
                .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string(), "--max-sessions", "4096"])
                .env("LEDGERSHIELD_LOG", "warn")
                .stdout(Stdio::null())
                .spawn()
                .context("starting the server")?;
            let pid = child.id();
            (format!("http://127.0.0.1:{port}"), Some(pid), Some(ChildGuard(child)))
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let client = reqwest::Client::builder().pool_max_idle_per_host(512).timeout(Duration::from_secs(30)).build()?;
        // Wait for the server.
        let start = Instant::now();
        loop {
            if client.get(format!("{base}/health")).send().await.is_ok() {
                break;
            }
            if start.elapsed() > Duration::from_secs(20) {
                bail!("server at {base} did not come up");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let cases: Vec<String> = {
            let mut ids = Vec::new();
            for n in ["A-001", "A-002", "A-003", "A-004", "B-001", "B-002", "B-003", "B-004", "B-005", "C-001", "C-002", "C-003", "C-004", "D-001", "D-002", "D-003", "D-004", "D-005", "D-006", "E-001", "E-002"] {
                ids.push(format!("CASE-{n}"));
            }
            ids
        };
        // Solo baseline scores.
        let mut solo = BTreeMap::new();
        let mut lat = Vec::new();
        for c in &cases {
            let (score, _) = play(&client, &base, "load-solo", c, &mut lat).await?;
            solo.insert(c.clone(), score);
        }
        let idle_rss = pid.and_then(proc_stat).map(|s| s.1);
        let mut report = Vec::new();
        for &conc in &args.concurrency {
            let conc = conc.max(1);
            let before = pid.and_then(proc_stat);
            let t0 = Instant::now();
            let per_worker = args.episodes.div_ceil(conc);
            let mut handles = Vec::new();
            for w in 0..conc {
                let client = client.clone();
                let base = base.clone();
                let cases = cases.clone();
                let solo = solo.clone();
                handles.push(tokio::spawn(async move {
                    let session = format!("load-{conc}-{w}");
                    let mut s = Sample { latencies_us: Vec::with_capacity(per_worker * 7), interference: 0, episodes: 0 };
                    for i in 0..per_worker {
                        let case = &cases[(w + i) % cases.len()];
                        let (score, consistent) = play(&client, &base, &session, case, &mut s.latencies_us).await?;
                        if !consistent || (score - solo[case]).abs() > 1e-12 {
                            s.interference += 1;
                        }
                        s.episodes += 1;
                    }
                    anyhow::Ok(s)
                }));
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
            let after = pid.and_then(proc_stat);
            lat.sort_unstable();
            let cpu_ms_per_episode = match (before, after) {
                (Some(b), Some(a)) => Some((a.0 - b.0) * 1000.0 / episodes as f64),
                _ => None,
            };
            report.push(json!({
                "concurrency": conc,
                "episodes": episodes,
                "requests": lat.len(),
                "wall_s": (wall * 1000.0).round() / 1000.0,
                "episodes_per_s": (episodes as f64 / wall * 10.0).round() / 10.0,
                "steps_per_s": ((lat.len() - episodes) as f64 / wall * 10.0).round() / 10.0,
                "latency_ms_p50": pct(&lat, 0.50),
                "latency_ms_p99": pct(&lat, 0.99),
                "server_cpu_ms_per_episode": cpu_ms_per_episode.map(|v| (v * 1000.0).round() / 1000.0),
                "server_rss_mb": after.map(|a| (a.1 as f64 / 1024.0 * 10.0).round() / 10.0),
                "interference_errors": interference,
            }));
        }
        let out = json!({"server": base, "idle_rss_mb": idle_rss.map(|r| (r as f64 / 1024.0 * 10.0).round() / 10.0), "runs": report});
        if args.json {
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("server {base}  idle RSS {:?} MB", out["idle_rss_mb"]);
            println!("{:>5} {:>8} {:>11} {:>10} {:>9} {:>9} {:>14} {:>8} {:>12}", "conc", "episodes", "episodes/s", "steps/s", "p50 ms", "p99 ms", "cpu ms/episode", "RSS MB", "interference");
            for r in out["runs"].as_array().into_iter().flatten() {
                println!(
                    "{:>5} {:>8} {:>11} {:>10} {:>9.3} {:>9.3} {:>14} {:>8} {:>12}",
                    r["concurrency"], r["episodes"], r["episodes_per_s"], r["steps_per_s"], r["latency_ms_p50"].as_f64().unwrap_or(0.0), r["latency_ms_p99"].as_f64().unwrap_or(0.0), r["server_cpu_ms_per_episode"], r["server_rss_mb"], r["interference_errors"]
                );
            }
        }
        let total_interference: u64 = out["runs"].as_array().into_iter().flatten().map(|r| r["interference_errors"].as_u64().unwrap_or(0)).sum();
        if total_interference > 0 {
            bail!("{total_interference} episode(s) diverged from their solo result under concurrency");
        }
        Ok(())
    })
}
