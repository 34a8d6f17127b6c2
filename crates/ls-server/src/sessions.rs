//! Sessions: each owns an isolated environment (episode, curriculum, institutional memory).
//! Bounded in number; idle sessions expire. Requests without a session id use `default`, which
//! is reserved outside the named-session capacity and never expires. One manager serves both
//! environments, their HTTP routes and `POST /mcp` alike.
//!
//! No client can take the capacity: each named session belongs to the client that created it
//! ([`ClientKey`]: its address, an IPv6 address by its /64), a client holding its quota gives
//! up its own least recently used session for a new one, and a full map gives up the least
//! recently used session of the client holding the most ([`crate::capacity::make_room`]), so a
//! new client is served before anyone is refused.

use crate::capacity::{make_room, ClientKey, Held, Room};
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const DEFAULT_SESSION: &str = "default";
/// Longest accepted session id.
pub const MAX_SESSION_ID_CHARS: usize = 128;

struct Entry<E> {
    env: Arc<Mutex<E>>,
    last_used: Instant,
    /// The client that created it (`None`: unknown, counted toward the capacity only).
    owner: Option<ClientKey>,
    _live: crate::metrics::LiveSession,
}

/// A bounded map of session id → environment.
pub struct SessionManager<E> {
    inner: Mutex<HashMap<String, Entry<E>>>,
    pub max_sessions: usize,
    /// Named sessions one client may hold (its least recently used one goes for a new one).
    pub per_client: usize,
    pub idle_timeout: Duration,
}

/// Default quota of named sessions per client: a quarter of the capacity.
pub fn default_per_client(max_sessions: usize) -> usize {
    (max_sessions / 4).max(1)
}

impl<E> SessionManager<E> {
    pub fn new(max_sessions: usize, idle_timeout: Duration) -> Self {
        assert!(max_sessions >= 1, "at least one session");
        Self {
            inner: Mutex::new(HashMap::new()),
            max_sessions,
            per_client: default_per_client(max_sessions),
            idle_timeout,
        }
    }

    /// The same map with `per_client` named sessions per client.
    pub fn with_per_client(mut self, per_client: usize) -> Self {
        self.per_client = per_client.max(1);
        self
    }

    pub fn validate_id(id: &str) -> Result<(), ApiError> {
        validate_id(id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry<E>>> {
        // A poisoned map only means a handler panicked mid-insert; the map itself stays valid.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drop sessions idle longer than the timeout (the default session is kept).
    pub fn sweep(&self) -> usize {
        let mut map = self.lock();
        let before = map.len();
        let ttl = self.idle_timeout;
        map.retain(|id, e| id == DEFAULT_SESSION || e.last_used.elapsed() < ttl);
        before - map.len()
    }

    /// Get an existing session.
    pub fn get(&self, id: &str) -> Option<Arc<Mutex<E>>> {
        let mut map = self.lock();
        let e = map.get_mut(id)?;
        if id != DEFAULT_SESSION && e.last_used.elapsed() >= self.idle_timeout {
            map.remove(id);
            return None;
        }
        e.last_used = Instant::now();
        Some(e.env.clone())
    }

    /// Get or create a session for `owner` (the client creating it). A client at its quota
    /// gives up its least recently used session; a full map gives up the least recently used
    /// session of the client holding the most, and creation fails cleanly only when every
    /// client holds no more than this one. The default session does not count toward the
    /// capacity, so named sessions never lock out clients without one.
    pub fn get_or_create(
        &self,
        id: &str,
        owner: Option<ClientKey>,
        make: impl FnOnce() -> E,
    ) -> Result<Arc<Mutex<E>>, ApiError> {
        if let Some(e) = self.get(id) {
            return Ok(e);
        }
        let mut map = self.lock();
        if let Some(e) = map.get(id) {
            // Created by another request since `get`.
            return Ok(e.env.clone());
        }
        if id != DEFAULT_SESSION {
            self.make_room(&mut map, owner)?;
        }
        let env = Arc::new(Mutex::new(make()));
        map.insert(
            id.to_owned(),
            Entry {
                env: env.clone(),
                last_used: Instant::now(),
                owner: if id == DEFAULT_SESSION { None } else { owner },
                _live: crate::metrics::LiveSession::new(),
            },
        );
        Ok(env)
    }

    /// Room for one more named session of `owner` (see [`SessionManager::get_or_create`]).
    fn make_room(
        &self,
        map: &mut HashMap<String, Entry<E>>,
        owner: Option<ClientKey>,
    ) -> Result<(), ApiError> {
        let named =
            |m: &HashMap<String, Entry<E>>| m.len() - usize::from(m.contains_key(DEFAULT_SESSION));
        // Below the smaller of quota and capacity nobody can be at either: nothing to count.
        if named(map) < self.per_client.min(self.max_sessions) {
            return Ok(());
        }
        if named(map) >= self.max_sessions {
            let ttl = self.idle_timeout;
            map.retain(|sid, e| sid == DEFAULT_SESSION || e.last_used.elapsed() < ttl);
        }
        let held = map
            .iter()
            .filter(|(sid, _)| *sid != DEFAULT_SESSION)
            .map(|(sid, e)| Held {
                id: sid,
                owner: e.owner,
                last_used: e.last_used,
                finished: false,
            });
        match make_room(held, owner, self.per_client, self.max_sessions) {
            Room::Free => Ok(()),
            Room::Evict(victim) => {
                map.remove(&victim);
                tracing::debug!(
                    client = owner.map(|o| o.to_string()),
                    "session capacity: closed a least recently used session to make room"
                );
                Ok(())
            }
            Room::Full => Err(ApiError::TooManySessions(named(map))),
        }
    }

    /// Close a session now (`DELETE /session`). The default session is only emptied: a fresh
    /// environment replaces it on next use.
    pub fn remove(&self, id: &str) -> bool {
        self.lock().remove(id).is_some()
    }

    /// A fresh session id from the operating system's random source (122 random bits).
    pub fn new_id(prefix: &str) -> String {
        format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub const SESSION_HEADER: &str = "x-session-id";

/// The `X-Session-Id` header alone, the only header the session routes read (axum's
/// `HeaderMap` extractor would copy the whole map on every request).
pub struct SessionHeader(pub Option<HeaderValue>);

impl<S: Send + Sync> FromRequestParts<S> for SessionHeader {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(SessionHeader(parts.headers.get(SESSION_HEADER).cloned()))
    }
}

impl SessionHeader {
    /// The session id: the header, else a body field, else the default session; `true` when one
    /// was named. A non-ASCII header or an invalid id is a 400.
    pub fn session_id(&self, body_field: Option<&str>) -> Result<(String, bool), ApiError> {
        let header = match &self.0 {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| ApiError::BadRequest("X-Session-Id must be ASCII".into()))?
                    .trim()
                    .to_owned(),
            ),
            None => None,
        };
        match header.or_else(|| body_field.map(str::to_owned)) {
            Some(id) => {
                validate_id(&id)?;
                Ok((id, true))
            }
            None => Ok((DEFAULT_SESSION.to_owned(), false)),
        }
    }
}

/// A session id is 1-128 characters of letters, digits, '-', '_', '.', ':'.
pub fn validate_id(id: &str) -> Result<(), ApiError> {
    if id.is_empty()
        || id.chars().count() > MAX_SESSION_ID_CHARS
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(ApiError::BadRequest(format!("session id must be 1-{MAX_SESSION_ID_CHARS} characters of letters, digits, '-', '_', '.', ':'")));
    }
    Ok(())
}

/// Lock a session's environment, recovering from poisoning (a panic never loses the session).
pub fn lock_env<E>(env: &Mutex<E>) -> std::sync::MutexGuard<'_, E> {
    env.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_and_expiry() {
        let m: SessionManager<u32> = SessionManager::new(2, Duration::from_millis(30));
        m.get_or_create("a", None, || 1).unwrap();
        m.get_or_create("b", None, || 2).unwrap();
        assert!(matches!(
            m.get_or_create("c", None, || 3),
            Err(ApiError::TooManySessions(2))
        ));
        std::thread::sleep(Duration::from_millis(40));
        assert!(
            m.get_or_create("c", None, || 3).is_ok(),
            "idle sessions are reclaimed"
        );
        assert!(m.get("a").is_none());
    }

