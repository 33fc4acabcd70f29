//! The soak: thousands of scrapes over real HTTP on 127.0.0.1, through the
//! axum adapter and through the actix-web adapter, from many clients at
//! once, a share of which hang up mid-walk and a share of whose walks fail
//! or panic, while a probe asks `/healthz` every 10 ms. Afterwards the
//! design's invariants must still hold:
//!
//! * no more walks ever ran at once than the pool has slots, orphans
//!   included (a gauge inside the work and `peak_running`; invariant 1),
//!   nor were more ever admitted and not yet ended, queued ones included
//!   (the same gauge; invariants 1 and 2);
//! * every slot came back, exactly once (`admitted == released`, and every
//!   slot can be admitted again; invariant 2);
//! * every orphan failure produced exactly one `tracing` event naming the
//!   pool (invariant 7);
//! * `/healthz` answered every probe, and the process's resident memory
//!   stayed within a small factor of its size after a warm-up round.
//!
//! One summary line per adapter is printed (`--nocapture` shows it). The
//! two soaks take turns: each measures the whole process's memory.

#[path = "soak/capture.rs"]
mod capture;
#[path = "soak/load.rs"]
mod load;
#[path = "soak/server.rs"]
mod server;
#[path = "soak/walk.rs"]
mod walk;

use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use admission_core::{Pool, RequestPools};
use tokio::sync::{Mutex, watch};

use load::Tally;
use server::{Adapter, Registry};
use walk::Gauge;

/// Registry workers, and so slots.
const WORKERS: usize = 4;
/// Clients at once, each on its own connection.
const CLIENTS: u64 = 32;
/// Scrapes per client in the warm-up round.
const WARM_UP_PER_CLIENT: u64 = 16;
/// Scrapes per client in the soak round proper.
const SOAK_PER_CLIENT: u64 = 800;
/// The bound on waiting for every slot to come back.
const QUIESCENCE: Duration = Duration::from_secs(10);
/// Resident memory may grow to this factor of its warm size, plus
/// [`RSS_SLACK`].
const RSS_FACTOR: f64 = 1.5;
/// Resident memory may grow this much beyond [`RSS_FACTOR`].
const RSS_SLACK: u64 = 16 * 1024 * 1024;

/// The soaks take turns: each measures the whole process's memory.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_soak_keeps_every_invariant() {
    soak(Adapter::Axum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_soak_keeps_every_invariant() {
    soak(Adapter::Actix).await;
}

/// Keeps the panics the walks were asked for out of the output (hundreds of
/// them, each with a backtrace under `RUST_BACKTRACE=1`, which also costs
/// the soak time and memory); every other panic goes to the default hook.
fn quiet_requested_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&walk::REQUESTED_PANIC) {
                default(info);
            }
        }));
    });
}

