//! The load each level applies: `concurrency` clients doing a unit of work back to back, each
//! unit timed, after a warm-up that is not measured.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;

use crate::timing::{histogram, micros};

/// How long each level runs unmeasured first, to warm the connection pools and the components.
pub(crate) const WARMUP: Duration = Duration::from_millis(300);

/// What a client does once: a request, or for `flow` a whole conversation.
pub(crate) type Work = Arc<dyn Fn(usize) -> Pin<Box<dyn Future<Output = Outcome> + Send>> + Send + Sync>;

/// How one unit of work went.
pub(crate) enum Outcome {
    /// Done, with the first problem if it failed, and the time of each step of a
    /// multi-step unit.
    Done { error: Option<String>, steps: Vec<Duration> },
    /// Nothing left to do: the calls this scenario uses up have run out.
    Exhausted,
}

impl Outcome {
    pub(crate) fn single(result: Result<()>) -> Outcome {
        Outcome::Done { error: result.err().map(|e| format!("{e:#}")), steps: Vec::new() }
    }
}

/// A GET, with the token if the route needs one.
pub(crate) fn get_work(client: &reqwest::Client, url: String, token: Option<String>) -> Work {
    let client = client.clone();
    let url = Arc::new(url);
    Arc::new(move |_| {
        let mut request = client.get(url.as_str());
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        Box::pin(async move {
            let outcome = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    match response.bytes().await {
                        Ok(_) if status.is_success() => Ok(()),
                        Ok(_) => Err(anyhow::anyhow!("HTTP {status}")),
                        Err(e) => Err(e.into()),
                    }
                }
                Err(e) => Err(e.into()),
            };
            Outcome::single(outcome)
        })
    })
}

pub(crate) struct LoadResult {
    pub(crate) latency: Histogram<u64>,
    /// For multi-step work, each step's latency (successful units only).
    pub(crate) steps: Vec<Histogram<u64>>,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) exhausted: bool,
}

/// `concurrency` clients doing `work` back to back until `duration` has passed.
pub(crate) async fn run_load(work: &Work, concurrency: usize, duration: Duration, steps: usize) -> Result<LoadResult> {
    let deadline = Instant::now() + duration;
    let mut workers = Vec::with_capacity(concurrency);
    for worker in 0..concurrency {
        let work = work.clone();
        workers.push(tokio::spawn(async move {
            let mut result = LoadResult {
                latency: histogram()?,
                steps: (0..steps).map(|_| histogram()).collect::<Result<_>>()?,
                errors: 0,
                first_error: None,
                exhausted: false,
            };
            while Instant::now() < deadline {
                let sent = Instant::now();
                let outcome = work(worker).await;
                let elapsed = sent.elapsed();
                match outcome {
                    Outcome::Exhausted => {
                        result.exhausted = true;
                        break;
                    }
                    Outcome::Done { error: Some(error), .. } => {
                        result.latency.record(micros(elapsed))?;
                        result.errors += 1;
                        result.first_error.get_or_insert(error);
                    }
                    Outcome::Done { error: None, steps } => {
                        result.latency.record(micros(elapsed))?;
                        for (h, step) in result.steps.iter_mut().zip(steps) {
                            h.record(micros(step))?;
                        }
                    }
                }
            }
            anyhow::Ok(result)
        }));
    }
    let mut total = LoadResult {
        latency: histogram()?,
        steps: (0..steps).map(|_| histogram()).collect::<Result<_>>()?,
        errors: 0,
        first_error: None,
        exhausted: false,
    };
    for worker in workers {
        let result = worker.await??;
        total.latency.add(result.latency)?;
        for (sum, h) in total.steps.iter_mut().zip(result.steps) {
            sum.add(h)?;
        }
        total.errors += result.errors;
        total.exhausted |= result.exhausted;
        if total.first_error.is_none() {
            total.first_error = result.first_error;
        }
    }
    Ok(total)
}
