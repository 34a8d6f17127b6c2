//! The watchdog credential: a random token an analyst's session issues so that a second agent can
//! play the watchdog on that session's episodes (over HTTP in `X-Watchdog-Credential`, over
//! WebSocket in `attach`). The token comes from the OS random source and is tied to the analyst's
//! environment, held weakly, not to its session id: a credential dies with the analyst's
//! connection or session, and issuing a new one revokes the previous one.

use crate::error::ApiError;
use crate::protocol::SharedBackend;
use crate::sessions::SessionManager;
use ls_env::Environment;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Path of the watchdog socket.
pub const WATCHDOG_SOCKET: &str = "/watchdog/ws";
/// Why a watchdog credential does not name an analyst's episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialError {
    /// Never issued (a guess, a session id, the admin key) or long gone.
    Unknown,
    /// Replaced by a newer credential of the same analyst.
    Revoked,
    /// The analyst's connection or session has closed.
    AnalystClosed,
}

impl From<CredentialError> for ApiError {
    /// The WebSocket's `attach` errors (`error: "forbidden"`).
    fn from(e: CredentialError) -> Self {
        ApiError::Forbidden(match e {
            CredentialError::Unknown | CredentialError::Revoked => "unknown or revoked watchdog credential: the analyst's session issues one (`{\"type\": \"watchdog_credential\"}` on /ws, or POST /watchdog/credential); its session id or the admin key is not a credential".into(),
            CredentialError::AnalystClosed => "the analyst's session behind this watchdog credential has closed".into(),
        })
    }
}

struct Held {
    /// Held weakly: a credential does not keep a closed session alive.
    env: Weak<Mutex<Environment>>,
    revoked: bool,
}

/// Live watchdog credentials: token → the analyst's environment. Each environment holds its
/// live credential and at most the one it revoked last (so a revoked one is named as such).
#[derive(Default)]
pub struct WatchdogCredentials {
    inner: Mutex<HashMap<String, Held>>,
}

impl WatchdogCredentials {
    /// A fresh credential for `env`; its live credential is revoked (the one revoked before is
    /// forgotten), and credentials of environments that are gone are dropped, so the map is
    /// bounded by twice the live sessions.
    pub fn issue(&self, env: &SharedBackend<Environment>) -> String {
        let token = SessionManager::<Environment>::new_id("wdc");
        let target = Arc::downgrade(env);
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, h| {
            h.env.strong_count() > 0 && !(h.revoked && Weak::ptr_eq(&h.env, &target))
        });
        for h in map.values_mut().filter(|h| Weak::ptr_eq(&h.env, &target)) {
            h.revoked = true;
        }
        map.insert(
            token.clone(),
            Held {
                env: target,
                revoked: false,
            },
        );
        token
    }

    /// The analyst's environment behind `token`.
    pub fn resolve(&self, token: &str) -> Result<SharedBackend<Environment>, CredentialError> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(token) {
            None => Err(CredentialError::Unknown),
            Some(h) if h.revoked => Err(CredentialError::Revoked),
            Some(h) => h.env.upgrade().ok_or(CredentialError::AnalystClosed),
        }
    }

    /// Number of credentials held (live, last revoked, or not yet pruned).
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The reply to the analyst's `watchdog_credential` message (and `POST /watchdog/credential`).
pub fn credential_reply(token: &str) -> Value {
    json!({"watchdog_credential": token, "socket": WATCHDOG_SOCKET})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_tied_to_the_environment_and_revocable() {
        let creds = WatchdogCredentials::default();
        let pool = Arc::new(ls_env::CasePool::new(
            ls_core::FixtureSet::embedded().unwrap(),
        ));
        let env = Arc::new(Mutex::new(Environment::new(
            pool,
            ls_env::EnvConfig::default(),
        )));
        let first = creds.issue(&env);
        assert!(first.starts_with("wdc-") && first.len() > 30, "{first}");
        assert!(creds.resolve(&first).is_ok());
        let second = creds.issue(&env);
        assert_ne!(first, second);
        assert_eq!(creds.resolve(&first).err(), Some(CredentialError::Revoked));
        let e = ApiError::from(CredentialError::Revoked);
        assert!(e.to_string().contains("unknown or revoked"), "{e}");
        assert!(creds.resolve(&second).is_ok());
        // Only the last revoked credential is remembered as revoked.
        let third = creds.issue(&env);
        assert_eq!(creds.resolve(&first).err(), Some(CredentialError::Unknown));
        assert_eq!(creds.resolve(&second).err(), Some(CredentialError::Revoked));
        assert_eq!(creds.len(), 2);
        assert_eq!(
            creds.resolve("wdc-guess").err(),
            Some(CredentialError::Unknown)
        );
        drop(env);
        assert_eq!(
            creds.resolve(&third).err(),
            Some(CredentialError::AnalystClosed)
        );
        let e = ApiError::from(CredentialError::AnalystClosed);
        assert!(e.to_string().contains("has closed"), "{e}");
    }
}
