//! The periodic sweep: Spin has no timer trigger, so the host itself pokes the application's
//! sweeper component (a private route that expires stale calls and re-drives stranded work)
//! with `POST /sweep` every interval. Under real Spin an external scheduler calls the public
//! sweep route instead.
//!
//! The request goes through service chaining, in-process, exactly as another component's
//! `http://<id>.spin.internal/sweep` would, so the component cannot tell the two apart.
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use gatehouse_spin_host::App;
use gatehouse_spin_host::log;

/// A running sweep loop; `stop` it before draining the application's guests.
pub(crate) struct Sweeper {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Sweeper {
    /// Starts sweeping `component` every `interval`, the first sweep one interval from now.
    /// Returns None when the interval is zero (sweeping disabled) or the application has no
    /// such component, since an application without a sweeper has nothing to sweep.
    pub(crate) fn start(app: Arc<App>, component: &str, interval: Duration) -> Option<Sweeper> {
        if interval.is_zero() {
            log::debug("periodic sweep disabled", json!({"component": component}));
            return None;
        }
        if !app.component_ids().any(|id| id == component) {
            log::debug("no sweep component, so no periodic sweep", json!({"component": component}));
            return None;
        }
        log::info(
            "periodic sweep",
            json!({"component": component, "interval_seconds": interval.as_secs_f64(), "path": SWEEP_PATH}),
        );
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(sweep_loop(app, component.to_owned(), interval, stopped));
        Some(Sweeper { stop, task })
    }

    /// Ends the loop and waits for it, so no sweep starts a guest after this returns. A sweep
    /// in flight is not waited for here: its guest is one of the application's and is drained
    /// with the others, within the shutdown grace period.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            log::error("sweep task failed", json!({"error": e.to_string()}));
        }
    }
}

const SWEEP_PATH: &str = "/sweep";

async fn sweep_loop(app: Arc<App>, component: String, interval: Duration, mut stopped: oneshot::Receiver<()>) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    // A sweep slower than the interval pushes the schedule back instead of queueing catch-up
    // ticks, so sweeps never pile up behind a slow one.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = &mut stopped => return,
        }
        tokio::select! {
            () = sweep_once(&app, &component) => {}
            _ = &mut stopped => return,
        }
    }
}

/// One `POST /sweep` with `{}` to the component; the answer is read to the end (so a guest
/// that streams it is not cut off mid-write) and dropped.
async fn sweep_once(app: &App, component: &str) {
    let started = Instant::now();
    let answer = app.call_component(component, Method::POST, SWEEP_PATH, Bytes::from_static(b"{}")).await;
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let status = match answer {
        Ok((status, _body)) => status,
        Err(e) => {
            log::warn("sweep failed", json!({"component": component, "error": format!("{e:#}")}));
            return;
        }
    };
    if !status.is_success() {
        log::warn(
            "sweep answered with an error status",
            json!({"component": component, "status": status.as_u16(), "duration_ms": duration_ms}),
        );
    }
    log::debug("sweep", json!({"component": component, "status": status.as_u16(), "duration_ms": duration_ms}));
}
