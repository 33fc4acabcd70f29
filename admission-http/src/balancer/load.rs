//! The replica's load as a balancer reads it.
//!
//! This module owns [`Load`] (one reading, and the two ways it is written
//! for balancers: an HAProxy agent weight and ORCA's `TEXT` header value,
//! both pure functions of the reading) and [`LoadReport`] (the pools it
//! reads, and the one-second window its rates are counted over). It reads
//! pools only through [`Pool::stats`]; it must never admit, refuse or hold
//! a slot, and never carry anything but numbers.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use admission_core::Pool;
use admission_core::pool::HasPools;

/// How long a rate is counted over before it is read again.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One reading of the replica's load.
///
/// # Examples
///
/// ```
/// use admission_http::balancer::Load;
///
/// let load = Load::new(0.5, 40.0, 2.0);
/// assert_eq!(load.agent_weight(), 50);
/// assert_eq!(load.orca_text(), "TEXT application_utilization:0.500,rps_fractional:40.000,eps:2.000");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
#[doc(hidden)]
pub struct Load {
    /// The fullest pool's share of slots held, `0.0..=1.0`: the most
    /// loaded pool decides, since a request that needs it is refused when
    /// it is full however empty the others are.
    pub utilization: f64,
    /// Slots handed out per second, summed over the pools, over the last
    /// [`RATE_WINDOW`] (or longer, when nothing read it sooner).
    pub rps: f64,
    /// Admissions refused per second, summed over the pools, over the same
    /// window.
    pub eps: f64,
}

impl Load {
    /// A reading; a value below zero or not a number counts as zero, and
    /// `utilization` is capped at 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::Load;
    ///
    /// assert_eq!(Load::new(1.7, -1.0, f64::NAN), Load::new(1.0, 0.0, 0.0));
    /// ```
    pub fn new(utilization: f64, rps: f64, eps: f64) -> Load {
        let sane = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
        Load {
            utilization: sane(utilization).min(1.0),
            rps: sane(rps),
            eps: sane(eps),
        }
    }

    /// The HAProxy agent-check weight, in percent of the configured weight:
    /// the free share of the fullest pool, `100 × (1 − utilization)`,
    /// rounded down, and never below 1.
    ///
    /// Free slots are what a new request needs, so the replica with more of
    /// them free gets proportionally more of the next requests. The floor
    /// is 1, not 0, because HAProxy treats a zero weight like `drain` (the
    /// server leaves the farm): saturation must not eject a replica, or a
    /// storm that fills every replica would leave HAProxy none to send to.
    /// A saturated replica refuses with `503` at once and HAProxy's
    /// `retry-on 503` sends the request elsewhere.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::Load;
    ///
    /// assert_eq!(Load::new(0.0, 0.0, 0.0).agent_weight(), 100);
    /// assert_eq!(Load::new(0.27, 0.0, 0.0).agent_weight(), 73);
    /// assert_eq!(Load::new(1.0, 0.0, 0.0).agent_weight(), 1, "full, but still in the farm");
    /// ```
    pub fn agent_weight(&self) -> u8 {
        let free = (1.0 - self.utilization) * 100.0;
        // 1e-9: 0.27 is not exact in binary and 100 × 0.73 is 72.999…
        let percent = (free + 1e-9).floor().clamp(1.0, 100.0);
        percent as u8
    }

    /// The value of ORCA's `endpoint-load-metrics` header in its `TEXT` form
    /// (`admission-http`'s `ORCA_HEADER` names the header):
    /// `TEXT application_utilization:U,rps_fractional:R,eps:E`.
    ///
    /// Checked against Envoy's source (`source/common/orca/orca_parser.cc`):
    /// the value starts with `TEXT `, then comma-separated `name:value`
    /// pairs (Envoy 1.40 also takes `name=value`; the versions between the
    /// `TEXT` prefix's arrival and then take only `:`, so `:` is written).
    /// Envoy's client-side weighted round robin
    /// (`envoy.load_balancing_policies.client_side_weighted_round_robin`,
    /// documented from v1.32, where it was marked work in progress, and as
    /// functional from v1.34) weighs an endpoint `rps_fractional /
    /// (utilization + eps / rps_fractional × error_utilization_penalty)`,
    /// taking `application_utilization` when above zero
    /// (`client_side_weighted_round_robin_lb.cc`), and drops a report whose
    /// `rps_fractional` or utilization is zero: an idle replica's report
    /// changes no weight. So the weight Envoy computes is the rate this
    /// replica sustains per unit of pool occupancy, lowered by its
    /// refusals.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::Load;
    ///
    /// assert_eq!(
    ///     Load::new(1.0, 12.5, 30.0).orca_text(),
    ///     "TEXT application_utilization:1.000,rps_fractional:12.500,eps:30.000"
    /// );
    /// ```
    pub fn orca_text(&self) -> String {
        let mut text = String::with_capacity(72);
        let _ = write!(
            text,
            "TEXT application_utilization:{:.3},rps_fractional:{:.3},eps:{:.3}",
            self.utilization, self.rps, self.eps
        );
        text
    }
}

