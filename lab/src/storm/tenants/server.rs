//! The tenants run's server, as a child process: one route whose work holds
//! a slot of a small class, behind one gate.
//!
//! This module owns the gates of the tenants run and the child's side of
//! its control channel (the parent's side is the overload run's
//! `ServerChild`): it prints `listening on ADDR`, serves until its stdin
//! closes, then prints one `memory ...` line with its resident and peak
//! memory. It never measures load: the generator does.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use admission_core::{Admission, Caller, Class, RequestPools};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower_governor::GovernorLayer;
use tower_governor::errors::GovernorError;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;

/// The header that names a request's tenant.
pub const TENANT_HEADER: &str = "x-tenant";

/// What stands in front of the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantGate {
    /// A class whose callers carry their tenant as a flow, failing fast.
    FairFailFast,
    /// The same class, queued: waiters served in fair order.
    FairQueue,
    /// Today's class: one shared line, no flows, failing fast.
    Class,
    /// tower's `GlobalConcurrencyLimit` + `LoadShed`.
    TowerLimit,
    /// `tower_governor` keyed by tenant, each tenant's rate the capacity
    /// divided among the tenants.
    Governor,
    /// tower's `GlobalConcurrencyLimit` alone: every request waits its
    /// turn, so the slots never idle (the capacity probe; not in the
    /// table).
    Patient,
}

impl TenantGate {
    /// Every gate, in the table's order.
    pub const ALL: [TenantGate; 5] = [
        TenantGate::FairFailFast,
        TenantGate::FairQueue,
        TenantGate::Class,
        TenantGate::TowerLimit,
        TenantGate::Governor,
    ];

    /// The gate's name in the table and on the child's command line.
    pub const fn name(self) -> &'static str {
        match self {
            TenantGate::FairFailFast => "fair fail-fast",
            TenantGate::FairQueue => "fair queued",
            TenantGate::Class => "class, no flows",
            TenantGate::TowerLimit => "tower limit+shed",
            TenantGate::Governor => "tower_governor per tenant",
            TenantGate::Patient => "tower limit, no shed",
        }
    }

    const fn arg(self) -> &'static str {
        match self {
            TenantGate::FairFailFast => "fair",
            TenantGate::FairQueue => "fair-queue",
            TenantGate::Class => "class",
            TenantGate::TowerLimit => "tower",
            TenantGate::Governor => "governor",
            TenantGate::Patient => "patient",
        }
    }
}

impl fmt::Display for TenantGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.arg())
    }
}

impl FromStr for TenantGate {
    type Err = String;

    fn from_str(name: &str) -> Result<TenantGate, String> {
        TenantGate::ALL
            .into_iter()
            .chain([TenantGate::Patient])
            .find(|gate| gate.arg() == name)
            .ok_or_else(|| {
                format!("`{name}` is not a tenants gate (fair, fair-queue, class, tower, governor, patient)")
            })
    }
}

/// What one child serves.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::storm::tenants::{TenantGate, TenantSpec};
///
/// let spec = TenantSpec { gate: TenantGate::FairQueue, slots: 4, work: Duration::from_millis(20), tenants: 13 };
/// assert_eq!(TenantSpec::parse(&spec.args()[1..]), Ok(spec));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantSpec {
    /// The gate.
    pub gate: TenantGate,
    /// Slots of the class (the concurrency limit for tower).
    pub slots: usize,
    /// How long each request holds its slot.
    pub work: Duration,
    /// How many tenants share the capacity (the governor's rate divides
    /// it among them).
    pub tenants: usize,
}

impl TenantSpec {
    /// The child's command line: `--serve-tenants GATE SLOTS WORK_MS TENANTS`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--serve-tenants".to_owned(),
            self.gate.to_string(),
            self.slots.to_string(),
            self.work.as_millis().to_string(),
            self.tenants.to_string(),
        ]
    }

    /// Reads what [`args`](Self::args) wrote after its flag.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong.
    pub fn parse(values: &[String]) -> Result<TenantSpec, String> {
        let [gate, slots, work, tenants] = values else {
            return Err("--serve-tenants takes GATE SLOTS WORK_MS TENANTS".to_owned());
        };
        let number = |text: &String| {
            text.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("`{text}` is not a positive number"))
        };
        Ok(TenantSpec {
            gate: gate.parse()?,
            slots: number(slots)?,
            work: Duration::from_millis(number(work)? as u64),
            tenants: number(tenants)?,
        })
    }
}

/// The key of `tower_governor`: the tenant header's value.
#[derive(Debug, Clone, Copy)]
struct Tenant;

impl KeyExtractor for Tenant {
    type Key = String;

