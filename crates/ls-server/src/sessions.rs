//! Sessions: each owns an isolated environment (episode, curriculum, institutional memory).
//! Bounded in number; idle sessions expire. Requests without a session id use `default`.

use crate::error::ApiError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const DEFAULT_SESSION: &str = "default";
/// Longest accepted session id.
pub const MAX_SESSION_ID_CHARS: usize = 128;

struct Entry<E> {
    env: Arc<Mutex<E>>,
    last_used: Instant,
}

/// A bounded map of session id → environment.
pub struct SessionManager<E> {
    inner: Mutex<HashMap<String, Entry<E>>>,
    pub max_sessions: usize,
    pub idle_timeout: Duration,
}

impl<E> SessionManager<E> {
    pub fn new(max_sessions: usize, idle_timeout: Duration) -> Self {
        assert!(max_sessions >= 1, "at least one session");
        Self { inner: Mutex::new(HashMap::new()), max_sessions, idle_timeout }
    }

    pub fn validate_id(id: &str) -> Result<(), ApiError> {
        if id.is_empty() || id.chars().count() > MAX_SESSION_ID_CHARS || !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c)) {
            return Err(ApiError::BadRequest(format!(
                "session id must be 1-{MAX_SESSION_ID_CHARS} characters of letters, digits, '-', '_', '.', ':'"
            )));
        }
        Ok(())
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

    /// Get or create a session; creation fails cleanly at capacity.
    pub fn get_or_create(&self, id: &str, make: impl FnOnce() -> E) -> Result<Arc<Mutex<E>>, ApiError> {
        if let Some(e) = self.get(id) {
            return Ok(e);
        }
        let mut map = self.lock();
        if map.len() >= self.max_sessions {
            let ttl = self.idle_timeout;
            map.retain(|sid, e| sid == DEFAULT_SESSION || e.last_used.elapsed() < ttl);
            if map.len() >= self.max_sessions {
                return Err(ApiError::TooManySessions(map.len()));
            }
        }
        let env = Arc::new(Mutex::new(make()));
        map.insert(id.to_owned(), Entry { env: env.clone(), last_used: Instant::now() });
        Ok(env)
    }

    pub fn remove(&self, id: &str) -> bool {
        self.lock().remove(id).is_some()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
        m.get_or_create("a", || 1).unwrap();
        m.get_or_create("b", || 2).unwrap();
        assert!(matches!(m.get_or_create("c", || 3), Err(ApiError::TooManySessions(2))));
        std::thread::sleep(Duration::from_millis(40));
        assert!(m.get_or_create("c", || 3).is_ok(), "idle sessions are reclaimed");
        assert!(m.get("a").is_none());
    }

    #[test]
    fn ids_are_validated() {
        assert!(SessionManager::<u32>::validate_id("abc-1_2.x:y").is_ok());
        assert!(SessionManager::<u32>::validate_id("bad id").is_err());
        assert!(SessionManager::<u32>::validate_id("").is_err());
    }
}
