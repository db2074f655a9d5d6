//! Bounded retries with jittered exponential backoff.
//!
//! A thousand nodes booting together must not hit the API server or the
//! bucket in waves: every delay is "equal jitter" (half the exponential step
//! fixed, half uniformly random), capped, and a server's `Retry-After` is
//! honoured as a floor up to [`RETRY_AFTER_CAP`] (five minutes), whatever
//! the policy's own cap: a server that asks for more time than the
//! backoff would give gets it. Every retry is logged with its attempt number,
//! the delay and the error, and counted by the service it was against
//! (`node_bootstrap_retries_total{cause}`, [`crate::metrics`]).

use crate::error::Error;
use crate::metrics::Remote;
use std::future::Future;
use std::time::{Duration, Instant};

/// The longest `Retry-After` honoured (README "Configuration"): a server
/// asking for more is asked again after this long. A cap, because a
/// wrong or hostile header must not park a node for hours; five minutes
/// is above what kube-apiserver (1 s), S3 or a mirror ask for in practice.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(300);

/// How long to wait between attempts, and how many to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// First step of the exponential schedule.
    pub initial: Duration,
    /// Cap of a single delay.
    pub max_delay: Duration,
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// Give up once this much time has passed since the first attempt.
    pub deadline: Option<Duration>,
}

impl RetryPolicy {
    pub const fn new(initial: Duration, max_delay: Duration, max_attempts: u32) -> Self {
        RetryPolicy {
            initial,
            max_delay,
            max_attempts,
            deadline: None,
        }
    }

    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The un-jittered step before attempt `attempt + 1` (attempt counts from 1).
    pub fn step(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        self.initial.saturating_mul(1u32 << exp).min(self.max_delay)
    }

    /// The jittered delay after failed attempt `attempt`: uniformly in
    /// `[step/2, step]`, with `r` in `[0, 1)` supplying the randomness.
    pub fn delay_with(&self, attempt: u32, r: f64) -> Duration {
        let step = self.step(attempt);
        let half = step / 2;
        half + half.mul_f64(r.clamp(0.0, 1.0))
    }

    pub fn delay(&self, attempt: u32) -> Duration {
        self.delay_with(attempt, fastrand::f64())
    }
}

/// What a failed attempt means for the next one.
#[derive(Debug)]
pub enum Attempt {
    /// Try again (after the backoff, or at least `after`, up to
    /// [`RETRY_AFTER_CAP`], if the server said so).
    Retry {
        error: Error,
        after: Option<Duration>,
    },
    /// Do not try again.
    Fail(Error),
}

impl Attempt {
    pub fn retry(error: Error) -> Self {
        Attempt::Retry { error, after: None }
    }
}

