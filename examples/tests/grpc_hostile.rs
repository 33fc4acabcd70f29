//! Hostile and careless clients against the `grpc-exporter` binary, over
//! real HTTP/2 on 127.0.0.1: health `Watch` streams by the dozen, streams
//! nobody reads, connections that never send the HTTP/2 preface under a
//! lowered descriptor limit, and rapid reset. Each asserts what the issue's
//! probe found broken: health answered `SERVING` within 1.5 s at every
//! probe every 100 ms, capacity back after the progress bound, no spinning,
//! a bounded log, and exit 0 within the deadline at SIGTERM.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use admission_examples::grpc::{RegistryClient, WalkRequest};
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use support::{Service, frame, literal};

/// The bound on every wait that only matters when a test is about to fail.
const PATIENCE: Duration = Duration::from_secs(20);

/// What every health probe must be answered within.
const PROBE_BOUND: Duration = Duration::from_millis(1500);

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The binary with `args`.
async fn exporter(args: &[&str]) -> Service {
    Service::start(env!("CARGO_BIN_EXE_grpc-exporter"), args).await
}

async fn channel(addr: SocketAddr) -> Channel {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).expect("a URI");
    within("a connection", endpoint.connect())
        .await
        .expect("the server accepts")
}

fn overall() -> HealthCheckRequest {
    HealthCheckRequest {
        service: String::new(),
    }
}

/// One probe as a health checker makes it: a new connection, one `Check`,
/// all within [`PROBE_BOUND`]. `Err` says what went wrong.
async fn probe(addr: SocketAddr) -> Result<Duration, String> {
    let started = Instant::now();
    let check = async {
        let endpoint = Endpoint::from_shared(format!("http://{addr}")).expect("a URI");
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let answer = HealthClient::new(channel)
            .check(overall())
            .await
            .map_err(|status| format!("{:?}: {}", status.code(), status.message()))?;
        match answer.into_inner().status() {
            ServingStatus::Serving => Ok(started.elapsed()),
            other => Err(format!("answered {other:?}")),
        }
    };
    tokio::time::timeout(PROBE_BOUND, check)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {PROBE_BOUND:?}")))
}

/// Probes every 100 ms for `span`; panics naming every failed probe.
async fn probe_every_100ms(addr: SocketAddr, span: Duration, during: &str) -> Duration {
    let started = Instant::now();
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    while started.elapsed() < span {
        let next = Instant::now() + Duration::from_millis(100);
        probes += 1;
        match probe(addr).await {
            Ok(took) => slowest = slowest.max(took),
            Err(why) => failed.push(format!("{:?}: {why}", started.elapsed())),
        }
        tokio::time::sleep_until(next.into()).await;
    }
    assert!(
        failed.is_empty(),
        "{} of {probes} health probes failed {during}: {failed:#?}",
        failed.len()
    );
    slowest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_health_watches_leave_check_serving() {
    let mut server = exporter(&["--series", "50"]).await;
    let addr = server.addr;
    let channel = channel(addr).await;

    // 64 watchers, as 64 clients' client-side health checking would open:
    // each gets its first answer and stays open.
    let mut watches = Vec::new();
    for _ in 0..64 {
        let mut watch = within(
            "a Watch to be answered",
            HealthClient::new(channel.clone()).watch(overall()),
        )
        .await
        .expect("a Watch is never refused")
        .into_inner();
        let first: HealthCheckResponse = within("the first status", watch.message())
            .await
            .expect("a status")
            .expect("the stream stays open");
        assert_eq!(first.status(), ServingStatus::Serving);
        watches.push(watch);
    }

    let slowest =
        probe_every_100ms(addr, Duration::from_secs(3), "with 64 Watch streams open").await;
    println!("slowest probe with 64 watches: {slowest:?}");
    server.assert_alive("64 watches");
    drop(watches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_read_streams_give_their_leases_back_at_the_progress_bound() {
    // 16 work leases; every `Stream` call takes one. The clients' windows
    // are HTTP/2's default 64 KiB, far less than one walk's text, so an
    // unread stream stops being polled and, before the bound, held its
    // lease for ever.
    let mut server = exporter(&[
        "--series",
        "20000",
        "--work-slots",
        "16",
        "--progress-timeout-ms",
        "3000",
    ])
    .await;
    let addr = server.addr;

    let mut unread = Vec::new();
    for _ in 0..16 {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .expect("a URI")
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535);
        let connected = within("a connection", endpoint.connect()).await;
        let mut client = RegistryClient::new(connected.expect("the server accepts"));
        let stream = within(
            "a stream's head",
            client.stream(WalkRequest {
                lines_per_message: 100,
            }),
        )
        .await
        .expect("the stream is admitted")
        .into_inner();
        // Never read: the stream and its client stay, unpolled.
        unread.push((client, stream));
    }
    let mut walker = RegistryClient::new(channel(addr).await);
    let Err(refused) = walker.walk(WalkRequest::default()).await else {
        panic!("a Walk was admitted while 16 unread streams should hold every work lease");
    };
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    assert!(
        refused.message().starts_with("ADMISSION_SATURATED"),
        "{}",
        refused.message()
    );

    // Past the bound the leases are back, though nobody read a message.
    let started = Instant::now();
    let admitted = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match walker.walk(WalkRequest::default()).await {
            Ok(walked) => break walked.into_inner(),
            Err(status) => assert!(
                started.elapsed() < Duration::from_secs(10),
                "Walk still refused {:?} after the streams stalled: {:?} {}",
                started.elapsed(),
                status.code(),
                status.message()
            ),
        }
    };
    assert!(admitted.series > 20_000);
    println!("Walk admitted {:?} after the refusal", started.elapsed());
    server.assert_alive("16 unread streams");
    drop(unread);
}

/// A TCP connection that never sends a byte.
async fn idle(addr: SocketAddr) -> Option<TcpStream> {
    tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr))
        .await
        .ok()
        .and_then(Result::ok)
}

