//! A background loop with slots of its own, and a bounded shutdown.
//!
//! `cargo run --example background-loop`. Requests hold every *work* slot
//! (as under overload), and the loop's turns are still served: a
//! `#[reserved]` owner's work runs in its reservation, which no request can
//! take. Ctrl-C (or 3 turns) stops it: shutdown cancels the loop, drains
//! every pool and returns by its deadline.

use std::time::Duration;

use admission_core::shutdown::CancellationToken;
use admission_core::{Class, LoopOwner, RequestPools, Shutdown, reserved};
use tokio::sync::mpsc;

/// A loop that refreshes a cache: one call at a time, so two slots (the
/// call and one spare for a call that outlives a cancelled turn).
#[reserved(slots = 2, name = "refresh")]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Refresher;

impl Refresher {
    /// Turns every `period` until `stop` is cancelled: pure work of the
    /// *work* class, run in the loop's own slots. Each turn's result goes to
    /// `turns`.
    pub(crate) async fn run(
        self,
        requests: RequestPools,
        period: Duration,
        stop: CancellationToken,
        turns: mpsc::UnboundedSender<Result<u64, String>>,
    ) {
        let mut ticks = tokio::time::interval(period);
        let mut generation = 0_u64;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            generation += 1;
            let refreshed = self
                .execution(
                    requests
                        .execute_pure(Class::Work, move || Ok::<_, std::fmt::Error>(generation)),
                )
                .await
                .map_err(|error| error.to_string());
            if turns.send(refreshed).is_err() {
                return;
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests = RequestPools::new(1, 1)?;
    let shutdown = Shutdown::new(Duration::from_secs(5))?;
    shutdown.register(&requests);
    shutdown.register(&Refresher);

    // Every work slot held, as by requests under overload.
    let _overload = requests.try_lease(Class::Work)?;
    let (turns, mut done) = mpsc::unbounded_channel();
    let loop_requests = requests.clone();
    shutdown.spawn_lifespan(move |stop| {
        Refresher.run(loop_requests, Duration::from_millis(500), stop, turns)
    });

    for _ in 0..3 {
        tokio::select! {
            turn = done.recv() => println!("turn: {turn:?}"),
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    let report = shutdown.shutdown().await;
    println!(
        "stopped in {:?}: every pool drained: {}, loops stopped: {}",
        report.elapsed,
        report.drained(),
        report.loops_stopped
    );
    Ok(())
}
