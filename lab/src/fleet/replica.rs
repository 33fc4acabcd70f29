//! One exporter replica: the built `exporter` binary as a child process,
//! on its own HTTP and agent-check ports.
//!
//! This module owns [`ReplicaSpec`] (the flags a replica runs with) and
//! [`Replica`] (start, readiness, the peak of walks at once, a SIGTERM stop
//! that waits for the exit). It reads a replica's state only from what the
//! replica serves (`/readyz`, `/metrics`), never from its logs.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::child::Supervised;
use super::probe;

/// How long a replica may take to announce its port and turn ready.
const START: Duration = Duration::from_secs(10);

/// What one probe of a replica may take.
const PROBE: Duration = Duration::from_secs(2);

/// The flags one replica runs with.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::fleet::ReplicaSpec;
///
/// let spec = ReplicaSpec {
///     exporter: "target/release/exporter".into(),
///     http: "127.0.0.1:9464".parse().unwrap(),
///     agent: "127.0.0.1:9465".parse().unwrap(),
///     workers: 2,
///     series: 1000,
///     walk_delay: Duration::from_millis(20),
///     drain_delay: Duration::from_millis(500),
///     shutdown_deadline: Duration::from_secs(2),
/// };
/// let args = spec.args().join(" ");
/// assert!(args.contains("--agent-check 127.0.0.1:9465"));
/// assert!(args.contains("--drain-delay-ms 500"));
/// assert_eq!(spec.exit_bound(), Duration::from_millis(4500));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSpec {
    /// The `exporter` binary.
    pub exporter: PathBuf,
    /// `--listen`: its HTTP address.
    pub http: SocketAddr,
    /// `--agent-check`: its HAProxy agent-check address.
    pub agent: SocketAddr,
    /// `--workers`: slots (and threads) of its walk pool.
    pub workers: usize,
    /// `--series`: the registry's size.
    pub series: usize,
    /// `--walk-delay-ms`: the time every walk sleeps on its worker.
    pub walk_delay: Duration,
    /// `--drain-delay-ms`: from SIGTERM (readiness turns 503) to the
    /// listener closing.
    pub drain_delay: Duration,
    /// `--shutdown-deadline-ms`: the drain's deadline, counted after the
    /// drain delay.
    pub shutdown_deadline: Duration,
}

impl ReplicaSpec {
    /// The exporter's command line for this replica.
    pub fn args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            "--listen".into(),
            self.http.to_string(),
            "--agent-check".into(),
            self.agent.to_string(),
            "--workers".into(),
            self.workers.to_string(),
            "--series".into(),
            self.series.to_string(),
            "--walk-delay-ms".into(),
            ms(self.walk_delay),
            "--drain-delay-ms".into(),
            ms(self.drain_delay),
            "--shutdown-deadline-ms".into(),
            ms(self.shutdown_deadline),
        ]
    }

    /// How long a SIGTERM'd replica may take to exit: the drain delay, the
    /// deadline, and two seconds of slack for a loaded 2-core machine.
    pub fn exit_bound(&self) -> Duration {
        self.drain_delay + self.shutdown_deadline + Duration::from_secs(2)
    }
}

/// A running replica; killed when dropped.
#[derive(Debug)]
pub struct Replica {
    spec: ReplicaSpec,
    child: Supervised,
}

/// How a replica ended after SIGTERM.
#[derive(Debug, Clone, Copy)]
pub struct Stopped {
    /// Its exit status.
    pub status: ExitStatus,
    /// From SIGTERM to the exit.
    pub took: Duration,
    /// The most walks it ran at once, read just before the SIGTERM (and
    /// again during the drain delay when the replica still answered).
    pub peak_walks: Option<u64>,
}

impl Replica {
    /// Starts `name` with `spec`, logging into `dir`, and returns once its
    /// `/readyz` answers `200`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped start kills the child.
    ///
    /// # Errors
    ///
    /// The binary did not start, announce its port or turn ready in time
    /// (the error quotes its log).
    pub async fn start(name: &str, spec: &ReplicaSpec, dir: &Path) -> io::Result<Replica> {
        let mut command = Command::new(&spec.exporter);
        command.args(spec.args());
        let mut child = Supervised::spawn(name, command, dir, true)?;
        let line = child.first_line(START).await?;
        if line != format!("listening on {}", spec.http) {
            return Err(child.failed(&format!("announced {line:?}")));
        }
        let replica = Replica {
            spec: spec.clone(),
            child,
        };
        replica.ready_within(START).await?;
        Ok(replica)
    }

    /// The replica's spec.
    pub fn spec(&self) -> &ReplicaSpec {
        &self.spec
    }

    /// Waits until `/readyz` answers `200`, polling every 20 ms.
    async fn ready_within(&self, bound: Duration) -> io::Result<()> {
        let end = Instant::now() + bound;
        loop {
            if let Ok((200, _)) = probe::get(self.spec.http, "/readyz", PROBE).await {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(self
                    .child
                    .failed(&format!("was not ready within {bound:?}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The most walks this replica has run at once (its
    /// `exporter_walks_peak`), read from `/metrics`. A scrape is a walk
    /// and may be refused under load, so a `503` is asked again, up to
    /// `attempts` times, 20 ms apart.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// Every attempt was refused or failed.
    pub async fn peak_walks(&self, attempts: u32) -> io::Result<u64> {
        let mut last = String::new();
        for _ in 0..attempts.max(1) {
            match probe::get(self.spec.http, "/metrics", PROBE).await {
                Ok((200, body)) => {
                    return parse_peak(&body)
                        .ok_or_else(|| io::Error::other("no exporter_walks_peak in /metrics"));
                }
                Ok((status, _)) => last = format!("status {status}"),
                Err(err) => last = err.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(io::Error::other(format!(
            "/metrics of {} not served ({last})",
            self.spec.http
        )))
    }

    /// SIGTERM, then the exit within [`ReplicaSpec::exit_bound`]. The peak
    /// of walks is read first (retried through refusals) and once more
    /// during the drain delay, when the replica still serves.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled stop leaves the replica draining, and
    /// dropping it kills the process.
    ///
    /// # Errors
    ///
    /// The signal could not be sent or the replica did not exit in time.
    pub async fn stop(mut self) -> io::Result<Stopped> {
        let before = self.peak_walks(50).await.ok();
        let signalled = Instant::now();
        self.child.terminate()?;
        let during = if self.spec.drain_delay.is_zero() {
            None
        } else {
            self.peak_walks(1).await.ok()
        };
        let status = self.child.wait(self.spec.exit_bound()).await?;
        Ok(Stopped {
            status,
            took: signalled.elapsed(),
            peak_walks: before.max(during),
        })
    }

    /// Whether the process is still running.
    ///
    /// # Errors
    ///
    /// As [`Supervised::exited`].
    pub fn running(&mut self) -> io::Result<bool> {
        Ok(self.child.exited()?.is_none())
    }
}

/// `exporter_walks_peak`'s value in an exposition.
fn parse_peak(exposition: &str) -> Option<u64> {
    exposition.lines().find_map(|line| {
        line.strip_prefix("exporter_walks_peak ")
            .and_then(|value| value.trim().parse().ok())
    })
}

#[cfg(test)]
mod tests {
    use super::parse_peak;

    #[test]
    fn the_peak_is_read_from_its_own_line() {
        let text =
            "# TYPE exporter_walks_peak gauge\nexporter_walks_peak 2\nexporter_walks_peak_x 9\n";
        assert_eq!(parse_peak(text), Some(2));
        assert_eq!(parse_peak("exporter_walks_running 1\n"), None);
    }
}
