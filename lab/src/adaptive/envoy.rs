//! A real Envoy in front of the harness's backend, running a copy of
//! `lab/adaptive/envoy.yaml` with only its placeholders filled.
//!
//! This module owns [`EnvoyGate`]: its start (once its admin page answers
//! `/ready`), the limit its adaptive concurrency filter reports, and its
//! stop (when dropped). It never changes the configuration but for the
//! ports, the ceiling and the minRTT interval.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use crate::fleet::probe;
use crate::fleet::{Supervised, Workdir, free_port};

/// The configuration template.
pub fn config_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("adaptive/envoy.yaml")
}

/// A running Envoy; killed when dropped.
#[derive(Debug)]
pub(crate) struct EnvoyGate {
    listen: SocketAddr,
    admin: SocketAddr,
    _child: Supervised,
    _dir: Workdir,
}

impl EnvoyGate {
    /// Starts `binary` in front of `backend`, with one worker thread.
    pub(crate) async fn start(
        binary: &Path,
        backend: SocketAddr,
        ceiling: usize,
        min_rtt_interval: Duration,
    ) -> io::Result<EnvoyGate> {
        let dir = Workdir::new()?;
        let (listen, admin) = (free_port()?, free_port()?);
        let text = std::fs::read_to_string(config_file())?
            .replace("{{LISTEN_PORT}}", &listen.port().to_string())
            .replace("{{ADMIN_PORT}}", &admin.port().to_string())
            .replace("{{BACKEND_PORT}}", &backend.port().to_string())
            .replace("{{CEILING}}", &ceiling.to_string())
            .replace(
                "{{MIN_RTT_INTERVAL}}",
                &format!("{}s", min_rtt_interval.as_secs().max(1)),
            );
        let config = dir.path().join("envoy.yaml");
        std::fs::write(&config, text)?;
        let mut command = Command::new(binary);
        command
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "-l",
                "warning",
                "-c",
            ])
            .arg(&config);
        let child = Supervised::spawn("envoy", command, dir.path(), false)?;
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok((200, _)) = probe::get(admin, "/ready", Duration::from_secs(1)).await {
                break;
            }
            if Instant::now() > end {
                return Err(child.failed("Envoy's admin page was not ready within 15 s"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(EnvoyGate {
            listen,
            admin,
            _child: child,
            _dir: dir,
        })
    }

    /// Where clients connect.
    pub(crate) fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// The filter's concurrency limit and its refusals so far, from the
    /// admin page's stats.
    pub(crate) async fn limit(&self) -> Option<usize> {
        let (status, text) = probe::get(
            self.admin,
            "/stats?filter=gradient_controller.concurrency_limit",
            Duration::from_secs(1),
        )
        .await
        .ok()?;
        if status != 200 {
            return None;
        }
        parse_limit(&text)
    }
}

/// The value of the `...gradient_controller.concurrency_limit: N` line.
///
/// # Examples
///
/// ```
/// # use admission_lab::adaptive::parse_envoy_limit as parse_limit;
/// let text = "http.harness.adaptive_concurrency.gradient_controller.concurrency_limit: 7\n";
/// assert_eq!(parse_limit(text), Some(7));
/// assert_eq!(parse_limit("nothing"), None);
/// ```
pub fn parse_limit(text: &str) -> Option<usize> {
    text.lines()
        .find(|line| line.contains("gradient_controller.concurrency_limit:"))
        .and_then(|line| line.rsplit(':').next())
        .and_then(|value| value.trim().parse().ok())
}
