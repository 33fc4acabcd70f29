//! The exporter under test as a child process, and the child's side.
//!
//! This module owns both ends of one control channel: the parent starts
//! the `storm` binary again with `--serve-exporter` (under `taskset -c 0`
//! when pinned), reads `listening on ADDR` from its stdout, later closes
//! its stdin to stop it and reads one `walks ...` line of what the walks
//! did. The child serves one exporter and prints those two lines. A child
//! that does not stop in time is killed. It never measures load: the
//! generator does.

use std::io;
use std::net::SocketAddr;
use std::process::Stdio;
use std::str::FromStr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader, Lines};
use tokio::net::TcpListener;
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::{Instant, timeout};

use admission_examples::exporter::{Config, Exporter, Gate};

/// How long a child may take to start or to stop.
const CHILD_BOUND: Duration = Duration::from_secs(30);
/// How long the child waits for walks left by gone clients before it
/// reports (their time counts).
const SETTLE: Duration = Duration::from_secs(2);

/// What the walks of one served exporter did, as its child reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Walks started on a thread.
    pub started: u64,
    /// The most walks running at once.
    pub peak: u64,
    /// Thread time of all walks.
    pub busy: Duration,
    /// Thread time of walks after their caller had left.
    pub orphaned: Duration,
}

impl WalkStats {
    /// The orphaned share of all walk time, in 0..=1.
    pub fn orphaned_share(&self) -> f64 {
        if self.busy.is_zero() {
            0.0
        } else {
            self.orphaned.as_secs_f64() / self.busy.as_secs_f64()
        }
    }

    fn line(&self) -> String {
        format!(
            "walks started={} peak={} busy_us={} orphaned_us={}",
            self.started,
            self.peak,
            self.busy.as_micros(),
            self.orphaned.as_micros()
        )
    }

    fn parse(line: &str) -> Option<WalkStats> {
        let rest = line.strip_prefix("walks ")?;
        let mut stats = WalkStats::default();
        for pair in rest.split_whitespace() {
            let (name, value) = pair.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            match name {
                "started" => stats.started = value,
                "peak" => stats.peak = value,
                "busy_us" => stats.busy = Duration::from_micros(value),
                "orphaned_us" => stats.orphaned = Duration::from_micros(value),
                _ => return None,
            }
        }
        Some(stats)
    }
}

/// What the child serves (`storm --serve-exporter --gate G --workers N
/// --walk-delay-ms MS --series N`, which the parent passes).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_examples::exporter::Gate;
/// use admission_lab::storm::overload::ServeSpec;
///
/// let spec = ServeSpec { gate: Gate::TowerLimit, workers: 2, walk_delay: Duration::from_millis(5), series: 10 };
/// assert_eq!(spec.clone(), spec);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSpec {
    /// The gate in front of the walks.
    pub gate: Gate,
    /// Worker threads.
    pub workers: usize,
    /// Extra time inside every walk.
    pub walk_delay: Duration,
    /// Series in the registry.
    pub series: usize,
}

impl ServeSpec {
    /// The child's flags after `--serve-exporter`.
    fn args(&self) -> Vec<String> {
        vec![
            "--serve-exporter".to_owned(),
            "--gate".to_owned(),
            self.gate.name().to_owned(),
            "--workers".to_owned(),
            self.workers.to_string(),
            "--walk-delay-ms".to_owned(),
            self.walk_delay.as_millis().to_string(),
            "--series".to_owned(),
            self.series.to_string(),
        ]
    }
}

/// A running child exporter; killed if dropped.
#[derive(Debug)]
pub(crate) struct ServerChild {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
}

impl ServerChild {
    /// Starts `spec` as a child, on CPU `cpu` when given (`taskset`).
    pub(crate) async fn start(spec: &ServeSpec, cpu: Option<usize>) -> io::Result<ServerChild> {
        ServerChild::start_with(spec.args(), cpu).await
    }

    /// Starts this binary again with `args` as a child, on CPU `cpu` when
    /// given (`taskset`), and reads the `listening on ADDR` line it prints
    /// first.
    pub(crate) async fn start_with(
        args: Vec<String>,
        cpu: Option<usize>,
    ) -> io::Result<ServerChild> {
        let exe = std::env::current_exe()?;
        let mut command = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(cpu.to_string()).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let mut stdout = BufReader::new(stdout).lines();
        let first = timeout(CHILD_BOUND, stdout.next_line())
            .await
            .map_err(|_| io::Error::other("the exporter child did not start in time"))??
            .ok_or_else(|| io::Error::other("the exporter child ended before listening"))?;
        let addr = first
            .strip_prefix("listening on ")
            .and_then(|a| SocketAddr::from_str(a).ok())
            .ok_or_else(|| io::Error::other("the exporter child printed no address"))?;
        Ok(ServerChild {
            child,
            stdout,
            addr,
        })
    }

    /// Stops the child (closes its stdin) and reads what its walks did.
    pub(crate) async fn stop(self) -> io::Result<WalkStats> {
        self.stop_with(WalkStats::parse, "walks").await
    }

    /// Stops the child (closes its stdin) and returns the first line of
    /// its stdout that `parse` reads, the child's report (`what` names it
    /// in the error when there is none).
    pub(crate) async fn stop_with<T>(
        mut self,
        parse: impl Fn(&str) -> Option<T>,
        what: &str,
    ) -> io::Result<T> {
        drop(self.child.stdin.take());
        let stats = timeout(CHILD_BOUND, async {
            while let Some(line) = self.stdout.next_line().await? {
                if let Some(stats) = parse(&line) {
                    return Ok(stats);
                }
            }
            Err(io::Error::other(format!(
                "the server child ended without its {what} line"
            )))
        })
        .await
        .map_err(|_| io::Error::other("the server child did not stop in time"))??;
        match timeout(CHILD_BOUND, self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(stats)
    }
}

/// The child's side: serves `spec` on a fresh loopback port, prints
/// `listening on ADDR`, serves until stdin closes, waits (bounded) for
/// walks still running, prints the `walks ...` line.
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future leaves the exporter serving until
/// the process ends (which is what the child does next).
///
/// # Errors
///
/// An [`io::Error`] when the exporter cannot be built, bound or served.
pub async fn serve_child(spec: ServeSpec) -> io::Result<()> {
    let exporter = Exporter::new(Config {
        gate: spec.gate,
        workers: spec.workers,
        walk_delay: spec.walk_delay,
        series: spec.series,
        shutdown_deadline: Duration::from_secs(2),
        // The background walk stays out of the measurement.
        cardinality_interval: Duration::from_secs(3600),
        // The load generator is the service's own peer (the criticality
        // scenario marks its critical traffic, as a trusted edge would).
        trust_peers: true,
        ..Config::default()
    })?;
    let walks = exporter.walks();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    let stopped = exporter
        .serve(listener, async {
            let mut sink = Vec::new();
            let _ = tokio::io::stdin().read_to_end(&mut sink).await;
        })
        .await?;
    drop(stopped);
    let settle = Instant::now() + SETTLE;
    while walks.running() > 0 && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = WalkStats {
        started: walks.started(),
        peak: walks.peak(),
        busy: walks.busy_time(),
        orphaned: walks.orphaned_time(),
    };
    println!("{}", stats.line());
    Ok(())
}
