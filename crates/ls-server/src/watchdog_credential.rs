//! The watchdog credential: a random token that lets a second agent play the watchdog on an
//! analyst's episodes (over HTTP in `X-Watchdog-Credential`, over WebSocket in `attach`). It is
//! issued only to whoever holds something the analyst never sees: the harness that created the
//! analyst's session for a dual-agent run (`POST /watchdog/pair` answers the session id for the
//! analyst, and the credential and a **harness token** for the harness), or the operator key. The
//! analyst's session id alone can neither issue, use nor revoke one.
//!
//! Tokens come from the OS random source and are tied to the analyst's environment, held
//! weakly, not to its session id: a credential dies with the analyst's connection or session, and
//! issuing a new one revokes the previous one.

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
            CredentialError::Unknown | CredentialError::Revoked => "unknown or revoked watchdog credential: POST /watchdog/pair issues one to the harness (the operator key issues one with POST /watchdog/credential); the analyst's session id or the admin key is not a credential".into(),
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
/// Harness tokens: token → the environment of the session `POST /watchdog/pair` created (one per
/// environment, dropped with it).
#[derive(Default)]
pub struct WatchdogCredentials {
    inner: Mutex<HashMap<String, Held>>,
    harness: Mutex<HashMap<String, Weak<Mutex<Environment>>>>,
}

/// Why a harness token does not name a dual-agent session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HarnessError {
    /// Never issued (a guess, a session id, a watchdog credential).
    Unknown,
    /// The session it was issued with has closed.
    SessionClosed,
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

    /// A harness token for `env` (a dual-agent session): whoever holds it may issue the
    /// session's watchdog credential again ([`WatchdogCredentials::harness_env`]). Tokens of
    /// environments that are gone are dropped, so the map is bounded by the live sessions.
    pub fn harness_token(&self, env: &SharedBackend<Environment>) -> String {
        let token = SessionManager::<Environment>::new_id("wdh");
        let mut map = self.harness.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, e| e.strong_count() > 0);
        map.insert(token.clone(), Arc::downgrade(env));
        token
    }

    /// The dual-agent session's environment behind a harness token.
    pub fn harness_env(&self, token: &str) -> Result<SharedBackend<Environment>, HarnessError> {
        let map = self.harness.lock().unwrap_or_else(|p| p.into_inner());
        map.get(token)
            .ok_or(HarnessError::Unknown)?
            .upgrade()
            .ok_or(HarnessError::SessionClosed)
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

/// Whether `s` has the shape of an issued token with `prefix` (`wdc`: a watchdog credential,
/// `wdh`: a harness token): the prefix, `-` and 32 lowercase hex digits.
pub fn token_shaped(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| {
            hex.len() == 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
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
        let harness = creds.harness_token(&env);
        assert!(token_shaped(&harness, "wdh") && !token_shaped(&harness, "wdc"));
        assert!(Arc::ptr_eq(&creds.harness_env(&harness).unwrap(), &env));
        assert_eq!(
            creds.harness_env(&third).err(),
            Some(HarnessError::Unknown),
            "a credential is not a harness token"
        );
        drop(env);
        assert_eq!(
            creds.resolve(&third).err(),
            Some(CredentialError::AnalystClosed)
        );
        assert_eq!(
            creds.harness_env(&harness).err(),
            Some(HarnessError::SessionClosed)
        );
        let e = ApiError::from(CredentialError::AnalystClosed);
        assert!(e.to_string().contains("has closed"), "{e}");
    }
}
