//! The one stop sequence both exporters share: serve until the signal,
//! then stop accepting and drain the server and the pools by one deadline.
//!
//! This module owns [`Serving`]: a spawned server task that stops accepting
//! when told, the wait for the signal (or for the server ending first,
//! which is an error), and the drain (stop accepting, the server's own
//! closing step, then the server task and the [`Shutdown`]'s pools
//! concurrently, neither waited for past the deadline). It must never
//! decide when the deadline starts (the HTTP exporter serves on through its
//! drain delay first) nor what a server does before it stops accepting
//! (readiness, health): the callers do.

use std::future::Future;
use std::io;

use admission_core::Shutdown;
use admission_core::shutdown::{CancellationToken, ShutdownReport};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A server running on its own task.
#[derive(Debug)]
pub(crate) struct Serving {
    task: JoinHandle<io::Result<()>>,
    stop_accepting: CancellationToken,
}

/// How a drain ended.
#[derive(Debug)]
pub(crate) struct Drained<T> {
    /// Per pool: drained or abandoned.
    pub(crate) report: ShutdownReport,
    /// What the caller read while the server still ran at the deadline
    /// (`None`: the server ended in time).
    pub(crate) cut: Option<T>,
}

impl Serving {
    /// Spawns `server`, which must stop accepting (and then end once its
    /// connections have) when `stop_accepting` is cancelled.
    pub(crate) fn spawn<F>(server: F, stop_accepting: CancellationToken) -> Serving
    where
        F: Future<Output = io::Result<()>> + Send + 'static,
    {
        Serving {
            task: tokio::spawn(server),
            stop_accepting,
        }
    }

    /// Serves until `signal` completes, and returns when it did. A server
    /// that ends first is an error, after `shutdown` has stopped the pools.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the server serving.
    pub(crate) async fn until(
        &mut self,
        signal: impl Future<Output = ()>,
        shutdown: &Shutdown,
    ) -> io::Result<Instant> {
        tokio::select! {
            () = signal => Ok(Instant::now()),
            ended = &mut self.task => {
                let _ = shutdown.shutdown().await;
                Err(match ended {
                    Ok(Ok(())) => io::Error::other("the server stopped before any signal"),
                    Ok(Err(err)) => err,
                    Err(join) => io::Error::other(join),
                })
            }
        }
    }

    /// Stops accepting, runs `closing` (what the server does itself
    /// then), and waits for the server and for `shutdown`'s pools until
    /// `deadline`. A server still running then is read by `at_cut` and
    /// aborted (its connections are left to the process exit).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future leaves the server running with
    /// no deadline.
    pub(crate) async fn drain<T>(
        mut self,
        shutdown: &Shutdown,
        deadline: Instant,
        closing: impl FnOnce(),
        at_cut: impl FnOnce() -> T,
    ) -> Drained<T> {
        self.stop_accepting.cancel();
        closing();
        let (served, report) = tokio::join!(
            tokio::time::timeout_at(deadline, &mut self.task),
            shutdown.shutdown_by(deadline)
        );
        let cut = served.is_err().then(at_cut);
        if cut.is_some() {
            self.task.abort();
        }
        Drained { report, cut }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_server_that_ends_before_the_signal_is_an_error() {
        let shutdown = Shutdown::new(Duration::from_secs(1)).unwrap();
        let mut serving = Serving::spawn(async { Ok(()) }, CancellationToken::new());
        let err = serving
            .until(std::future::pending(), &shutdown)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "the server stopped before any signal");
    }

    #[tokio::test]
    async fn the_drain_stops_accepting_and_cuts_a_server_at_the_deadline() {
        let shutdown = Shutdown::new(Duration::from_secs(1)).unwrap();
        // A server that stops when told.
        let stop = CancellationToken::new();
        let told = stop.clone();
        let mut polite = Serving::spawn(
            async move {
                told.cancelled().await;
                Ok(())
            },
            stop,
        );
        polite.until(async {}, &shutdown).await.unwrap();
        let mut closed = false;
        let drained = polite
            .drain(
                &shutdown,
                Instant::now() + Duration::from_secs(5),
                || closed = true,
                || (),
            )
            .await;
        assert!(closed, "the closing step ran");
        assert!(drained.cut.is_none() && drained.report.drained());

        // A server that never ends.
        let stuck = Serving::spawn(std::future::pending(), CancellationToken::new());
        let drained = stuck
            .drain(
                &shutdown,
                Instant::now() + Duration::from_millis(50),
                || {},
                || "read",
            )
            .await;
        assert_eq!(drained.cut, Some("read"), "read before the abort");
    }
}
