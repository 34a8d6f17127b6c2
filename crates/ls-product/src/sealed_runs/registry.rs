//! The server's sealed runs: a bounded map of runs with a per-client quota, and the per-minute
//! limits on starting them (per client and server-wide).
//!
//! A sealed run is the only keyless way to have held-out cases graded, so how often one starts
//! is what bounds probing: every start draws fresh cases, and each start is counted against the
//! client's and the server's minute whatever the client's address (loopback included). The map
//! keeps at most [`SealedLimits::capacity`] runs; a client holding its quota gives up its own
//! least recently used run (a scored one first), a full map the least recently used run of the
//! client holding the most ([`ls_server::capacity::make_room`], as for sessions); idle runs
//! expire.

use super::run::SealedRun;
use ls_server::capacity::{make_room, ClientKey, Held, Room};
use ls_server::error::ApiError;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The bounds on sealed runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedLimits {
    /// Runs started per minute on the whole server.
    pub starts_per_min: usize,
    /// Runs one client starts per minute.
    pub starts_per_client_per_min: usize,
    /// Runs kept at once (open or scored).
    pub capacity: usize,
    /// Runs one client keeps at once.
    pub per_client: usize,
    /// A run not read or played for this long is dropped.
    pub idle: Duration,
}

impl Default for SealedLimits {
    fn default() -> Self {
        Self {
            starts_per_min: 30,
            starts_per_client_per_min: 4,
            capacity: 256,
            per_client: 16,
            idle: Duration::from_secs(1800),
        }
    }
}

const MINUTE: Duration = Duration::from_secs(60);

/// A run, shared by the requests that play and read it.
pub type RunHandle = Arc<Mutex<SealedRun>>;

/// Lock a run; a handler that panicked while holding it left it usable.
pub fn lock(run: &RunHandle) -> MutexGuard<'_, SealedRun> {
    run.lock().unwrap_or_else(|p| p.into_inner())
}

struct Entry {
    run: RunHandle,
    owner: Option<ClientKey>,
    last_used: Instant,
}

#[derive(Default)]
struct Inner {
    runs: HashMap<String, Entry>,
    /// When each start of the last minute happened, and whose.
    starts: VecDeque<(Instant, Option<ClientKey>)>,
}

/// The sealed runs of one server.
pub struct SealedRuns {
    limits: SealedLimits,
    inner: Mutex<Inner>,
}

impl SealedRuns {
    pub fn new(limits: SealedLimits) -> Self {
        Self {
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn limits(&self) -> SealedLimits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Count a run start of `owner` at `now`; 429 past the client's or the server's minute.
    pub fn admit(&self, owner: Option<ClientKey>, now: Instant) -> Result<(), ApiError> {
        let mut g = self.lock();
        while g
            .starts
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) >= MINUTE)
        {
            g.starts.pop_front();
        }
        let wait = |from: Option<&Instant>| {
            from.map_or(1, |t| {
                MINUTE.saturating_sub(now.duration_since(*t)).as_secs() + 1
            })
        };
        let mine: Vec<&Instant> = g
            .starts
            .iter()
            .filter(|(_, o)| *o == owner)
            .map(|(t, _)| t)
            .collect();
        if mine.len() >= self.limits.starts_per_client_per_min {
            return Err(ApiError::RateLimited {
                per_min: self.limits.starts_per_client_per_min as u32,
                scope: "client for sealed run starts",
                retry_after_secs: wait(mine.first().copied()),
            });
        }
        if g.starts.len() >= self.limits.starts_per_min {
            return Err(ApiError::RateLimited {
                per_min: self.limits.starts_per_min as u32,
                scope: "server for sealed run starts",
                retry_after_secs: wait(g.starts.front().map(|(t, _)| t)),
            });
        }
        g.starts.push_back((now, owner));
        Ok(())
    }