/// The binary under `ulimit -n {nofile}` (a shell wrapper that writes its
/// pid, then `exec`s: the pid is the binary's), and the pid.
async fn exporter_under_ulimit(nofile: u32, args: &[&str]) -> (Service, u32) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let unique = format!("{}-{nofile}", std::process::id());
    let script = dir.join(format!("grpc-exporter-ulimit-{unique}.sh"));
    let pid_file = dir.join(format!("grpc-exporter-{unique}.pid"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nulimit -n {nofile}\nexec '{}' \"$@\"\n",
            pid_file.display(),
            env!("CARGO_BIN_EXE_grpc-exporter"),
        ),
    )
    .expect("write the wrapper");
    std::process::Command::new("chmod")
        .args(["+x", &script.display().to_string()])
        .status()
        .expect("chmod runs");
    let server = Service::start(&script.display().to_string(), args).await;
    let pid = std::fs::read_to_string(&pid_file)
        .expect("the wrapper wrote its pid")
        .trim()
        .parse()
        .expect("a pid");
    (server, pid)
}

/// CPU time (user and system) the process has used, from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th fields, in clock ticks (100 per second on Linux).
    let rest = &stat[stat.rfind(')').expect("a command") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_descriptor_limit_leave_health_answered() {
    // 256 descriptors and the default cap of 1024: `accept` runs out of
    // descriptors (EMFILE) long before the cap, as in the probe.
    let (mut server, pid) =
        exporter_under_ulimit(256, &["--series", "50", "--shutdown-deadline-ms", "3000"]).await;
    let addr = server.addr;

    // 1100 connections that never send a byte, opened as fast as the
    // server lets them in, held through the probes. The probes start once
    // the attack has the server at its descriptor limit: what is tested is
    // a health check under the flood. A check whose connection was the
    // oldest waiting one when the flood began may be evicted (the accept
    // loop makes room by closing the connection that has waited longest
    // for a head, however briefly), about one run in fifteen when the
    // first probe raced the attack's first connections.
    let (at_limit, reached) = tokio::sync::oneshot::channel();
    let attack = tokio::spawn(async move {
        let mut held = Vec::new();
        let mut at_limit = Some(at_limit);
        for _ in 0..1100 {
            if let Some(stream) = idle(addr).await {
                held.push(stream);
            }
            if held.len() >= 256
                && let Some(at_limit) = at_limit.take()
            {
                let _ = at_limit.send(());
            }
        }
        held
    });
    // Every connection failing would leave the sender dropped: the probes
    // then run regardless.
    let _ = within("the attack's first 256 connections", reached).await;
    let cpu_before = cpu_time(pid);
    let probing = Instant::now();
    let slowest =
        probe_every_100ms(addr, Duration::from_secs(4), "with 1100 idle connections").await;
    let cpu = cpu_time(pid) - cpu_before;
    let wall = probing.elapsed();
    println!("slowest probe {slowest:?}; server CPU {cpu:?} over {wall:?}");
    assert!(
        cpu < wall / 2,
        "the server does not spin: {cpu:?} of CPU over {wall:?}"
    );
    server.assert_alive("1100 idle connections");
    let held = within("the attack", attack).await.expect("the attack ran");
    println!("attacker connections established: {}", held.len());

    // The WARN lines about it are few: one per 10 s interval and kind.
    let warns = server
        .logs()
        .lines()
        .filter(|line| line.contains("WARN"))
        .count();
    assert!(
        warns <= 4,
        "a bounded log, got {warns} WARN lines:\n{}",
        server.logs()
    );

    // SIGTERM with the idle connections still open: exit 0 within the
    // deadline, not at it.
    let signalled = Instant::now();
    server.terminate();
    let (status, logs) = server.exit_within(Duration::from_secs(10)).await;
    assert!(status.success(), "exit 0: {status:?}\n{logs}");
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "stopped in {:?}, within the 3 s deadline:\n{logs}",
        signalled.elapsed()
    );
    assert!(logs.contains("shutdown drained"), "{logs}");
    drop(held);
}

