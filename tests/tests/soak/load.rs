//! The load: many clients, each on a connection of its own, sending a mix
//! of plain, failing, panicking and abandoned scrapes; and a probe hitting
//! `/healthz` on its own connection meanwhile.
//!
//! An abandoned scrape asks for a walk longer than the client waits: the
//! request's timeout drops its response future mid-walk and reqwest closes
//! the connection, so the server drops the handler and orphans the walk
//! (when it was admitted at all).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::walk::{EXPOSITION_HEAD, Fault};

/// How long a client waits for a scrape it does not abandon, or the probe
/// for `/healthz`: only ever reached when something is wrong.
const PATIENCE: Duration = Duration::from_secs(5);

/// The walk an abandoned scrape asks for.
const ABANDONED_WALK_MS: u64 = 40;
/// How long a client waits before abandoning a scrape: well inside its walk.
const ABANDON_AFTER: Duration = Duration::from_millis(8);

/// How often the probe asks `/healthz`.
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// What one scrape asks for and how its client behaves.
#[derive(Debug, Clone, Copy)]
struct Scrape {
    work_ms: u64,
    fault: Fault,
    /// The client gives up after [`ABANDON_AFTER`].
    abandon: bool,
}

/// A small xorshift generator: the mix is the same on every run.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next scrape: 10 % failing walks, 10 % panicking walks, 12 %
    /// abandoned mid-walk (a third of those failing, a third panicking),
    /// the rest plain walks of 1 to 4 ms.
    fn scrape(&mut self) -> Scrape {
        let short = 1 + self.next() % 4;
        let roll = self.next() % 100;
        let fault = |n| match n % 3 {
            0 => Fault::None,
            1 => Fault::Fail,
            _ => Fault::Panic,
        };
        match roll {
            0..10 => Scrape {
                work_ms: short,
                fault: Fault::Fail,
                abandon: false,
            },
            10..20 => Scrape {
                work_ms: short,
                fault: Fault::Panic,
                abandon: false,
            },
            20..32 => Scrape {
                work_ms: ABANDONED_WALK_MS,
                fault: fault(self.next()),
                abandon: true,
            },
            _ => Scrape {
                work_ms: short,
                fault: Fault::None,
                abandon: false,
            },
        }
    }
}

/// What the clients saw.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) requests: u64,
    /// `200` with an exposition.
    pub(crate) ok: u64,
    /// `503` with `Retry-After`.
    pub(crate) refused: u64,
    /// `500` from a walk that failed or panicked.
    pub(crate) failed: u64,
    /// Scrapes the client abandoned mid-request.
    pub(crate) disconnects: u64,
    /// Everything else, described: a soak that keeps its promises has none.
    pub(crate) unexpected: Vec<String>,
}

impl Tally {
    /// Adds what another round saw.
    pub(crate) fn add(&mut self, other: Tally) {
        self.requests += other.requests;
        self.ok += other.ok;
        self.refused += other.refused;
        self.failed += other.failed;
        self.disconnects += other.disconnects;
        self.unexpected.extend(other.unexpected);
    }
}

/// Runs `clients` clients against `addr`, each sending `per_client`
/// scrapes one after another on its own connection, and adds up what they
/// saw.
pub(crate) async fn round(addr: SocketAddr, clients: u64, per_client: u64, seed: u64) -> Tally {
    let mut set = JoinSet::new();
    for client in 0..clients {
        let mix = Mix(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((client + 1) * 0x2545_F491));
        set.spawn(scrapes(addr, per_client, mix));
    }
    let mut tally = Tally::default();
    while let Some(client) = set.join_next().await {
        tally.add(client.expect("a client task did not panic"));
    }
    tally
}

/// One client: its own `reqwest::Client`, so its own connection.
async fn scrapes(addr: SocketAddr, count: u64, mut mix: Mix) -> Tally {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .expect("reqwest client");
    let mut tally = Tally::default();
    for _ in 0..count {
        let scrape = mix.scrape();
        let url = format!(
            "http://{addr}/metrics?ms={}&fault={}",
            scrape.work_ms,
            scrape.fault.as_str()
        );
        let timeout = if scrape.abandon {
            ABANDON_AFTER
        } else {
            PATIENCE
        };
        tally.requests += 1;
        let answer = async {
            let response = client.get(&url).timeout(timeout).send().await?;
            let status = response.status();
            let retry_after = response.headers().contains_key("retry-after");
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, retry_after, body))
        }
        .await;
        match answer {
            Ok((StatusCode::OK, _, body))
                if scrape.fault == Fault::None && body.starts_with(EXPOSITION_HEAD.as_bytes()) =>
            {
                tally.ok += 1;
            }
            Ok((StatusCode::SERVICE_UNAVAILABLE, true, _)) => tally.refused += 1,
            Ok((StatusCode::INTERNAL_SERVER_ERROR, _, _)) if scrape.fault != Fault::None => {
                tally.failed += 1;
            }
            Err(err) if scrape.abandon && err.is_timeout() => tally.disconnects += 1,
            Ok((status, retry_after, body)) => tally.unexpected.push(format!(
                "{url}: {status} (retry-after: {retry_after}) {:?}",
                String::from_utf8_lossy(&body)
            )),
            Err(err) => tally.unexpected.push(format!("{url}: {err:?}")),
        }
    }
    tally
}

/// What the `/healthz` probe saw.
#[derive(Debug, Default)]
pub(crate) struct Probes {
    /// The latency of every answered probe.
    pub(crate) latencies: Vec<Duration>,
    /// Probes that were not answered `200 ok`, described.
    pub(crate) failures: Vec<String>,
}

impl Probes {
    /// The 99th percentile latency.
    pub(crate) fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let rank = (sorted.len() * 99).div_ceil(100);
        sorted
            .get(rank.saturating_sub(1))
            .copied()
            .unwrap_or_default()
    }
}

/// A probe asking `/healthz` every [`PROBE_EVERY`] on its own connection
/// until `stop` says so.
pub(crate) async fn probe(addr: SocketAddr, mut stop: watch::Receiver<bool>) -> Probes {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .timeout(PATIENCE)
        .build()
        .expect("reqwest client");
    let url = format!("http://{addr}/healthz");
    let mut every = tokio::time::interval(PROBE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probes = Probes::default();
    loop {
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return probes,
            _ = every.tick() => {}
        }
        let asked = Instant::now();
        let answer = async {
            let response = client.get(&url).send().await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.text().await?))
        }
        .await;
        match answer {
            Ok((StatusCode::OK, body)) if body == "ok\n" => {
                probes.latencies.push(asked.elapsed());
            }
            Ok((status, body)) => probes.failures.push(format!("{status} {body:?}")),
            Err(err) => probes.failures.push(format!("{err:?}")),
        }
    }
}
