//! WebSocket session limits and the live-connection slots (shared by the OpenEnv traits and the
//! WebSocket handler, so neither depends on the other for them).

use crate::capacity::{ClientKey, FairShare, Refusal, ShareLimits, Slot};
use crate::error::ApiError;
use crate::shutdown::Shutdown;
use std::time::Duration;

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

/// Live WebSocket sessions: the configuration and the session slots.
#[derive(Debug)]
pub struct WsRuntime {
    pub config: WsConfig,
    /// One slot per open session, shared fairly among clients
    /// ([`crate::capacity::FairShare`]: a per-client cap and a reserve kept for clients holding
    /// few sessions). Its capacity is the smaller of the session limit and the sessions the
    /// buffered-bytes budget can hold: each session reserves [`WsConfig::hard_limit_bytes`]
    /// (the most one session can buffer) for its lifetime, so all sessions together never
    /// buffer more than the budget.
    pub(crate) slots: FairShare,
    /// On shutdown every session closes with 1001 (going away); the server waits for them.
    pub(crate) shutdown: Shutdown,
}

/// Granularity of the buffered-bytes budget (reservations are rounded up to it).
pub const BUDGET_UNIT_BYTES: usize = 4096;

fn budget_units(bytes: usize) -> usize {
    bytes.div_ceil(BUDGET_UNIT_BYTES)
}

impl WsConfig {
    /// Sessions the buffered-bytes budget holds, each reserving its hard limit.
    pub fn budget_sessions(&self) -> usize {
        budget_units(self.max_buffered_bytes) / budget_units(self.hard_limit_bytes()).max(1)
    }
}

/// Why a WebSocket session could not be opened.
#[derive(Debug)]
pub enum WsRefusal {
    /// Refused at the upgrade, with a 503 naming the share.
    Http(ApiError),
    /// Every session slot is taken: the upgrade goes ahead and the session is answered with a
    /// `CAPACITY_REACHED` error and close 1013 (OpenEnv's way).
    Full,
}

impl WsRuntime {
    pub fn new(config: WsConfig, shutdown: Shutdown) -> Self {
        let config = WsConfig {
            max_sessions: config.max_sessions.max(1),
            max_buffered_bytes: config.max_buffered_bytes.max(1),
            ..config
        };
        let capacity = config.max_sessions.min(config.budget_sessions());
        Self {
            slots: FairShare::new(ShareLimits::new(capacity, config.max_sessions_per_client)),
            config,
            shutdown,
        }
    }

    /// A session slot for a client (`None`: unknown, only the capacity applies).
    pub fn acquire(&self, client: Option<ClientKey>) -> Result<Slot, WsRefusal> {
        let cfg = self.config;
        self.slots.try_acquire(client).map_err(|refusal| match refusal {
            Refusal::ClientCap(n) => WsRefusal::Http(ApiError::Capacity(format!(
                "too many WebSocket sessions from this address (at most {n})"
            ))),
            Refusal::Reserved { reserve, few } => WsRefusal::Http(ApiError::Capacity(format!(
                "too many WebSocket sessions from this address while the server is nearly full (its last {reserve} sessions are kept for clients holding fewer than {few})"
            ))),
            Refusal::Full(_) if cfg.budget_sessions() < cfg.max_sessions => {
                WsRefusal::Http(ApiError::BufferBudgetExhausted {
                    budget_bytes: cfg.max_buffered_bytes,
                    per_session_bytes: cfg.hard_limit_bytes(),
                })
            }
            Refusal::Full(_) => WsRefusal::Full,
        })
    }

    /// Number of open WebSocket sessions.
    pub fn active(&self) -> usize {
        self.slots.taken()
    }
}
