//! The open-loop load generator: Poisson arrivals at a fixed rate,
//! whatever the server answers.
//!
//! This module owns [`OpenLoop`] and its run: the arrival schedule, one
//! request per arrival on a connection of its own, and the bound on
//! requests waiting at once. It must never let an answer (or its absence)
//! slow the arrivals: a closed-loop client, which sends its next request
//! only after the last answer, sends less exactly when the server is
//! overloaded and so hides the overload it should measure.
//!
//! # One connection per request
//!
//! Each arrival opens a new TCP connection, sends one `GET`, reads the
//! answer to the end of its body and closes. A pool of kept-alive HTTP/1.1
//! connections would make an arrival wait for a free connection whenever
//! every pooled one waits on a slow answer, which is the closed loop again
//! by another door; and closing the connection at the client's timeout is
//! how the server learns that nobody waits for the answer any more. On
//! loopback a connection costs tens of microseconds, small beside a walk.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use admission_lab::storm::open_loop::{Criticality, OpenLoop};
//!
//! # #[tokio::main]
//! # async fn main() {
//! let mut load = OpenLoop::new("http://127.0.0.1:9464/metrics".parse().unwrap(), 200.0);
//! load.duration = Duration::from_secs(5);
//! load.timeout = Duration::from_millis(100);
//! load.mix = "critical=0.1,sheddable=0.9".parse().unwrap();
//! let report = load.run().await;
//! let critical = report.level(Criticality::Critical);
//! println!("critical goodput {:.1}/s", critical.goodput(report.window));
//! # }
//! ```

mod mix;
mod report;

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout_at};

pub use self::mix::{BUDGET_HEADER, BadMix, CRITICALITY_HEADER, Criticality, Mix};
use self::report::End;
pub use self::report::{Outcomes, Report};
use super::Target;
use super::client::Conn;

/// One open-loop run's settings; [`OpenLoop::new`] fills in the defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::storm::open_loop::{Mix, OpenLoop};
///
/// let load = OpenLoop::new("http://127.0.0.1:9464/metrics".parse().unwrap(), 90.0);
/// assert_eq!(load.duration, Duration::from_secs(5));
/// assert_eq!(load.timeout, Duration::from_millis(100));
/// assert_eq!(load.mix, Mix::default());
/// assert_eq!(load.budget, None);
/// assert!(load.headers.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OpenLoop {
    /// Where every request goes (`GET`).
    pub target: Target,
    /// Mean arrivals per second (`--rate`). Not finite or not positive:
    /// no arrivals.
    pub rate: f64,
    /// How long arrivals are drawn for (`--duration-ms`, default 5000).
    /// The run then waits at most `timeout` more for the last answers.
    pub duration: Duration,
    /// How long a request may take, from its scheduled arrival to the end
    /// of its answer's body, before the client closes its connection and
    /// counts it as timed out (`--timeout-ms`, default 100).
    pub timeout: Duration,
    /// Which criticality each request carries (`--mix`; default: no
    /// header).
    pub mix: Mix,
    /// The time budget of each request, counted from its scheduled
    /// arrival (`--budget-ms`; default: no header). Usually the client
    /// timeout. Each request announces in [`BUDGET_HEADER`] what is left of
    /// it when the request is written (after its connection opened), in
    /// whole milliseconds rounded down.
    pub budget: Option<Duration>,
    /// At most this many requests waiting at once (`--max-outstanding`,
    /// default 4096); an arrival beyond it is counted as dropped, not sent
    /// and not delayed.
    pub max_outstanding: usize,
    /// Seed of the arrival schedule and the criticality draws (`--seed`,
    /// default 1): the same seed and rate draw the same schedule.
    pub seed: u64,
    /// Headers every request carries as they are (default none): the
    /// tenants run names each tenant's requests with one.
    pub headers: Vec<(&'static str, String)>,
}

impl OpenLoop {
    /// `rate` requests per second at `target`, with the defaults above.
    pub fn new(target: Target, rate: f64) -> OpenLoop {
        OpenLoop {
            target,
            rate,
            duration: Duration::from_secs(5),
            timeout: Duration::from_millis(100),
            mix: Mix::default(),
            budget: None,
            max_outstanding: 4096,
            seed: 1,
            headers: Vec::new(),
        }
    }

