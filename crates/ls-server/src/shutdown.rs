//! Graceful shutdown: one signal shared by the accept loop, every connection and every
//! WebSocket session, plus a count of what is still live so the server can wait for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// A shutdown signal and the number of live connections and WebSocket sessions.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
    live: Arc<AtomicUsize>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(false)),
            live: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Start shutting down: stop accepting, finish in-flight requests, close WebSockets (1001).
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once [`Shutdown::trigger`] has been called (at once if it already was).
    pub async fn triggered(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives as long as `self`, so `wait_for` only returns once the flag is set.
        let _ = rx.wait_for(|set| *set).await;
    }

    /// Count one live connection or session until the guard drops.
    pub fn track(&self) -> LiveGuard {
        self.live.fetch_add(1, Ordering::AcqRel);
        LiveGuard(self.live.clone())
    }

    /// Live connections and WebSocket sessions.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

/// Decrements the live count when dropped.
#[derive(Debug)]
pub struct LiveGuard(Arc<AtomicUsize>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn trigger_wakes_waiters_and_guards_count() {
        let s = Shutdown::new();
        let g = s.track();
        assert_eq!(s.live(), 1);
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.triggered().await }
        });
        assert!(!s.is_triggered());
        s.trigger();
        waiter.await.unwrap();
        assert!(s.is_triggered());
        s.triggered().await;
        drop(g);
        assert_eq!(s.live(), 0);
    }
}
