//! The balancer pieces over real loopback sockets: the HAProxy agent-check
//! responder's weight falls as blocked workers hold a pool's slots, it says
//! `drain` from the moment shutdown starts and never `up` again, a flood of
//! connections that never read or close stays bounded, and a hostile peer
//! (garbage, never reads) stalls nobody. Readiness ignores saturation.

use std::sync::mpsc;
use std::time::Duration;

use admission_core::{Pool, Shutdown, WorkError};
use admission_http::balancer::{AgentCheck, LoadReport, Readiness};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BOUND: Duration = Duration::from_secs(10);

/// One agent check, as HAProxy makes it: connect, read the line until the
/// agent closes.
async fn ask(addr: std::net::SocketAddr) -> String {
    tokio::time::timeout(BOUND, async {
        let mut stream = TcpStream::connect(addr).await.expect("the agent accepts");
        let mut line = String::new();
        stream
            .read_to_string(&mut line)
            .await
            .expect("the agent's line reads");
        line
    })
    .await
    .expect("the agent answers in time")
}

async fn agent(readiness: Readiness, report: LoadReport, lingering: usize) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        AgentCheck::new(readiness, report)
            .max_lingering(lingering)
            .serve(listener),
    );
    addr
}

/// Starts one piece of work on `pool` that blocks its worker thread until
/// the returned sender is dropped or sent to; returns once it runs.
fn hold_worker(
    pool: &Pool,
) -> (
    mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<(), WorkError<mpsc::RecvError>>>,
) {
    let (release, held) = mpsc::channel::<()>();
    let (running_tx, running_rx) = mpsc::channel::<()>();
    let slot = pool.try_admit().expect("a free slot");
    let work = slot.offload(move || {
        running_tx.send(()).unwrap();
        held.recv()
    });
    let handle = tokio::spawn(work);
    running_rx
        .recv_timeout(BOUND)
        .expect("the worker thread runs the work");
    (release, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weight_falls_as_blocked_workers_fill_the_pool_then_drain_for_good() {
    let shutdown = Shutdown::new(Duration::from_secs(5)).unwrap();
    let pool = Pool::new("registry", 4).unwrap();
    shutdown.register(&pool);
    let readiness = Readiness::new(&shutdown);
    let addr = agent(readiness.clone(), LoadReport::new(&pool), 8).await;

    assert_eq!(ask(addr).await, "up ready 100%\n");
    let mut held = Vec::new();
    for expected in [
        "up ready 75%\n",
        "up ready 50%\n",
        "up ready 25%\n",
        "up ready 1%\n",
    ] {
        held.push(hold_worker(&pool));
        assert_eq!(
            ask(addr).await,
            expected,
            "{} of 4 workers blocked",
            held.len()
        );
    }
    assert!(
        readiness.is_ready(),
        "a saturated pool never flips readiness"
    );

    // Shutdown starts while every worker is still blocked: the very next
    // check says drain, before any work ends.
    let stopping = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { shutdown.shutdown().await }
    });
    readiness.withdrawn().await;
    assert_eq!(ask(addr).await, "drain\n");

    // Slots free up, the pool drains: never `up` again.
    for (release, work) in held {
        release.send(()).unwrap();
        work.await.unwrap().unwrap();
        assert_eq!(
            ask(addr).await,
            "drain\n",
            "slots freed after shutdown began"
        );
    }
    let report = tokio::time::timeout(BOUND, stopping)
        .await
        .unwrap()
        .unwrap();
    assert!(report.drained());
    for _ in 0..5 {
        assert_eq!(ask(addr).await, "drain\n", "never up again");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_stays_bounded_and_checks_still_answer() {
    const FLOOD: usize = 400;
    const LINGERING: usize = 8;
    let shutdown = Shutdown::default();
    let pool = Pool::new("registry", 2).unwrap();
    let addr = agent(Readiness::new(&shutdown), LoadReport::new(&pool), LINGERING).await;
    assert_eq!(ask(addr).await, "up ready 100%\n");
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();

    // Connections that never read and never close, as a flood would open.
    let mut flood = Vec::with_capacity(FLOOD);
    tokio::time::timeout(BOUND, async {
        for _ in 0..FLOOD {
            flood.push(TcpStream::connect(addr).await.expect("the agent accepts"));
        }
    })
    .await
    .expect("the flood connects in time: the agent keeps accepting");
    // Every one of them was answered: its line is there to read.
    let mut first = [0_u8; 16];
    let n = tokio::time::timeout(BOUND, flood[FLOOD - 1].read(&mut first))
        .await
        .expect("the last of the flood is answered in time")
        .unwrap();
    assert_eq!(&first[..n], b"up ready 100%\n");
    // A real check in the middle of the flood is answered at once.
    assert_eq!(ask(addr).await, "up ready 100%\n");

    let alive = metrics.num_alive_tasks();
    assert!(
        alive <= before + LINGERING,
        "{FLOOD} silent connections hold at most {LINGERING} lingering tasks: {before} before, {alive} now"
    );
    drop(flood);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_peer_that_sends_garbage_and_never_reads_stalls_nobody() {
    let shutdown = Shutdown::default();
    let pool = Pool::new("registry", 2).unwrap();
    let addr = agent(Readiness::new(&shutdown), LoadReport::new(&pool), 4).await;

    // Hostile peers that never read their answer nor close: half write
    // far more than the agent ever reads, half a few bytes of garbage (no
    // line end) and then nothing.
    let flood = vec![0xA5_u8; 1 << 20];
    let mut hostile = Vec::new();
    for i in 0..16 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            // The agent stops reading after a few hundred bytes: the write
            // fills the socket buffers and then waits, so bound it.
            let _ =
                tokio::time::timeout(Duration::from_millis(200), stream.write_all(&flood)).await;
        } else {
            stream.write_all(b"\x00GET /\xff").await.unwrap();
        }
        hostile.push(stream);
    }
    // Honest checks meanwhile are answered, each at once.
    for _ in 0..20 {
        let asked = tokio::time::Instant::now();
        assert_eq!(ask(addr).await, "up ready 100%\n");
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "a check waited {:?} behind hostile peers",
            asked.elapsed()
        );
    }
    drop(hostile);
}
