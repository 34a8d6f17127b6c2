//! hyper's timer for one HTTP/1 connection: one tokio timer per connection instead of one per
//! request.
//!
//! hyper asks its timer for a fresh sleep each time it starts waiting for a request head (the
//! header-read and keep-alive idle timeout) and drops it once the head has arrived. With
//! `hyper_util`'s `TokioTimer` every request therefore registers and deregisters a timer entry in
//! tokio's timer wheel and clones and drops the runtime handle: cache lines that every worker
//! thread writes. A [`ConnectionTimer`] keeps one tokio `Sleep` for its connection, armed at the
//! earliest deadline still wanted; a later deadline does not move it, and when it fires early
//! for the sleep being polled it is re-armed at that sleep's own deadline. So a request head
//! costs no timer registration, and an idle connection wakes at most once per timeout period
//! before its own deadline.
//!
//! Deadlines are exact: a sleep never completes before its own deadline (only a wake-up may come
//! early, and it is answered by re-arming).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The connection's one tokio timer, created on first use.
type Slot = Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>;

/// A [`hyper::rt::Timer`] for a single connection (give every connection its own: the timer
/// is shared by that connection's sleeps, which hyper polls one at a time).
#[derive(Clone, Default)]
pub struct ConnectionTimer {
    slot: Slot,
}

impl hyper::rt::Timer for ConnectionTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(ConnectionSleep {
            slot: self.slot.clone(),
            deadline: deadline.into(),
        })
    }
}

/// One sleep of a [`ConnectionTimer`]: completes at `deadline`.
struct ConnectionSleep {
    slot: Slot,
    deadline: tokio::time::Instant,
}

impl hyper::rt::Sleep for ConnectionSleep {}

impl Future for ConnectionSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let timer = slot.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        // Armed later than this sleep wants (hyper's deadlines only grow, so only if the clock
        // or a caller goes backwards): move it earlier.
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        loop {
            match timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if tokio::time::Instant::now() >= deadline => {
                    return Poll::Ready(())
                }
                // Fired for an earlier sleep's deadline: re-arm at this one's and wait again.
                Poll::Ready(()) => timer.as_mut().reset(deadline),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer;

    #[tokio::test]
    async fn a_sleep_completes_at_its_own_deadline_not_an_earlier_one() {
        let timer = ConnectionTimer::default();
        let t0 = Instant::now();
        // The first sleep arms the shared timer at +50 ms and is dropped before it fires (as
        // hyper drops the header timer once a head arrives).
        let mut first = timer.sleep(Duration::from_millis(50));
        assert!(futures_poll_once(&mut first).await.is_pending());
        drop(first);
        // The next one wants +200 ms: the wake-up at +50 ms must not complete it.
        timer.sleep_until(t0 + Duration::from_millis(200)).await;
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(200),
            "completed early: {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(5),
            "never re-armed: {waited:?}"
        );
        // And a third, later deadline after the timer has fired.
        timer.sleep(Duration::from_millis(30)).await;
        assert!(t0.elapsed() >= Duration::from_millis(230));
    }

    #[tokio::test]
    async fn an_earlier_deadline_moves_the_timer_forward() {
        let timer = ConnectionTimer::default();
        let t0 = Instant::now();
        let mut late = timer.sleep(Duration::from_secs(60));
        assert!(futures_poll_once(&mut late).await.is_pending());
        // A sleep with an earlier deadline than the armed one completes at its own deadline.
        tokio::time::timeout(
            Duration::from_secs(5),
            timer.sleep(Duration::from_millis(20)),
        )
        .await
        .expect("the earlier deadline was honoured");
        assert!(t0.elapsed() >= Duration::from_millis(20));
    }

    /// Poll a boxed sleep once with the current task's waker.
    async fn futures_poll_once(s: &mut Pin<Box<dyn hyper::rt::Sleep>>) -> Poll<()> {
        std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx))).await
    }
}