/// Issue 38.4 at `ulimit -n 64`: the default bound counts the descriptors
/// the process holds at startup and keeps a quarter in reserve, and on
/// `EMFILE` the oldest silent connection is closed, so 200 connections
/// that never send a byte leave every health `Check` answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_answered_at_64_descriptors_under_200_idle_connections() {
    let (mut server, _pid) = exporter_under_ulimit(64, &["--series", "50"]).await;
    let addr = server.addr;
    // The 200 are opened first and held through the probes: a probe that
    // races the opening burst (more newcomers than the bound within the
    // moment its own first bytes take to be read) can be evicted as the
    // longest-waiting connection, as any client that has sent nothing yet.
    let mut held = Vec::new();
    for _ in 0..200 {
        if let Some(stream) = idle(addr).await {
            held.push(stream);
        }
    }
    let slowest =
        probe_every_100ms(addr, Duration::from_secs(4), "at 64 descriptors, 200 idle").await;
    println!("ulimit -n 64, 200 idle connections: slowest Check {slowest:?}");
    server.assert_alive("200 idle connections at 64 descriptors");
    server.terminate();
    let (status, logs) = server.exit_within(Duration::from_secs(10)).await;
    assert!(status.success(), "exit 0: {status:?}\n{logs}");
    drop(held);
}

/// One connection of HTTP/2 rapid reset, written frame by frame (h2's own
/// client will not put a stream's HEADERS and its reset on the wire
/// together): the preface, then `streams` `Walk` calls, each HEADERS
/// followed at once by RST_STREAM(CANCEL), in one write, so that every
/// stream is reset before the server can accept it. Reads until the
/// server closes the connection (its GOAWAY) or 2 s pass.
async fn rapid_reset(addr: SocketAddr, streams: u32) -> u32 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let Ok(Ok(mut tcp)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await
    else {
        return 0;
    };
    let mut burst = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    burst.extend(frame(0x4, 0, 0, &[])); // SETTINGS, none changed
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    literal(&mut block, ":path", admission_examples::grpc::WALK);
    literal(&mut block, ":authority", "127.0.0.1");
    literal(&mut block, "content-type", "application/grpc");
    literal(&mut block, "te", "trailers");
    for n in 0..streams {
        let id = 1 + 2 * n;
        burst.extend(frame(0x1, 0x4, id, &block)); // HEADERS, END_HEADERS
        burst.extend(frame(0x3, 0, id, &8u32.to_be_bytes())); // RST_STREAM CANCEL
    }
    if tcp.write_all(&burst).await.is_err() {
        return 0;
    }
    let mut sink = [0u8; 4096];
    let drain = async {
        while let Ok(n) = tcp.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
    streams
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_is_logged_once_per_interval_and_health_stays_answered() {
    let mut server = exporter(&["--series", "50"]).await;
    let addr = server.addr;
    let started = Instant::now();
    // 400 connections, 100 streams each opened and reset at once: past
    // h2's bound on reset streams a connection is closed with GOAWAY, and
    // h2 logs a WARN for each.
    let attackers: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move {
                let mut sent = 0;
                for _ in 0..50 {
                    sent += rapid_reset(addr, 100).await;
                }
                sent
            })
        })
        .collect();
    let slowest = probe_every_100ms(addr, Duration::from_secs(3), "under rapid reset").await;
    let mut sent = 0;
    for attacker in attackers {
        sent += within("an attacker", attacker)
            .await
            .expect("an attacker ran");
    }
    let took = started.elapsed();
    server.assert_alive("rapid reset");
    let logs = server.logs();
    let warns: Vec<&str> = logs.lines().filter(|line| line.contains("WARN")).collect();
    println!(
        "{sent} streams reset over 400 connections in {took:?}; slowest probe {slowest:?}; \
         {} WARN lines",
        warns.len()
    );
    // One line per 10 s interval at most (and the first at once).
    let bound = 1 + took.as_secs() / 10;
    assert!(
        warns.len() as u64 <= bound,
        "at most {bound} WARN lines in {took:?}, got {}:\n{}",
        warns.len(),
        warns.join("\n")
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_held_by_watch_streams_names_them_not_walks() {
    let server = exporter(&["--series", "50", "--shutdown-deadline-ms", "1000"]).await;
    let mut watch = HealthClient::new(channel(server.addr).await)
        .watch(overall())
        .await
        .expect("a Watch")
        .into_inner();
    let first = within("the first status", watch.message()).await;
    assert!(matches!(first, Ok(Some(_))), "the Watch is answered");

    // The Watch never ends on its own: the graceful shutdown waits for it
    // to the deadline, and the log says so.
    server.terminate();
    let (status, logs) = server.exit_within(Duration::from_secs(10)).await;
    assert!(status.success(), "exit 0: {status:?}\n{logs}");
    assert!(
        logs.contains("at the deadline 0 walks were running, 0 calls held work leases and 1 connections were open"),
        "the real cause of the wait:\n{logs}"
    );
    assert!(!logs.contains("waiting on walks"), "{logs}");
    drop(watch);
}