/// The pools a replica reports on, and the window its rates are counted
/// over. Clones share both.
///
/// # Examples
///
/// ```
/// use admission_http::balancer::LoadReport;
/// use admission_core::{Pool, RequestPools};
///
/// let registry = Pool::new("registry", 2).unwrap();
/// let report = LoadReport::new(&registry).and(&RequestPools::new(2, 4).unwrap());
/// let _slot = registry.try_admit().unwrap();
/// assert_eq!(report.load().utilization, 0.5, "the fullest pool decides");
/// ```
#[derive(Debug, Clone)]
pub struct LoadReport {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pools: Vec<Pool>,
    window: Mutex<Window>,
}

/// The counters at the window's start and the rates of the last window.
#[derive(Debug)]
struct Window {
    started: Instant,
    admitted: u64,
    refused: u64,
    rps: f64,
    eps: f64,
}

impl Default for LoadReport {
    /// A report on no pool: zero load, full weight (for an app whose work
    /// runs behind no admission pool).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::LoadReport;
    ///
    /// assert_eq!(LoadReport::default().load().agent_weight(), 100);
    /// ```
    fn default() -> Self {
        LoadReport::from_pools(Vec::new())
    }
}

impl LoadReport {
    /// Reports on every pool `owner` has (a [`Pool`], the request pools, a
    /// reservation or a loop owner).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    /// use admission_http::balancer::LoadReport;
    ///
    /// let report = LoadReport::new(&Pool::new("registry", 2).unwrap());
    /// assert_eq!(report.load().utilization, 0.0);
    /// ```
    pub fn new<P: HasPools + ?Sized>(owner: &P) -> LoadReport {
        LoadReport::from_pools(Vec::new()).and(owner)
    }

    fn from_pools(pools: Vec<Pool>) -> LoadReport {
        let (admitted, refused) = totals(&pools);
        LoadReport {
            inner: Arc::new(Inner {
                pools,
                window: Mutex::new(Window {
                    started: Instant::now(),
                    admitted,
                    refused,
                    rps: 0.0,
                    eps: 0.0,
                }),
            }),
        }
    }

    /// This report and every pool `owner` has; the rate window starts
    /// again.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::LoadReport;
    /// use admission_core::{Pool, RequestPools};
    ///
    /// let requests = RequestPools::new(1, 4).unwrap();
    /// let report = LoadReport::new(&Pool::new("registry", 2).unwrap()).and(&requests);
    /// let _lease = requests.try_lease(admission_core::Class::Work).unwrap();
    /// assert_eq!(report.load().utilization, 1.0);
    /// ```
    #[must_use]
    pub fn and<P: HasPools + ?Sized>(self, owner: &P) -> LoadReport {
        let mut pools = self.inner.pools.clone();
        owner.each_pool(&mut |pool| {
            if !pools.iter().any(|p| p.same_pool(pool)) {
                pools.push(pool.clone());
            }
        });
        LoadReport::from_pools(pools)
    }

    /// The load now: utilization from the slots held this instant, rates
    /// from the last full [`RATE_WINDOW`] (zero until one has passed).
    ///
    /// It costs one [`Pool::stats`] per pool and an uncontended lock; a
    /// window closes on the first reading after it has run its length.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::LoadReport;
    /// use admission_core::{Admission, Pool};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let report = LoadReport::new(&pool);
    /// for _ in 0..3 {
    ///     pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast).await.unwrap();
    /// }
    /// tokio::time::advance(std::time::Duration::from_secs(1)).await;
    /// let load = report.load();
    /// assert!((load.rps - 3.0).abs() < 0.1, "3 walks in one second: {}", load.rps);
    /// # }
    /// ```
    #[doc(hidden)]
    pub fn load(&self) -> Load {
        let mut utilization: f64 = 0.0;
        let (mut admitted, mut refused) = (0, 0);
        for pool in &self.inner.pools {
            let stats = pool.stats();
            if stats.capacity > 0 {
                utilization = utilization.max(stats.in_use as f64 / stats.capacity as f64);
            }
            admitted += stats.admitted;
            refused += stats.refused;
        }
        let now = Instant::now();
        let mut window = self
            .inner
            .window
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(window.started);
        if elapsed >= RATE_WINDOW {
            let secs = elapsed.as_secs_f64();
            window.rps = admitted.saturating_sub(window.admitted) as f64 / secs;
            window.eps = refused.saturating_sub(window.refused) as f64 / secs;
            window.started = now;
            window.admitted = admitted;
            window.refused = refused;
        }
        Load::new(utilization, window.rps, window.eps)
    }
}

fn totals(pools: &[Pool]) -> (u64, u64) {
    pools.iter().fold((0, 0), |(a, r), pool| {
        let stats = pool.stats();
        (a + stats.admitted, r + stats.refused)
    })
}