    #[test]
    fn default_session_is_outside_capacity_and_ids_are_random() {
        let m: SessionManager<u32> = SessionManager::new(1, Duration::from_secs(60));
        m.get_or_create("a", None, || 1).unwrap();
        assert!(m.get_or_create("b", None, || 2).is_err());
        assert!(
            m.get_or_create(DEFAULT_SESSION, None, || 0).is_ok(),
            "the default session is reserved"
        );
        assert!(m.remove("a"));
        assert!(
            m.get_or_create("b", None, || 2).is_ok(),
            "a closed session frees its slot at once"
        );
        let (x, y) = (
            SessionManager::<u32>::new_id("sess"),
            SessionManager::<u32>::new_id("sess"),
        );
        assert_ne!(x, y);
        assert!(validate_id(&x).is_ok() && x.len() == 37, "{x}");
    }

    /// One client creating sessions without end recycles its own; another client still gets
    /// one when the map is full (the heaviest client's least recently used session goes).
    #[test]
    fn no_client_takes_the_capacity() {
        let key = |s: &str| Some(ClientKey::of(s.parse().unwrap()));
        let m: SessionManager<u32> = SessionManager::new(8, Duration::from_secs(600));
        assert_eq!(m.per_client, 2);
        let m = m.with_per_client(4);
        for i in 0..100 {
            m.get_or_create(&format!("a{i}"), key("10.0.0.1"), || i)
                .unwrap();
        }
        assert_eq!(m.len(), 4, "a client holds its quota, newest kept");
        assert!(m.get("a99").is_some(), "the newest is kept");
        for i in 0..4 {
            m.get_or_create(&format!("b{i}"), key("10.0.0.2"), || i)
                .unwrap();
        }
        assert_eq!(m.len(), 8);
        // Full: a third client gets a session; the heaviest's least recently used one goes.
        m.get("b0");
        m.get_or_create("c0", key("10.0.0.3"), || 0).unwrap();
        assert_eq!(m.len(), 8);
        assert!(m.get("c0").is_some());
        // Another address of the same IPv6 /64 is the same client.
        let m: SessionManager<u32> = SessionManager::new(8, Duration::from_secs(600));
        m.get_or_create("x", key("2001:db8::1"), || 0).unwrap();
        m.get_or_create("y", key("2001:db8::2"), || 0).unwrap();
        m.get_or_create("z", key("2001:db8::3"), || 0).unwrap();
        assert_eq!(m.len(), 2, "{} sessions", m.len());
    }

    #[test]
    fn ids_are_validated() {
        assert!(SessionManager::<u32>::validate_id("abc-1_2.x:y").is_ok());
        assert!(SessionManager::<u32>::validate_id("bad id").is_err());
        assert!(SessionManager::<u32>::validate_id("").is_err());
    }
}
