//! Envoy in front of the replicas, running a copy of
//! `examples/fleet/envoy.yaml` in which only the `{{NAME}}` port
//! placeholders are replaced (Envoy reads no environment in its
//! configuration).
//!
//! This module owns [`EnvoySpec`] (the ports and the rendered copy),
//! [`Envoy`] (the running proxy and the health its admin page reports) and
//! the `envoy --mode validate` check. It never changes anything in the
//! file but the placeholders.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::child::Supervised;
use super::probe;
use super::tools::Tool;

/// How long Envoy may take to see every replica healthy.
const START: Duration = Duration::from_secs(15);

/// The ports `envoy.yaml` leaves as placeholders (all on 127.0.0.1).
///
/// # Examples
///
/// ```
/// use admission_lab::fleet::EnvoySpec;
///
/// let spec = EnvoySpec {
///     listen: "127.0.0.1:10000".parse().unwrap(),
///     admin: "127.0.0.1:10001".parse().unwrap(),
///     replicas: vec!["127.0.0.1:9001".parse().unwrap()],
/// };
/// let text = spec.render("port_value: {{FLEET_REPLICA_1_PORT}}").unwrap();
/// assert_eq!(text, "port_value: 9001");
/// assert!(spec.render("{{FLEET_REPLICA_2_PORT}}").is_err(), "no port for it");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvoySpec {
    /// `{{FLEET_LISTEN_PORT}}`: where clients connect.
    pub listen: SocketAddr,
    /// `{{FLEET_ADMIN_PORT}}`: Envoy's admin page.
    pub admin: SocketAddr,
    /// `{{FLEET_REPLICA_n_PORT}}`, in order (three).
    pub replicas: Vec<SocketAddr>,
}

impl EnvoySpec {
    /// `template` with every placeholder replaced.
    ///
    /// # Errors
    ///
    /// A `{{` is left over: the template names a placeholder this spec does
    /// not fill.
    pub fn render(&self, template: &str) -> io::Result<String> {
        let mut text = template
            .replace("{{FLEET_LISTEN_PORT}}", &self.listen.port().to_string())
            .replace("{{FLEET_ADMIN_PORT}}", &self.admin.port().to_string());
        for (i, replica) in self.replicas.iter().enumerate() {
            text = text.replace(
                &format!("{{{{FLEET_REPLICA_{}_PORT}}}}", i + 1),
                &replica.port().to_string(),
            );
        }
        match text.find("{{") {
            Some(at) => Err(io::Error::other(format!(
                "envoy.yaml has a placeholder the demo does not fill: {}",
                text[at..].lines().next().unwrap_or_default()
            ))),
            None => Ok(text),
        }
    }

    /// Writes the rendered copy of `examples/fleet/envoy.yaml` into `dir`.
    ///
    /// # Errors
    ///
    /// The file cannot be read, rendered or written.
    pub fn write(&self, dir: &Path) -> io::Result<PathBuf> {
        let template = std::fs::read_to_string(Tool::Envoy.config_file())?;
        let path = dir.join("envoy.yaml");
        std::fs::write(&path, self.render(&template)?)?;
        Ok(path)
    }
}

/// `envoy --mode validate -c config`.
///
/// # Cancel safety
///
/// Cancel safe: the check is killed when dropped.
///
/// # Errors
///
/// The binary could not run.
pub async fn validate(binary: &Path, config: &Path) -> io::Result<Output> {
    Command::new(binary)
        .args([
            "--mode",
            "validate",
            "--disable-hot-restart",
            "-l",
            "warning",
            "-c",
        ])
        .arg(config)
        .kill_on_drop(true)
        .output()
        .await
}

/// A running Envoy; killed when dropped.
#[derive(Debug)]
pub struct Envoy {
    spec: EnvoySpec,
    child: Supervised,
}

impl Envoy {
    /// Writes the rendered configuration into `dir`, starts `binary` on it
    /// and returns once its admin page says every replica is healthy.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped start kills Envoy.
    ///
    /// # Errors
    ///
    /// It did not start, or a replica was not healthy within 15 s.
    pub async fn start(binary: &Path, spec: &EnvoySpec, dir: &Path) -> io::Result<Envoy> {
        let config = spec.write(dir)?;
        let mut command = Command::new(binary);
        command
            .args(["--disable-hot-restart", "-l", "warning", "-c"])
            .arg(config);
        let child = Supervised::spawn("envoy", command, dir, false)?;
        let envoy = Envoy {
            spec: spec.clone(),
            child,
        };
        envoy.all_healthy(START).await?;
        Ok(envoy)
    }

