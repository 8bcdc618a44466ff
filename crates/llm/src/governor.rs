//! One gate per provider, shared by every task of a run, so `--jobs 32` does not become a storm
//! of 429s: a cap on concurrent requests, a requests-per-minute pace, and quota handling — once
//! a provider reports its quota exhausted, later calls to it wait for the reset it gave (when
//! that is soon) or fail at once with kind `quota`, instead of each task burning its retries.

use super::{BoxFuture, ErrorKind, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The longest quota reset the run waits for; a later one fails the remaining calls fast.
pub const MAX_QUOTA_PAUSE: Duration = Duration::from_secs(300);

/// Limits of one provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Requests in flight at once.
    pub max_concurrent: Option<usize>,
    /// Requests started per minute.
    pub requests_per_minute: Option<u32>,
}

/// The shared state of one provider.
#[derive(Debug)]
pub struct Gate {
    slots: Option<Semaphore>,
    interval: Option<Duration>,
    next_start: Mutex<Instant>,
    quota: Mutex<Quota>,
}

#[derive(Debug, Clone)]
enum Quota {
    Available,
    PausedUntil(Instant),
    Exhausted(String),
}

impl Gate {
    /// A gate enforcing `limits`.
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Gate {
            slots: limits.max_concurrent.filter(|n| *n > 0).map(Semaphore::new),
            interval: limits.requests_per_minute.filter(|n| *n > 0).map(|n| Duration::from_secs(60) / n),
            next_start: Mutex::new(Instant::now()),
            quota: Mutex::new(Quota::Available),
        })
    }

    /// Waits until a request may start, or fails when the quota is known to be exhausted.
    async fn admit(&self) -> Result<Option<tokio::sync::SemaphorePermit<'_>>, LlmError> {
        let quota = self.quota.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        match quota {
            Quota::Exhausted(message) => {
                return Err(LlmError::new(ErrorKind::Quota, format!("not sent: {message} (reported earlier in this run)")));
            }
            Quota::PausedUntil(until) => tokio::time::sleep_until(until.into()).await,
            Quota::Available => {}
        }
        let permit = match &self.slots {
            Some(slots) => Some(slots.acquire().await.map_err(|_| LlmError::new(ErrorKind::Internal, "provider gate closed"))?),
            None => None,
        };
        if let Some(interval) = self.interval {
            let start = {
                let mut next = self.next_start.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let start = (*next).max(Instant::now());
                *next = start + interval;
                start
            };
            tokio::time::sleep_until(start.into()).await;
        }
        Ok(permit)
    }

    /// Remembers a quota failure for every later call.
    fn note(&self, error: &LlmError) {
        if error.kind != ErrorKind::Quota {
            return;
        }
        let mut quota = self.quota.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *quota = match error.retry_after.filter(|d| *d <= MAX_QUOTA_PAUSE) {
            Some(wait) => Quota::PausedUntil(Instant::now() + wait),
            None => Quota::Exhausted(error.message.clone()),
        };
    }
}

/// A provider behind its gate.
pub struct Governed {
    inner: Arc<dyn Provider>,
    gate: Arc<Gate>,
}

impl Governed {
    /// `inner`, admitted through `gate`.
    pub fn new(inner: Arc<dyn Provider>, gate: Arc<Gate>) -> Self {
        Governed { inner, gate }
    }
}

impl Provider for Governed {
    fn complete<'a>(&'a self, request: LlmRequest<'a>, on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        Box::pin(async move {
            let _permit = self.gate.admit().await?;
            let result = self.inner.complete(request, on_retry).await;
            if let Err(e) = &result {
                self.gate.note(e);
            }
            result
        })
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentBlock, StopReason, Usage};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts concurrent calls; fails with `error` when given one.
    struct Probe {
        in_flight: AtomicUsize,
        peak: AtomicUsize,
        calls: AtomicUsize,
        error: Option<LlmError>,
    }

    impl Provider for Probe {
        fn complete<'a>(&'a self, _r: LlmRequest<'a>, _o: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                match &self.error {
                    Some(e) => Err(e.clone()),
                    None => Ok(LlmResponse {
                        content: vec![ContentBlock::text("ok")],
                        stop_reason: StopReason::EndTurn,
                        usage: Usage::default(),
                        model: None,
                    }),
                }
            })
        }
        fn model(&self) -> &str {
            "probe"
        }
    }

    fn probe(error: Option<LlmError>) -> Arc<Probe> {
        Arc::new(Probe { in_flight: 0.into(), peak: 0.into(), calls: 0.into(), error })
    }

    async fn call_many(provider: Arc<Governed>, n: usize) -> Vec<Result<LlmResponse, LlmError>> {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let p = provider.clone();
                tokio::spawn(async move {
                    let req = LlmRequest { system: "", messages: &[], tools: &[], max_tokens: None };
                    p.complete(req, &|_| {}).await
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrency_is_capped_across_tasks() {
        let inner = probe(None);
        let gate = Gate::new(Limits { max_concurrent: Some(2), requests_per_minute: None });
        let governed = Arc::new(Governed::new(inner.clone(), gate));
        assert!(call_many(governed, 8).await.iter().all(Result::is_ok));
        assert_eq!(inner.peak.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn requests_per_minute_paces_starts() {
        let gate = Gate::new(Limits { max_concurrent: None, requests_per_minute: Some(1200) });
        let governed = Arc::new(Governed::new(probe(None), gate));
        let started = Instant::now();
        call_many(governed, 5).await;
        // 1200/min = one start per 50 ms: the fifth starts ≥ 200 ms after the first.
        assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn an_exhausted_quota_fails_later_calls_without_sending() {
        let quota = LlmError::new(ErrorKind::Quota, "insufficient_quota");
        let inner = probe(Some(quota));
        let governed = Arc::new(Governed::new(inner.clone(), Gate::new(Limits::default())));
        let req = LlmRequest { system: "", messages: &[], tools: &[], max_tokens: None };
        assert_eq!(governed.complete(req, &|_| {}).await.unwrap_err().kind, ErrorKind::Quota);
        let second = governed.complete(req, &|_| {}).await.unwrap_err();
        assert_eq!(second.kind, ErrorKind::Quota);
        assert!(second.message.starts_with("not sent"));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
    }
}
