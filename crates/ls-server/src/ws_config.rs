//! WebSocket session limits and the live-connection slots (shared by the OpenEnv traits and the
//! WebSocket handler, so neither depends on the other for them).

use crate::shutdown::Shutdown;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Limits of WebSocket sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsConfig {
    /// Most concurrent WebSocket sessions (`LEDGERSHIELD_WS_MAX_SESSIONS`, default 1024).
    pub max_sessions: usize,
    /// A session with no client message for this long is closed (`LEDGERSHIELD_WS_IDLE_SECS`, default 300).
    pub idle_timeout: Duration,
    /// Largest message answered normally; larger ones get a `VALIDATION_ERROR` reply
    /// (`LEDGERSHIELD_WS_MAX_MESSAGE_BYTES`, default 1 MiB).
    pub max_message_bytes: usize,
    /// Most concurrent WebSocket sessions from one client address
    /// (`LEDGERSHIELD_WS_MAX_SESSIONS_PER_CLIENT`, default 64).
    pub max_sessions_per_client: usize,
    /// Server-wide budget for the bytes unfinished WebSocket messages may buffer
    /// (`LEDGERSHIELD_WS_MAX_BUFFERED_BYTES`, default 1 GiB). Each session reserves its
    /// [`WsConfig::hard_limit_bytes`] from it for its lifetime (the most one session can buffer),
    /// so all sessions together never buffer more; past it a new session is refused (503).
    pub max_buffered_bytes: usize,
}

impl Default for WsConfig {
    fn default() -> Self {
        Self {
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(300),
            max_message_bytes: 1024 * 1024,
            max_sessions_per_client: 64,
            max_buffered_bytes: 1 << 30,
        }
    }
}

pub const ENV_MAX_SESSIONS: &str = "LEDGERSHIELD_WS_MAX_SESSIONS";
pub const ENV_IDLE_SECS: &str = "LEDGERSHIELD_WS_IDLE_SECS";
pub const ENV_MAX_MESSAGE_BYTES: &str = "LEDGERSHIELD_WS_MAX_MESSAGE_BYTES";
pub const ENV_MAX_SESSIONS_PER_CLIENT: &str = "LEDGERSHIELD_WS_MAX_SESSIONS_PER_CLIENT";
pub const ENV_MAX_BUFFERED_BYTES: &str = "LEDGERSHIELD_WS_MAX_BUFFERED_BYTES";

impl WsConfig {
    /// Defaults overridden by the `LEDGERSHIELD_WS_*` variables found through `get` (the binary
    /// passes the process environment). An unparsable or zero value is ignored with a warning.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let d = Self::default();
        let num = |key: &str, default: u64| -> u64 {
            match get(key).map(|v| v.trim().parse::<u64>()) {
                None => default,
                Some(Ok(n)) if n > 0 => n,
                Some(_) => {
                    tracing::warn!(key, "ignoring invalid value (expected a positive integer)");
                    default
                }
            }
        };
        Self {
            max_sessions: num(ENV_MAX_SESSIONS, d.max_sessions as u64).min(1 << 20) as usize,
            idle_timeout: Duration::from_secs(
                num(ENV_IDLE_SECS, d.idle_timeout.as_secs()).min(7 * 24 * 3600),
            ),
            max_message_bytes: num(ENV_MAX_MESSAGE_BYTES, d.max_message_bytes as u64).min(64 << 20)
                as usize,
            max_sessions_per_client: num(
                ENV_MAX_SESSIONS_PER_CLIENT,
                d.max_sessions_per_client as u64,
            )
            .min(1 << 20) as usize,
            max_buffered_bytes: num(ENV_MAX_BUFFERED_BYTES, d.max_buffered_bytes as u64)
                .min(1 << 40) as usize,
        }
    }

    /// Messages (and frames) above this size end the connection (close 1009); between
    /// `max_message_bytes` and this cap a message is answered with an error. It is also the most
    /// an unfinished message can buffer in one session, so it stays close to the message limit.
    pub fn hard_limit_bytes(&self) -> usize {
        self.max_message_bytes
            .saturating_mul(2)
            .saturating_add(64 << 10)
    }
}

/// Live WebSocket sessions: the configuration and the connection slots.
#[derive(Debug)]
pub struct WsRuntime {
    pub config: WsConfig,
    pub(crate) slots: Arc<Semaphore>,
    /// On shutdown every session closes with 1001 (going away); the server waits for them.
    pub(crate) shutdown: Shutdown,
    /// Open sessions per client address.
    per_client: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    /// The buffered-bytes budget in units of [`BUDGET_UNIT_BYTES`] (a semaphore counts `u32`s).
    buffer_budget: Arc<Semaphore>,
}

/// Granularity of the buffered-bytes budget (reservations are rounded up to it).
pub const BUDGET_UNIT_BYTES: usize = 4096;

fn budget_units(bytes: usize) -> usize {
    bytes.div_ceil(BUDGET_UNIT_BYTES)
}

/// A session's reservation from the buffered-bytes budget; returned when dropped.
#[derive(Debug)]
pub struct BufferReservation {
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// One WebSocket session counted against its client address; uncounted when dropped.
#[derive(Debug)]
pub struct ClientWsSlot {
    ip: Option<std::net::IpAddr>,
    map: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
}

impl Drop for ClientWsSlot {
    fn drop(&mut self) {
        let Some(ip) = self.ip else { return };
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }
}

impl WsRuntime {
    pub fn new(config: WsConfig, shutdown: Shutdown) -> Self {
        let config = WsConfig {
            max_sessions: config.max_sessions.max(1),
            max_buffered_bytes: config.max_buffered_bytes.max(1),
            ..config
        };
        Self {
            slots: Arc::new(Semaphore::new(config.max_sessions)),
            config,
            shutdown,
            per_client: Arc::default(),
            buffer_budget: Arc::new(Semaphore::new(
                budget_units(config.max_buffered_bytes).min(Semaphore::MAX_PERMITS),
            )),
        }
    }

    /// Reserve one session's most buffered bytes ([`WsConfig::hard_limit_bytes`]) from the
    /// server-wide budget; `None` when the budget is spent.
    pub fn reserve_buffer(&self) -> Option<BufferReservation> {
        let units = u32::try_from(budget_units(self.config.hard_limit_bytes())).ok()?;
        let permit = self
            .buffer_budget
            .clone()
            .try_acquire_many_owned(units)
            .ok()?;
        Some(BufferReservation { _permit: permit })
    }

    /// Count a new session from `ip` (`None`: unknown, not counted); `None` at the client's cap.
    pub fn acquire_client(&self, ip: Option<std::net::IpAddr>) -> Option<ClientWsSlot> {
        if let Some(ip) = ip {
            let mut m = self.per_client.lock().unwrap_or_else(|p| p.into_inner());
            let n = m.entry(ip).or_insert(0);
            if *n >= self.config.max_sessions_per_client.max(1) {
                return None;
            }
            *n += 1;
        }
        Some(ClientWsSlot {
            ip,
            map: self.per_client.clone(),
        })
    }

    /// Number of open WebSocket sessions.
    pub fn active(&self) -> usize {
        self.config.max_sessions - self.slots.available_permits()
    }
}