/// The process's resident set size, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse().ok())
        .expect("`VmRSS: N kB` in /proc/self/status");
    kib * 1024
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn soak(adapter: Adapter) {
    let _turn = ONE_AT_A_TIME.lock().await;
    capture::install();
    quiet_requested_panics();
    let began = Instant::now();

    let name = format!("soak-{}", adapter.name());
    let pool = Pool::new(name.as_str(), WORKERS).expect("a valid registry pool");
    let gauge = Arc::new(Gauge::default());
    // Room for every client and the probe: only the registry pool refuses.
    let requests = RequestPools::new(8, 64).expect("valid request pools");
    let registry = Registry {
        pool: pool.clone(),
        gauge: Arc::clone(&gauge),
    };
    let server = adapter.serve(&requests, registry);
    let addr = server.addr();

    let (stop_probe, probe_stop) = watch::channel(false);
    // The probe has a thread and runtime of its own: its latency is the
    // server's, not the load generator's scheduling.
    let probe = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the probe's runtime")
            .block_on(load::probe(addr, probe_stop))
    });

    let mut tally = load::round(addr, CLIENTS, WARM_UP_PER_CLIENT, 1).await;
    let warm = rss();
    tally.add(load::round(addr, CLIENTS, SOAK_PER_CLIENT, 2).await);

    stop_probe.send(true).expect("the probe is listening");
    let probes = tokio::task::spawn_blocking(move || probe.join())
        .await
        .expect("join task")
        .expect("the probe did not panic");

    // Quiescence: every slot admitted again, within a bound, means every
    // orphaned walk has ended and released its slot.
    let every_slot = tokio::time::timeout(QUIESCENCE, async {
        let mut slots = Vec::with_capacity(WORKERS);
        for _ in 0..WORKERS {
            slots.push(pool.admit().await.expect("the pool is open"));
        }
        slots
    })
    .await
    .expect("every slot comes back once the orphaned walks end");
    drop(every_slot);
    server.stop().await;
    let end = rss();
    let stats = pool.stats();
    let events = capture::orphan_failures(&name);
    let took = began.elapsed();

    println!(
        "soak {}: requests {} (warm-up {}), ok {}, refused {}, 500s {}, disconnects {}, \
         orphaned {}, orphan failures {} (events {}), peak walks {} (gauge {}, in flight {}) of {}, \
         healthz {} probes p99 {:.1} ms, RSS warm {:.1} MiB end {:.1} MiB, {:.1} s",
        adapter.name(),
        tally.requests,
        CLIENTS * WARM_UP_PER_CLIENT,
        tally.ok,
        tally.refused,
        tally.failed,
        tally.disconnects,
        stats.orphaned,
        stats.orphan_failures,
        events,
        stats.peak_running,
        gauge.peak(),
        gauge.peak_in_flight(),
        WORKERS,
        probes.latencies.len(),
        probes.p99().as_secs_f64() * 1000.0,
        mib(warm),
        mib(end),
        took.as_secs_f64(),
    );

    assert_no_surprises(&tally);
    assert!(
        gauge.peak() <= WORKERS && stats.peak_running <= WORKERS,
        "never more walks at once than slots, orphans included \
         (gauge peak {}, pool peak {}, {WORKERS} slots)",
        gauge.peak(),
        stats.peak_running
    );
    assert!(
        gauge.peak_in_flight() <= WORKERS as isize,
        "never more walks admitted and not yet ended than slots: each keeps \
         its slot until it ends (peak in flight {}, {WORKERS} slots)",
        gauge.peak_in_flight()
    );
    assert!(
        gauge.peak() >= 2,
        "the soak ran walks concurrently (gauge peak {})",
        gauge.peak()
    );
    assert_eq!(
        (gauge.running(), gauge.in_flight(), stats.running),
        (0, 0, 0),
        "no walk is running or in flight after quiescence"
    );
    assert_eq!(stats.in_use, 0, "every slot is back");
    assert_eq!(
        stats.admitted, stats.released,
        "every admitted slot was released exactly once"
    );
    assert!(
        stats.orphaned > 0,
        "the soak orphaned walks (the disconnects reached running walks)"
    );
    assert!(
        stats.orphan_failures > 0,
        "some orphaned walks failed or panicked"
    );
    assert_eq!(
        events as u64, stats.orphan_failures,
        "every orphan failure produced exactly one event naming the pool"
    );
    assert!(
        tally.refused <= stats.refused,
        "every 503 the clients saw was a refusal the pool counted"
    );
    assert!(
        tally.ok + tally.failed + stats.orphaned <= stats.admitted,
        "every walk answered or orphaned was admitted"
    );
    assert!(
        probes.failures.is_empty(),
        "/healthz answered every probe; failures: {:?}",
        probes.failures
    );
    assert!(
        probes.latencies.len() >= 10,
        "the probe ran throughout ({} probes)",
        probes.latencies.len()
    );
    let bound = (warm as f64 * RSS_FACTOR) as u64 + RSS_SLACK;
    assert!(
        end < bound,
        "resident memory stays bounded: {:.1} MiB at the end, {:.1} MiB warm, bound {:.1} MiB",
        mib(end),
        mib(warm),
        mib(bound)
    );
}

/// Every answer was one the scrape could get: `200` for a plain walk, `500`
/// for a failing one, `503` with `Retry-After` for any, a timeout only for
/// an abandoned one.
fn assert_no_surprises(tally: &Tally) {
    assert!(
        tally.unexpected.is_empty(),
        "{} unexpected answers, first: {:?}",
        tally.unexpected.len(),
        tally.unexpected.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        tally.ok + tally.refused + tally.failed + tally.disconnects,
        tally.requests,
        "every scrape is accounted for"
    );
    assert!(tally.ok > 0, "some walks answered");
    assert!(tally.refused > 0, "some scrapes were refused");
    assert!(tally.failed > 0, "some failing walks answered 500");
    assert!(tally.disconnects > 0, "some clients hung up mid-walk");
}