    /// Where clients connect.
    pub fn listen(&self) -> SocketAddr {
        self.spec.listen
    }

    /// Waits (polling every 20 ms) until every replica is healthy.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// Not all were healthy within `bound`.
    pub async fn all_healthy(&self, bound: Duration) -> io::Result<()> {
        let end = Instant::now() + bound;
        let mut last = Vec::new();
        while Instant::now() < end {
            if let Ok(health) = self.health().await {
                if health.len() == self.spec.replicas.len()
                    && health.iter().all(|(_, flags)| flags == "healthy")
                {
                    return Ok(());
                }
                last = health;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(self.child.failed(&format!(
            "did not see every replica healthy within {bound:?}: {last:?}"
        )))
    }

    /// Each replica's health flags (`healthy`, `/failed_active_hc`, ...),
    /// from the admin page's `/clusters`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// The admin page did not answer `200`.
    pub async fn health(&self) -> io::Result<Vec<(String, String)>> {
        let (status, text) =
            probe::get(self.spec.admin, "/clusters", Duration::from_secs(2)).await?;
        if status != 200 {
            return Err(io::Error::other(format!("Envoy admin answered {status}")));
        }
        Ok(parse_health(&text))
    }
}

impl Envoy {
    /// The cluster's retries (`upstream_rq_retry`) and, of them, those
    /// that waited out a `Retry-After` (`upstream_rq_retry_backoff_ratelimited`),
    /// from the admin page's `/stats`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// The admin page did not answer `200`.
    pub async fn retries(&self) -> io::Result<(u64, u64)> {
        let (status, text) = probe::get(
            self.spec.admin,
            "/stats?filter=cluster%5C.exporters%5C.upstream_rq_retry",
            Duration::from_secs(2),
        )
        .await?;
        if status != 200 {
            return Err(io::Error::other(format!("Envoy admin answered {status}")));
        }
        Ok((
            stat(&text, "cluster.exporters.upstream_rq_retry"),
            stat(
                &text,
                "cluster.exporters.upstream_rq_retry_backoff_ratelimited",
            ),
        ))
    }
}

/// The value of `name: N` in Envoy's text stats (0 when absent).
fn stat(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| {
            line.strip_prefix(name)?
                .strip_prefix(": ")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// `(host, flags)` of each `exporters::HOST::health_flags::FLAGS` line.
fn parse_health(clusters: &str) -> Vec<(String, String)> {
    clusters
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("exporters::")?;
            let (host, flags) = rest.split_once("::health_flags::")?;
            Some((host.to_owned(), flags.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{EnvoySpec, parse_health, stat};

    #[test]
    fn a_stat_is_read_by_its_whole_name() {
        let text = "cluster.exporters.upstream_rq_retry: 7\n\
                    cluster.exporters.upstream_rq_retry_backoff_ratelimited: 2\n";
        assert_eq!(stat(text, "cluster.exporters.upstream_rq_retry"), 7);
        assert_eq!(
            stat(
                text,
                "cluster.exporters.upstream_rq_retry_backoff_ratelimited"
            ),
            2
        );
        assert_eq!(
            stat(text, "cluster.exporters.upstream_rq_retry_overflow"),
            0
        );
    }

    #[test]
    fn every_placeholder_is_filled_or_named() {
        let spec = EnvoySpec {
            listen: "127.0.0.1:1001".parse().unwrap(),
            admin: "127.0.0.1:1002".parse().unwrap(),
            replicas: vec!["127.0.0.1:1003".parse().unwrap()],
        };
        let text = spec
            .render("a: {{FLEET_LISTEN_PORT}} b: {{FLEET_ADMIN_PORT}} c: {{FLEET_REPLICA_1_PORT}}")
            .unwrap();
        assert_eq!(text, "a: 1001 b: 1002 c: 1003");
        let err = spec.render("d: {{FLEET_REPLICA_2_PORT}}").unwrap_err();
        assert!(err.to_string().contains("FLEET_REPLICA_2_PORT"), "{err}");
    }

    #[test]
    fn health_lines_are_read() {
        let text = "exporters::127.0.0.1:1::cx_active::0\n\
                    exporters::127.0.0.1:1::health_flags::healthy\n\
                    exporters::127.0.0.1:2::health_flags::/failed_active_hc\n";
        assert_eq!(
            parse_health(text),
            vec![
                ("127.0.0.1:1".to_owned(), "healthy".to_owned()),
                ("127.0.0.1:2".to_owned(), "/failed_active_hc".to_owned())
            ]
        );
    }
}
