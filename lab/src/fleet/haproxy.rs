//! HAProxy in front of the replicas, running `examples/fleet/haproxy.cfg`
//! itself (not a copy): the addresses go in through the environment, which
//! HAProxy reads in its configuration.
//!
//! This module owns [`HaproxySpec`] (the environment), [`Haproxy`] (the
//! running balancer and what its stats page says) and the `haproxy -c`
//! check. It never edits the configuration file.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::child::Supervised;
use super::probe;
use super::tools::Tool;

/// How long HAProxy may take to see every replica up.
const START: Duration = Duration::from_secs(10);

/// The environment `haproxy.cfg` reads.
///
/// # Examples
///
/// ```
/// use admission_lab::fleet::HaproxySpec;
///
/// let spec = HaproxySpec {
///     listen: "127.0.0.1:8080".parse().unwrap(),
///     stats: "127.0.0.1:8081".parse().unwrap(),
///     replicas: vec![("127.0.0.1:9001".parse().unwrap(), "127.0.0.1:9101".parse().unwrap())],
///     retries: true,
///     maxconn: true,
///     agent_weights: false,
/// };
/// let env = spec.env();
/// assert!(env.contains(&("FLEET_AGENT_PORT_1".into(), "9101".into())));
/// assert!(env.contains(&("FLEET_NO_AGENT".into(), "1".into())));
/// assert!(!env.iter().any(|(k, _)| k == "FLEET_NO_RETRIES"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaproxySpec {
    /// `FLEET_LISTEN`: where clients connect.
    pub listen: SocketAddr,
    /// `FLEET_STATS`: HAProxy's stats page.
    pub stats: SocketAddr,
    /// `FLEET_REPLICA_n` and `FLEET_AGENT_PORT_n`, in order (three).
    pub replicas: Vec<(SocketAddr, SocketAddr)>,
    /// Retries on 503, connection failures and empty responses, each on
    /// another replica (unset `FLEET_NO_RETRIES`).
    pub retries: bool,
    /// At most `maxconn` (the pool's size) requests at once per replica,
    /// the rest queued in HAProxy (unset `FLEET_NO_MAXCONN`).
    pub maxconn: bool,
    /// Agent checks set each replica's weight (unset `FLEET_NO_AGENT`).
    pub agent_weights: bool,
}

impl HaproxySpec {
    /// The variables, as `haproxy.cfg` names them.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("FLEET_LISTEN".to_owned(), self.listen.to_string()),
            ("FLEET_STATS".to_owned(), self.stats.to_string()),
        ];
        for (i, (http, agent)) in self.replicas.iter().enumerate() {
            env.push((format!("FLEET_REPLICA_{}", i + 1), http.to_string()));
            env.push((
                format!("FLEET_AGENT_PORT_{}", i + 1),
                agent.port().to_string(),
            ));
        }
        if !self.retries {
            env.push(("FLEET_NO_RETRIES".to_owned(), "1".to_owned()));
        }
        if !self.maxconn {
            env.push(("FLEET_NO_MAXCONN".to_owned(), "1".to_owned()));
        }
        if !self.agent_weights {
            env.push(("FLEET_NO_AGENT".to_owned(), "1".to_owned()));
        }
        env
    }

    fn command(&self, binary: &Path) -> Command {
        let mut command = Command::new(binary);
        command
            .env_remove("FLEET_NO_RETRIES")
            .env_remove("FLEET_NO_MAXCONN")
            .env_remove("FLEET_NO_AGENT")
            .envs(self.env());
        command
    }

    /// `haproxy -c -f examples/fleet/haproxy.cfg` with this environment.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the check is killed when dropped.
    ///
    /// # Errors
    ///
    /// The binary could not run.
    pub async fn check(&self, binary: &Path) -> io::Result<Output> {
        self.command(binary)
            .arg("-c")
            .arg("-f")
            .arg(Tool::Haproxy.config_file())
            .kill_on_drop(true)
            .output()
            .await
    }
}

/// One server line of HAProxy's stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    /// `r1`, `r2`, `r3`.
    pub name: String,
    /// `UP`, `DOWN`, `DRAIN`, `MAINT`, `UP 1/2`, ...
    pub status: String,
    /// The effective weight (the agent's percentage of 1, on this scale).
    pub weight: u32,
    /// Requests HAProxy retried away from this server (`wretr`).
    pub retries: u64,
    /// Requests redispatched to another server (`wredis`).
    pub redispatches: u64,
}