/// Runs `op` until it succeeds, fails for good, or the policy runs out.
/// `what` names the operation in logs and in the final error; `remote` is
/// the service it asks, whose retries the metrics count.
pub async fn retry<T, F, Fut>(
    remote: Remote,
    policy: RetryPolicy,
    what: &str,
    mut op: F,
) -> Result<T, Error>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Attempt>>,
{
    let start = Instant::now();
    let mut attempt = 1u32;
    loop {
        let (error, after) = match op(attempt).await {
            Ok(v) => return Ok(v),
            Err(Attempt::Fail(e)) => return Err(e),
            Err(Attempt::Retry { error, after }) => (error, after),
        };
        if attempt >= policy.max_attempts {
            return Err(error.context(format!("{what} failed after {attempt} attempts")));
        }
        let mut delay = policy.delay(attempt);
        if let Some(after) = after {
            // The server's Retry-After is a floor, with the jitter kept on
            // top: a fleet told "come back in 3 s" must not come back in
            // one wave (tests/host/fleet_retries.rs). Capped by
            // RETRY_AFTER_CAP, not by the policy's own maximum: the server
            // knows better than the backoff when it has room again.
            let jitter = delay.saturating_sub(policy.step(attempt) / 2);
            delay = delay.max(after.min(RETRY_AFTER_CAP) + jitter);
        }
        if let Some(deadline) = policy.deadline
            && start.elapsed() + delay > deadline
        {
            return Err(error.context(format!(
                "{what} failed after {attempt} attempts ({}s deadline reached)",
                deadline.as_secs()
            )));
        }
        tracing::warn!(operation = what, cause = remote.name(), attempt, delay_ms = delay.as_millis() as u64, error = %error, "retrying");
        crate::metrics::record::retried(remote);
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

/// A bounded wait for something another party brings about (an object
/// uploaded, access granted, a bootstrap token's Secret applied): each
/// [`next`](Self::next) gives the delay before asking again, at least a
/// second and growing with `policy`'s jittered backoff, until waiting it
/// would pass the limit. Unlike [`retry`] it counts time, not attempts:
/// the limits are operators' settings in seconds.
pub struct BoundedWait {
    policy: RetryPolicy,
    started: tokio::time::Instant,
    waits: u32,
}

impl BoundedWait {
    pub fn new(policy: RetryPolicy) -> Self {
        BoundedWait {
            policy,
            started: tokio::time::Instant::now(),
            waits: 0,
        }
    }

    /// `(wait number, delay)` of the next wait, or `err` as the final
    /// error once waiting the delay would pass `limit`: as it is when the
    /// limit is zero (no waiting was asked for), else with
    /// `gave_up(seconds waited)` as context.
    pub fn next(
        &mut self,
        limit: Duration,
        err: Error,
        gave_up: impl FnOnce(u64) -> String,
    ) -> Result<(u32, Duration), Error> {
        let waits = self.waits + 1;
        let delay = self.policy.delay(waits).max(Duration::from_secs(1));
        let waited = self.started.elapsed();
        if waited + delay > limit {
            if limit.is_zero() {
                return Err(err);
            }
            return Err(err.context(gave_up(waited.as_secs())));
        }
        self.waits = waits;
        Ok((waits, delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_bounded_wait_waits_a_second_or_more_until_its_limit() {
        let mut w = BoundedWait::new(P);
        let e = || Error::retryable("not there yet");
        let err = w.next(Duration::ZERO, e(), |s| format!("{s}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "not there yet",
            "no wait asked for: as it is"
        );
        let mut waits = Vec::new();
        let err = loop {
            match w.next(Duration::from_secs(20), e(), |s| {
                format!("gave up after {s}s")
            }) {
                Ok((n, d)) => {
                    assert!(d >= Duration::from_secs(1), "{d:?}");
                    waits.push(n);
                    tokio::time::advance(d).await;
                }
                Err(err) => break err,
            }
        };
        assert!(waits.len() >= 3 && waits[0] == 1, "{waits:?}");
        assert!(w.started.elapsed() <= Duration::from_secs(20));
        assert_eq!(
            err.to_string(),
            format!(
                "gave up after {}s: not there yet",
                w.started.elapsed().as_secs()
            )
        );
    }

    const P: RetryPolicy = RetryPolicy::new(Duration::from_secs(1), Duration::from_secs(30), 10);

    #[test]
    fn steps_grow_exponentially_to_the_cap() {
        let steps: Vec<u64> = (1..=7).map(|a| P.step(a).as_secs()).collect();
        assert_eq!(steps, vec![1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn jitter_stays_within_half_to_full_step() {
        assert_eq!(P.delay_with(3, 0.0), Duration::from_secs(2));
        assert_eq!(P.delay_with(3, 0.999_999).as_millis(), 3999);
        for _ in 0..1000 {
            let d = P.delay(4);
            assert!(
                d >= Duration::from_secs(4) && d <= Duration::from_secs(8),
                "{d:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_naming_the_operation() {
        let policy = RetryPolicy::new(Duration::from_millis(10), Duration::from_millis(20), 3);
        let mut calls = 0;
        let err = retry(Remote::Mirror, policy, "GET /version", |_| {
            calls += 1;
            async { Err::<(), _>(Attempt::retry(Error::retryable("connection refused"))) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 3);
        assert_eq!(
            err.to_string(),
            "GET /version failed after 3 attempts: connection refused"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fail_stops_at_once_and_success_returns() {
        let mut calls = 0;
        let err = retry(Remote::Mirror, P, "x", |_| {
            calls += 1;
            async { Err::<(), _>(Attempt::Fail(Error::bad_input("404"))) }
        })
        .await
        .unwrap_err();
        assert_eq!((calls, err.to_string().as_str()), (1, "404"));
        let v = retry(Remote::Mirror, P, "x", |a| async move {
            if a < 3 {
                Err(Attempt::retry(Error::retryable("e")))
            } else {
                Ok(a)
            }
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured_within_the_cap() {
        let policy = RetryPolicy::new(Duration::from_millis(1), Duration::from_secs(5), 2);
        let t0 = tokio::time::Instant::now();
        let _ = retry(Remote::Mirror, policy, "x", |a| async move {
            if a == 1 {
                Err(Attempt::Retry {
                    error: Error::retryable("503"),
                    after: Some(Duration::from_secs(3)),
                })
            } else {
                Ok(())
            }
        })
        .await;
        assert!(t0.elapsed() >= Duration::from_secs(3));
    }

    /// What the server asks for wins over the policy's own cap (here 1 s),
    /// up to RETRY_AFTER_CAP.
    #[tokio::test(start_paused = true)]
    async fn retry_after_beyond_the_policys_cap_is_honoured_up_to_five_minutes() {
        let policy = RetryPolicy::new(Duration::from_secs(1), Duration::from_secs(1), 2);
        for (asked, floor, ceiling) in [(60, 60, 61), (300, 300, 301), (3600, 300, 301)] {
            let t0 = tokio::time::Instant::now();
            let _ = retry(Remote::ApiServer, policy, "x", |a| async move {
                if a == 1 {
                    Err(Attempt::Retry {
                        error: Error::retryable("429"),
                        after: Some(Duration::from_secs(asked)),
                    })
                } else {
                    Ok(())
                }
            })
            .await;
            let waited = t0.elapsed();
            assert!(
                waited >= Duration::from_secs(floor) && waited <= Duration::from_secs(ceiling),
                "Retry-After {asked} s: waited {waited:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_keeps_the_jitter_on_top() {
        let policy = RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(10), 2);
        let mut waits = Vec::new();
        for _ in 0..50 {
            let t0 = tokio::time::Instant::now();
            let _ = retry(Remote::Mirror, policy, "x", |a| async move {
                if a == 1 {
                    Err(Attempt::Retry {
                        error: Error::retryable("429"),
                        after: Some(Duration::from_secs(3)),
                    })
                } else {
                    Ok(())
                }
            })
            .await;
            waits.push(t0.elapsed());
        }
        let min = *waits.iter().min().unwrap();
        let max = *waits.iter().max().unwrap();
        assert!(min >= Duration::from_secs(3), "{min:?}");
        assert!(max <= Duration::from_secs(4), "{max:?}");
        assert!(max - min >= Duration::from_millis(500), "{min:?}..{max:?}");
    }
}