    fn extract<T>(&self, request: &http::Request<T>) -> Result<String, GovernorError> {
        request
            .headers()
            .get(TENANT_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

/// The app's state: its pools and how each request is admitted.
#[derive(Clone)]
struct App {
    pools: Option<RequestPools>,
    admission: Admission,
    flows: bool,
    work: Duration,
}

async fn work(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let Some(pools) = &app.pools else {
        tokio::time::sleep(app.work).await;
        return "done\n".into_response();
    };
    let mut caller = Caller::default();
    if app.flows
        && let Some(tenant) = headers.get(TENANT_HEADER)
    {
        caller = caller.with_flow(tenant.as_bytes());
    }
    let lease = caller
        .scope(pools.lease_with(Class::Work, app.admission))
        .await;
    match lease {
        Ok(lease) => {
            tokio::time::sleep(app.work).await;
            drop(lease);
            "done\n".into_response()
        }
        Err(refusal) => (StatusCode::SERVICE_UNAVAILABLE, refusal.code().as_str()).into_response(),
    }
}

async fn overloaded(_: tower::BoxError) -> StatusCode {
    StatusCode::SERVICE_UNAVAILABLE
}

/// The router of `spec`.
fn router(spec: TenantSpec) -> Result<Router, Box<dyn std::error::Error>> {
    let admitted = |admission, flows| -> Result<App, Box<dyn std::error::Error>> {
        Ok(App {
            pools: Some(RequestPools::builder().work(spec.slots).build()?),
            admission,
            flows,
            work: spec.work,
        })
    };
    let bare = App {
        pools: None,
        admission: Admission::FailFast,
        flows: false,
        work: spec.work,
    };
    let app = match spec.gate {
        TenantGate::FairFailFast => admitted(Admission::FailFast, true)?,
        TenantGate::FairQueue => admitted(Admission::Queue, true)?,
        TenantGate::Class => admitted(Admission::FailFast, false)?,
        TenantGate::TowerLimit | TenantGate::Governor | TenantGate::Patient => bare,
    };
    let routes = Router::new()
        .route("/work", get(work))
        .with_state(Arc::new(app));
    Ok(match spec.gate {
        TenantGate::TowerLimit => routes.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(overloaded))
                .layer(LoadShedLayer::new())
                .layer(GlobalConcurrencyLimitLayer::new(spec.slots)),
        ),
        TenantGate::Patient => routes.layer(GlobalConcurrencyLimitLayer::new(spec.slots)),
        TenantGate::Governor => {
            // Each tenant gets the capacity (slots per work time) divided
            // among the tenants, with a burst of one slot's worth.
            let period = spec.work * u32::try_from(spec.tenants).unwrap_or(u32::MAX)
                / u32::try_from(spec.slots).unwrap_or(1);
            let config = GovernorConfigBuilder::default()
                .period(period)
                .burst_size(1)
                .key_extractor(Tenant)
                .finish()
                .ok_or("the governor's period or burst is zero")?;
            routes.layer(GovernorLayer::new(config))
        }
        _ => routes,
    })
}

/// The child's side: serves `spec` on a fresh loopback port, prints
/// `listening on ADDR`, serves until stdin closes, prints `memory
/// rss_kib=N hwm_kib=N`.
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future stops serving without the memory
/// line.
///
/// # Errors
///
/// When the app cannot be built or the port bound or served.
pub async fn serve_tenants(spec: TenantSpec) -> Result<(), Box<dyn std::error::Error>> {
    let app = router(spec)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app.into_make_service())
        .with_graceful_shutdown(async {
            let mut sink = Vec::new();
            let _ = tokio::io::stdin().read_to_end(&mut sink).await;
        })
        .await?;
    let memory = Memory::of_self().unwrap_or_default();
    println!("{}", memory.line());
    Ok(())
}

/// A process's resident memory now and at its peak, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`.
    pub rss_kib: u64,
    /// `VmHWM`: the peak.
    pub hwm_kib: u64,
}

impl Memory {
    fn of_self() -> Option<Memory> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let field = |name: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        Some(Memory {
            rss_kib: field("VmRSS:")?,
            hwm_kib: field("VmHWM:")?,
        })
    }

    fn line(self) -> String {
        format!("memory rss_kib={} hwm_kib={}", self.rss_kib, self.hwm_kib)
    }

    /// Reads the child's `memory ...` line.
    pub(crate) fn parse(line: &str) -> Option<Memory> {
        let rest = line.strip_prefix("memory ")?;
        let mut memory = Memory::default();
        for pair in rest.split_whitespace() {
            let (name, value) = pair.split_once('=')?;
            let value = value.parse().ok()?;
            match name {
                "rss_kib" => memory.rss_kib = value,
                "hwm_kib" => memory.hwm_kib = value,
                _ => return None,
            }
        }
        Some(memory)
    }
}