/// A running HAProxy; killed when dropped.
#[derive(Debug)]
pub struct Haproxy {
    spec: HaproxySpec,
    child: Supervised,
}

impl Haproxy {
    /// Starts `binary` on `examples/fleet/haproxy.cfg` with `spec`, in the
    /// foreground, logging into `dir`, and returns once its stats say every
    /// replica is `UP`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped start kills HAProxy.
    ///
    /// # Errors
    ///
    /// It did not start, or some replica was not `UP` within 10 s.
    pub async fn start(binary: &Path, spec: &HaproxySpec, dir: &Path) -> io::Result<Haproxy> {
        let mut command = spec.command(binary);
        command
            .arg("-db")
            .arg("-f")
            .arg(Tool::Haproxy.config_file());
        let child = Supervised::spawn("haproxy", command, dir, false)?;
        let haproxy = Haproxy {
            spec: spec.clone(),
            child,
        };
        haproxy.all_up(START).await?;
        Ok(haproxy)
    }

    /// Where clients connect.
    pub fn listen(&self) -> SocketAddr {
        self.spec.listen
    }

    /// Waits (polling every 20 ms) until every server is `UP`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// Not all were up within `bound`.
    pub async fn all_up(&self, bound: Duration) -> io::Result<()> {
        let end = Instant::now() + bound;
        let mut last = Vec::new();
        while Instant::now() < end {
            if let Ok(servers) = self.servers().await {
                if servers.len() == self.spec.replicas.len()
                    && servers.iter().all(|s| s.status == "UP")
                {
                    return Ok(());
                }
                last = servers;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(self.child.failed(&format!(
            "did not see every replica UP within {bound:?}: {last:?}"
        )))
    }

    /// Each server's state, from `/stats;csv`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// The stats page did not answer `200`, or not in the expected form.
    pub async fn servers(&self) -> io::Result<Vec<ServerState>> {
        let (status, csv) =
            probe::get(self.spec.stats, "/stats;csv", Duration::from_secs(2)).await?;
        if status != 200 {
            return Err(io::Error::other(format!("HAProxy stats answered {status}")));
        }
        parse_servers(&csv).ok_or_else(|| io::Error::other("HAProxy stats not in CSV form"))
    }
}

/// The `exporters` backend's server rows of HAProxy's stats CSV.
fn parse_servers(csv: &str) -> Option<Vec<ServerState>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.trim_start_matches("# ").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (px, sv, status, weight, wretr, wredis) = (
        col("pxname")?,
        col("svname")?,
        col("status")?,
        col("weight")?,
        col("wretr")?,
        col("wredis")?,
    );
    let num = |s: &str| s.parse::<u64>().unwrap_or(0);
    Some(
        lines
            .map(|line| line.split(',').collect::<Vec<_>>())
            .filter(|f| {
                f.get(px) == Some(&"exporters")
                    && !matches!(f.get(sv), Some(&"BACKEND") | Some(&"FRONTEND") | None)
            })
            .map(|f| ServerState {
                name: f[sv].to_owned(),
                status: f.get(status).copied().unwrap_or_default().to_owned(),
                weight: u32::try_from(num(f.get(weight).copied().unwrap_or_default()))
                    .unwrap_or(u32::MAX),
                retries: num(f.get(wretr).copied().unwrap_or_default()),
                redispatches: num(f.get(wredis).copied().unwrap_or_default()),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::parse_servers;

    #[test]
    fn server_rows_are_read_by_column_name() {
        let csv = "# pxname,svname,wretr,wredis,status,weight,\n\
                   fleet,FRONTEND,,,OPEN,,\n\
                   exporters,r1,3,2,UP,1,\n\
                   exporters,r2,0,0,DRAIN,0,\n\
                   exporters,BACKEND,3,2,UP,1,\n";
        let servers = parse_servers(csv).unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!((servers[0].name.as_str(), servers[0].retries), ("r1", 3));
        assert_eq!(
            (servers[1].status.as_str(), servers[1].weight),
            ("DRAIN", 0)
        );
    }
}