    /// Sends Poisson arrivals for [`duration`](Self::duration), each on a
    /// new connection, and returns what they got once the last one has
    /// ended (by `duration + timeout` at most, plus scheduling noise).
    ///
    /// Arrivals are drawn on the calling task and each request runs on a
    /// task of its own, so a slow or silent server never delays the next
    /// arrival; when the generator itself falls behind, the lateness is in
    /// [`Report::max_lag`] and in the latencies.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in the sense that nothing leaks: dropping the future
    /// aborts the requests still waiting (their connections close) and
    /// discards the counts.
    pub async fn run(&self) -> Report {
        let mut report = Report::new(self.duration, self.timeout);
        let mut rng = SmallRng::seed_from_u64(self.seed);
        let mut requests: JoinSet<(Criticality, End)> = JoinSet::new();
        let start = Instant::now();
        let end = start + self.duration;
        let mut next = start;
        // A rate that is not a positive number draws no arrivals.
        let rate = if self.rate.is_finite() && self.rate > 0.0 {
            self.rate
        } else {
            0.0
        };
        loop {
            if rate <= 0.0 {
                break;
            }
            // Exponential gaps: 1 - u is in (0, 1], so the log is finite.
            let gap = -(1.0 - rng.random::<f64>()).ln() / rate;
            next += Duration::from_secs_f64(gap);
            if next >= end {
                break;
            }
            let level = self.mix.pick(rng.random::<f64>());
            if next > Instant::now() {
                sleep_until(next).await;
            }
            report.max_lag = report.max_lag.max(next.elapsed());
            while let Some(done) = requests.try_join_next() {
                count(&mut report, &done);
            }
            let outcomes = report.level_mut(level);
            outcomes.offered += 1;
            if requests.len() >= self.max_outstanding {
                outcomes.dropped += 1;
                continue;
            }
            let mut headers = self.headers.clone();
            if self.mix.sends_header() {
                headers.push((CRITICALITY_HEADER, level.as_str().to_owned()));
            }
            let target = self.target.clone();
            let deadline = next + self.timeout;
            let scheduled = next;
            let budget = self.budget;
            requests.spawn(async move {
                let end = one(&target, &headers, budget, scheduled, deadline).await;
                (level, end)
            });
        }
        while let Some(done) = requests.join_next().await {
            count(&mut report, &done);
        }
        report.finish();
        report
    }
}

fn count(report: &mut Report, done: &Result<(Criticality, End), tokio::task::JoinError>) {
    match *done {
        Ok((level, end)) => report.level_mut(level).count(end),
        // A request task cannot panic short of a bug in hyper; count it
        // where every level's totals still see it.
        Err(_) => report.level_mut(Criticality::Default).count(End::Error),
    }
}

/// One request on a new connection, bounded by `deadline`; `budget`, if
/// any, is announced as what is left of it when the request is written.
async fn one(
    target: &Target,
    headers: &[(&'static str, String)],
    budget: Option<Duration>,
    scheduled: Instant,
    deadline: Instant,
) -> End {
    let answered = timeout_at(deadline, async {
        let mut conn = Conn::open(target).await.map_err(drop)?;
        // The time left, in whole milliseconds rounded down, as a client
        // that has already spent part of its budget would say it.
        let left = budget.map(|b| {
            b.saturating_sub(scheduled.elapsed())
                .as_millis()
                .to_string()
        });
        let mut all: Vec<(&'static str, &str)> =
            headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        if let Some(left) = &left {
            all.push((BUDGET_HEADER, left));
        }
        let request = target.request_with(&all).map_err(drop)?;
        conn.send(request).await.map_err(drop)
        // The connection closes here, or at the timeout when this future
        // is dropped: either way the server sees the client leave.
    })
    .await;
    match answered {
        Err(_timed_out) => End::TimedOut,
        Ok(Err(())) => End::Error,
        // An answer that the task saw only after the deadline (the
        // generator was busy) was not in time for the client either.
        Ok(Ok(_)) if Instant::now() > deadline => End::TimedOut,
        Ok(Ok(status)) => {
            let latency = scheduled.elapsed();
            if status.is_success() {
                End::Good(latency)
            } else if status.as_u16() == 503 || status.as_u16() == 429 {
                End::Refused(latency)
            } else {
                End::Error
            }
        }
    }
}