    /// Keep `run` for `owner`, making room as the module docs say; 503 when the map is full of
    /// clients holding no more than this one.
    pub fn insert(&self, run: SealedRun, owner: Option<ClientKey>) -> Result<RunHandle, ApiError> {
        let mut g = self.lock();
        let idle = self.limits.idle;
        g.runs.retain(|_, e| e.last_used.elapsed() < idle);
        let scored: HashMap<String, bool> = g
            .runs
            .iter()
            .map(|(id, e)| (id.clone(), lock(&e.run).is_scored()))
            .collect();
        let held = g.runs.iter().map(|(id, e)| Held {
            id,
            owner: e.owner,
            last_used: e.last_used,
            finished: scored[id],
        });
        match make_room(held, owner, self.limits.per_client, self.limits.capacity) {
            Room::Free => {}
            Room::Evict(victim) => {
                g.runs.remove(&victim);
            }
            Room::Full => {
                return Err(ApiError::Capacity(format!(
                    "sealed run capacity reached ({} runs)",
                    g.runs.len()
                )))
            }
        }
        let id = run.run_id.clone();
        let handle = Arc::new(Mutex::new(run));
        g.runs.insert(
            id,
            Entry {
                run: handle.clone(),
                owner,
                last_used: Instant::now(),
            },
        );
        Ok(handle)
    }

    /// The run `run_id` (404 when unknown or expired).
    pub fn get(&self, run_id: &str) -> Result<RunHandle, ApiError> {
        let mut g = self.lock();
        let idle = self.limits.idle;
        match g.runs.get_mut(run_id) {
            Some(e) if e.last_used.elapsed() < idle => {
                e.last_used = Instant::now();
                Ok(e.run.clone())
            }
            found => {
                if found.is_some() {
                    g.runs.remove(run_id);
                }
                Err(ApiError::NotFound(format!(
                    "no sealed run '{}' (unknown, or expired after {} s idle); start one with POST /sealed-runs",
                    ls_server::error::prefix(run_id),
                    idle.as_secs()
                )))
            }
        }
    }

    pub fn len(&self) -> usize {
        self.lock().runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::run::Suite;
    use super::*;

    fn client(i: u8) -> Option<ClientKey> {
        Some(ClientKey::of(std::net::IpAddr::from([10, 0, 0, i])))
    }

    fn run(id: &str) -> SealedRun {
        SealedRun::new(id.into(), Suite::Holdout, "m".into(), "s".into(), vec![])
    }

    /// A client's fifth start within a minute is refused, others still start; the server's
    /// limit holds across clients; a minute later a start is admitted again.
    #[test]
    fn starts_are_limited_per_client_and_per_server_each_minute() {
        let runs = SealedRuns::new(SealedLimits {
            starts_per_min: 6,
            ..Default::default()
        });
        let t0 = Instant::now();
        for _ in 0..4 {
            runs.admit(client(1), t0).unwrap();
        }
        let e = runs.admit(client(1), t0).unwrap_err();
        assert_eq!(e.status().as_u16(), 429, "{e}");
        assert!(
            e.to_string().contains("per client for sealed run starts"),
            "{e}"
        );
        runs.admit(client(2), t0).unwrap();
        runs.admit(client(3), t0).unwrap();
        let e = runs.admit(client(4), t0).unwrap_err();
        assert!(
            e.to_string().contains("per server for sealed run starts"),
            "{e}"
        );
        let later = t0 + MINUTE;
        runs.admit(client(1), later).unwrap();
    }

    /// A client at its quota gives up its own oldest run (a scored one first); an unknown run is
    /// a 404 naming it.
    #[test]
    fn a_client_at_its_quota_gives_up_its_own_runs() {
        let runs = SealedRuns::new(SealedLimits {
            per_client: 2,
            capacity: 4,
            ..Default::default()
        });
        runs.insert(run("a"), client(1)).unwrap();
        let b = runs.insert(run("b"), client(1)).unwrap();
        lock(&b).score().unwrap();
        runs.insert(run("c"), client(1)).unwrap();
        assert!(runs.get("a").is_ok(), "the open run is kept");
        assert_eq!(runs.get("b").unwrap_err().status().as_u16(), 404);
        runs.insert(run("d"), client(2)).unwrap();
        assert_eq!(runs.len(), 3);
        let e = runs.get("nope").unwrap_err();
        assert!(e.to_string().contains("no sealed run 'nope'"), "{e}");
    }
}
