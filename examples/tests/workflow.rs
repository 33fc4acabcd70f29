//! The `workflow` binary's contract, checked over HTTP against the real
//! binary on a free port of 127.0.0.1: routes, refusals when the work class
//! is full, background loops that keep cycling meanwhile, and the SIGTERM
//! path, with work finished and with work still running at the deadline.

mod support;

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, LOCATION, RETRY_AFTER};
use reqwest::{Client, StatusCode};
use serde_json::Value;

use support::Service;

/// What the exit may take beyond the shutdown deadline.
const EXIT_SLACK: Duration = Duration::from_millis(1500);

/// The loops every run must show.
const LOOPS: [&str; 4] = ["recovery", "provider", "broker", "native"];

/// Starts `workflow --listen 127.0.0.1:0 --cycle-ms 20 ARGS`.
async fn start(args: &[&str]) -> Service {
    Service::workflow(&[&["--cycle-ms", "20"], args].concat()).await
}

/// `GET /status`, parsed.
async fn get_status(workflow: &Service, client: &Client) -> Value {
    let response = client
        .get(workflow.url("/status"))
        .send()
        .await
        .expect("status answers");
    assert_eq!(response.status(), StatusCode::OK, "status is never refused");
    serde_json::from_str(&response.text().await.unwrap()).expect("status is JSON")
}

/// Sends SIGTERM and waits for the exit, at most `within`; returns its
/// status, how long it took and the logs.
async fn terminate(workflow: Service, within: Duration) -> (ExitStatus, Duration, String) {
    let sent = Instant::now();
    workflow.terminate();
    let (status, logs) = workflow.exit_within(within).await;
    (status, sent.elapsed(), logs)
}

fn client() -> Client {
    Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client")
}

/// `status["pools"][pool][field]` as a number.
fn pool(status: &Value, pool: &str, field: &str) -> u64 {
    status["pools"][pool][field]
        .as_u64()
        .unwrap_or_else(|| panic!("pools.{pool}.{field} is a number in {status}"))
}

/// `status["loops"][name][field]` as a number.
fn counter(status: &Value, name: &str, field: &str) -> u64 {
    status["loops"][name][field]
        .as_u64()
        .unwrap_or_else(|| panic!("loops.{name}.{field} is a number in {status}"))
}

/// Asserts that `response` is a problem document with `code`.
async fn assert_problem(response: reqwest::Response, code: &str) {
    assert_eq!(
        response.headers()[CONTENT_TYPE],
        "application/problem+json",
        "every error answer is a problem document"
    );
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["status"].is_u64() && body["title"].is_string(),
        "{body}"
    );
}

/// `POST /operations?work_ms=0`'s `Retry-After` once the work class is
/// full; polls (at most 2 s) until a POST is refused.
async fn refused_retry_after(workflow: &Service, client: &Client) -> u64 {
    for _ in 0..100 {
        let response = client
            .post(workflow.url("/operations?work_ms=0"))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::SERVICE_UNAVAILABLE {
            return response.headers()[RETRY_AFTER]
                .to_str()
                .unwrap()
                .parse()
                .expect("Retry-After is whole seconds");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the work class never filled");
}

/// Polls `/status` until nothing runs in the work class; at most 10 s.
async fn until_work_is_idle(workflow: &Service, client: &Client) -> Value {
    for _ in 0..500 {
        let status = get_status(workflow, client).await;
        if pool(&status, "work", "running") == 0 && pool(&status, "work", "in_use") == 0 {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the work class never went idle");
}

/// Polls `/status` until the work class holds every slot; at most 2 s.
async fn until_work_is_full(workflow: &Service, client: &Client) -> Value {
    for _ in 0..100 {
        let status = get_status(workflow, client).await;
        if pool(&status, "work", "in_use") == pool(&status, "work", "capacity") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the long POSTs never held every work slot");
}

#[tokio::test]
async fn healthz_and_operations_round_trip() {
    let workflow = start(&[]).await;
    let client = client();

    let health = client.get(workflow.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(health.text().await.unwrap(), "ok\n");

    let created = client
        .post(workflow.url("/operations?work_ms=30"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let location = created.headers()[LOCATION].to_str().unwrap().to_owned();
    let body: Value = serde_json::from_str(&created.text().await.unwrap()).unwrap();
    let id = body["id"]
        .as_u64()
        .expect("the created operation has an id");
    assert_eq!(location, format!("/operations/{id}"));
    assert_eq!(body["state"], "completed", "its transition ran");
    assert_eq!(body["work_ms"], 30);

    let read = client.get(workflow.url(&location)).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let again: Value = serde_json::from_str(&read.text().await.unwrap()).unwrap();
    assert_eq!(again, body, "a read returns what the mutation made");

    let missing = client
        .get(workflow.url(&format!("/operations/{}", id + 1000)))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_problem(missing, "WORKFLOW_NO_SUCH_OPERATION").await;

    let bad = client
        .post(workflow.url("/operations?work_ms=soon"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_problem(bad, "WORKFLOW_BAD_WORK_MS").await;

    let decoded = client
        .post(workflow.url("/operations?work_ms=%35"))
        .send()
        .await
        .unwrap();
    assert_eq!(decoded.status(), StatusCode::CREATED, "%35 decodes to 5");
    let decoded: Value = serde_json::from_str(&decoded.text().await.unwrap()).unwrap();
    assert_eq!(decoded["work_ms"], 5);
    let plus = client
        .post(workflow.url("/operations?work_ms=+5"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        plus.status(),
        StatusCode::BAD_REQUEST,
        "`+` decodes to a space"
    );

    let status = get_status(&workflow, &client).await;
    assert_eq!(
        pool(&status, "work", "admitted"),
        4,
        "each POST took a work lease"
    );
    assert!(
        pool(&status, "control", "admitted") >= 2,
        "each read took a control lease"
    );
}

#[tokio::test]
async fn status_covers_every_loop_and_pool() {
    let workflow = start(&[
        "--work-slots",
        "3",
        "--control-slots",
        "5",
        "--native-capacities",
        "1,2",
    ])
    .await;
    let status = get_status(&workflow, &client()).await;
    let capacities = [
        ("work", 3),
        ("control", 5),
        ("recovery", 2),
        ("provider", 2),
        ("broker", 8),
        ("native", 1 + 2 + 1),
    ];
    for (name, capacity) in capacities {
        assert_eq!(pool(&status, name, "capacity"), capacity, "pool {name}");
        pool(&status, name, "in_use");
        pool(&status, name, "refused");
    }
    for name in LOOPS {
        counter(&status, name, "cycles");
        assert_eq!(counter(&status, name, "refusals"), 0, "loop {name}");
    }
}

#[tokio::test]
async fn loops_keep_cycling_while_requests_saturate_the_work_class() {
    const DEADLINE_MS: u64 = 2000;
    const POSTS: usize = 6;
    let workflow = start(&[
        "--work-slots",
        "2",
        "--shutdown-deadline-ms",
        &DEADLINE_MS.to_string(),
    ])
    .await;
    let client = client();

    let posts: Vec<_> = (0..POSTS)
        .map(|_| {
            let request = client.post(workflow.url("/operations?work_ms=1500"));
            tokio::spawn(async move {
                let response = request.send().await.expect("a POST is answered");
                let retry_after = response.headers().get(RETRY_AFTER).cloned();
                let content_type = response.headers().get(CONTENT_TYPE).cloned();
                (response.status(), retry_after, content_type)
            })
        })
        .collect();

    let first = until_work_is_full(&workflow, &client).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let second = get_status(&workflow, &client).await;
    let health = client.get(workflow.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK, "healthz is never refused");

    for status in [&first, &second] {
        assert_eq!(
            pool(status, "work", "in_use"),
            2,
            "the long POSTs hold every work slot: {status}"
        );
    }
    for name in LOOPS {
        assert!(
            counter(&second, name, "cycles") > counter(&first, name, "cycles"),
            "loop {name} keeps cycling while requests hold every work slot: {first} then {second}"
        );
        assert_eq!(
            counter(&second, name, "refusals"),
            0,
            "loop {name} is never refused"
        );
        assert_eq!(
            counter(&second, name, "failures"),
            0,
            "loop {name} never fails"
        );
    }

    let (mut created, mut refused) = (0, 0);
    for post in posts {
        let (status, retry_after, content_type) = post.await.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                refused += 1;
                let retry_after = retry_after.expect("a refusal says when to retry");
                let seconds: u64 = retry_after.to_str().unwrap().parse().unwrap();
                assert!(seconds >= 1, "Retry-After is whole seconds, at least 1");
                let content_type = content_type.expect("a refusal has a body type");
                assert_eq!(content_type, "application/problem+json");
            }
            other => panic!("a POST is created or refused, got {other}"),
        }
    }
    assert!(created >= 1, "some POSTs were admitted");
    assert!(
        refused >= 1,
        "more POSTs than work slots: some were refused"
    );
    assert_eq!(created + refused, POSTS);
    let after = get_status(&workflow, &client).await;
    assert!(
        pool(&after, "work", "refused") >= refused as u64,
        "every refusal is counted"
    );
    let logs = workflow.logs();
    assert!(
        !logs.contains(" failed ("),
        "no loop logged a failure while requests saturated the service:\n{logs}"
    );

    drop(client);
    let within = Duration::from_millis(DEADLINE_MS) + EXIT_SLACK;
    let (status, took, logs) = terminate(workflow, within).await;
    assert!(
        status.success(),
        "SIGTERM exits 0, got {status}; logs:\n{logs}"
    );
    assert!(took <= within, "exited in {took:?}, within {within:?}");
    assert!(
        logs.contains(r#"drained pool="work""#),
        "the work pool drained:\n{logs}"
    );
    assert!(
        logs.contains("shutdown drained"),
        "nothing was left running:\n{logs}"
    );
}

#[tokio::test]
async fn sigterm_with_work_running_past_the_deadline_exits_by_the_deadline() {
    const DEADLINE_MS: u64 = 1000;
    let workflow = start(&["--shutdown-deadline-ms", &DEADLINE_MS.to_string()]).await;
    let client = client();
    let stuck = client.post(workflow.url("/operations?work_ms=30000"));
    let stuck = tokio::spawn(async move { stuck.send().await.map(|r| r.status()) });
    let second = client.post(workflow.url("/operations?work_ms=30000"));
    let second = tokio::spawn(async move { second.send().await.map(|r| r.status()) });
    until_work_is_full(&workflow, &client).await;

    let within = Duration::from_millis(DEADLINE_MS) + EXIT_SLACK;
    let (status, took, logs) = terminate(workflow, within).await;
    assert!(
        status.success(),
        "SIGTERM exits 0, got {status}; logs:\n{logs}"
    );
    assert!(took <= within, "exited in {took:?}, within {within:?}");
    assert!(
        took >= Duration::from_millis(DEADLINE_MS) - Duration::from_millis(100),
        "it waited for the running work until the deadline, took {took:?}"
    );
    assert!(
        logs.lines()
            .any(|line| line.contains("abandoned:") && line.contains(r#"pool="work" running=2"#)),
        "the running work is reported:\n{logs}"
    );
    assert!(
        logs.contains("shutdown abandoned"),
        "the summary says so:\n{logs}"
    );
    for post in [stuck, second] {
        assert!(
            !matches!(post.await.unwrap(), Ok(StatusCode::CREATED)),
            "work cut at the exit never completed"
        );
    }
}

/// The issue's second case: two clients start ten-minute operations and
/// disconnect. Their work holds the work class (orphaned): a client is
/// refused with a `Retry-After`. That the hint grows with the orphans' age
/// is pinned on a paused clock in admission-core.
#[tokio::test]
async fn retry_after_is_sent_while_orphans_hold_the_work_class() {
    let workflow = start(&["--shutdown-deadline-ms", "500"]).await;
    let client = client();
    for _ in 0..3 {
        let quick = client.post(workflow.url("/operations?work_ms=20")).send();
        assert_eq!(quick.await.unwrap().status(), StatusCode::CREATED);
    }
    for _ in 0..2 {
        // Sent in full, then the client closes its socket (a FIN).
        let mut socket = tokio::net::TcpStream::connect(workflow.addr).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(
            &mut socket,
            b"POST /operations?work_ms=600000 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        )
        .await
        .unwrap();
        drop(socket);
    }
    until_work_is_full(&workflow, &client).await;
    // A slot is taken when a request is admitted, and its work counts as
    // running once a worker thread starts it: on a loaded machine that can
    // come a moment later.
    let mut status = get_status(&workflow, &client).await;
    for _ in 0..100 {
        if pool(&status, "work", "running") == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = get_status(&workflow, &client).await;
    }
    assert_eq!(
        pool(&status, "work", "running"),
        2,
        "both orphans run: {status}"
    );
    // The orphans hold both slots: a POST is refused with a hint in whole
    // seconds within [1, cap]. How the hint grows with the orphans' age
    // (as long again, past the typical 20 ms) is pinned on a paused clock
    // in admission-core (`orphans_far_past_the_typical_work_are_expected_
    // to_run_as_long_again`): this process's pool runs on the real clock,
    // and letting it age would only make the test sleep.
    let hint = refused_retry_after(&workflow, &client).await;
    println!("Retry-After with two orphans running: {hint}");
    assert!(
        (1..=30).contains(&hint),
        "a whole number of seconds within the cap: got {hint}"
    );
    let (status, _, logs) = terminate(workflow, Duration::from_secs(10)).await;
    assert!(status.success(), "exits 0, got {status}; logs:\n{logs}");
}

/// The issue's warm case: one client's two long operations must not steer
/// the hint for everyone. After short operations and two 5 s ones, a
/// client refused while 3 s operations have just started is told 1 s (an
/// exponentially weighted mean of those durations said 3).
#[tokio::test]
async fn retry_after_is_not_steered_by_one_clients_long_operations() {
    let workflow = start(&[]).await;
    let client = client();
    for _ in 0..4 {
        let quick = client.post(workflow.url("/operations?work_ms=50")).send();
        assert_eq!(quick.await.unwrap().status(), StatusCode::CREATED);
    }
    let long = [
        client.post(workflow.url("/operations?work_ms=5000")).send(),
        client.post(workflow.url("/operations?work_ms=5000")).send(),
    ];
    for answer in futures_join(long).await {
        assert_eq!(answer.unwrap().status(), StatusCode::CREATED);
    }
    let running: Vec<_> = (0..2)
        .map(|_| {
            let post = client.post(workflow.url("/operations?work_ms=3000")).send();
            tokio::spawn(async move { post.await.map(|r| r.status()) })
        })
        .collect();
    // Both hold their lease before anyone else asks (a POST sent earlier
    // could take a lease first and have one of them refused).
    until_work_is_full(&workflow, &client).await;
    let hint = refused_retry_after(&workflow, &client).await;
    println!("Retry-After after two 5 s outliers, 3 s work just started: {hint}");
    assert_eq!(
        hint, 1,
        "the median of recent work is 50 ms: the outliers do not steer it"
    );
    for post in running {
        assert_eq!(post.await.unwrap().unwrap(), StatusCode::CREATED);
    }
    let (status, _, logs) = terminate(workflow, Duration::from_secs(10)).await;
    assert!(status.success(), "exits 0, got {status}; logs:\n{logs}");
}

/// Both futures, concurrently.
async fn futures_join<F: std::future::Future>(futures: [F; 2]) -> [F::Output; 2] {
    let [a, b] = futures;
    let (a, b) = tokio::join!(a, b);
    [a, b]
}

/// A client that sends its request and closes its socket (a FIN, not a
/// reset) has gone: its handler is dropped and its work, which runs on,
/// is counted as orphaned when it ends.
#[tokio::test]
async fn a_client_that_closes_with_a_fin_is_counted_as_gone() {
    let workflow = start(&[]).await;
    let client = client();
    let mut socket = tokio::net::TcpStream::connect(workflow.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut socket,
        b"POST /operations?work_ms=1000 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    )
    .await
    .unwrap();
    // Wait until the work runs (at most 1 s), then close: the FIN arrives
    // mid-request.
    let mut running = false;
    for _ in 0..100 {
        if pool(&get_status(&workflow, &client).await, "work", "running") == 1 {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(running, "the operation's work started");
    drop(socket);
    let idle = until_work_is_idle(&workflow, &client).await;
    assert_eq!(
        pool(&idle, "work", "orphaned"),
        1,
        "the work outlived its client, which left with a FIN: {idle}"
    );
    let (status, _, logs) = terminate(workflow, Duration::from_secs(10)).await;
    assert!(status.success(), "exits 0, got {status}; logs:\n{logs}");
}

/// `GET /status` from a client that sends its request as soon as it is
/// connected: the time to the answer and whether it was a `200`.
async fn probe_status(addr: std::net::SocketAddr) -> (Duration, Result<(), String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BOUND: Duration = Duration::from_secs(4);
    let sent = std::time::Instant::now();
    let answer = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = match tokio::time::timeout(BOUND, answer).await {
        Ok(Ok(answer)) if answer.starts_with(b"HTTP/1.1 200 ") => Ok(()),
        Ok(Ok(answer)) => Err(format!("{:?}", String::from_utf8_lossy(&answer))),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("no answer within {BOUND:?}")),
    };
    (sent.elapsed(), answer)
}

/// Finding 5 of issue 26 and 38.3: slowloris on actix-web. Slow senders
/// re-fill the connection bound as soon as a connection frees (each sends
/// half a head, waits for the close, and re-opens at once) while `/status`
/// is probed every 100 ms on a fresh connection that sends its request at
/// once. actix-web's own server could not evict, so a probe waited in the
/// backlog (`2 x client_request_timeout + client_disconnect_timeout + 1 s`
/// was the stated bound); served from the shared accept loop
/// (`admission_actix::serve`), a newcomer evicts the connection that has
/// waited longest for a head, and the probes keep that 4 s bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_answers_within_the_documented_bound_while_slow_senders_refill_the_bound() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    // A newcomer evicts the oldest waiting connection, so a probe must send
    // its head before `MAX` newer attackers arrive: at 32 under the ~3 600
    // connections/s these attackers open on this machine that was 9 ms,
    // and 13 of 76 probes (sent by a test process busy with the attack)
    // were evicted first; 256 gives it ~70 ms.
    const MAX: usize = 256;
    const ATTACKERS: usize = 2 * MAX;
    const HEADER: Duration = Duration::from_millis(1000);
    const ATTACK: Duration = Duration::from_secs(8);
    // 2 x the header timeout, the disconnect timeout (1 s), 1 s of slack.
    const BOUND: Duration = Duration::from_millis(2 * 1000 + 1000 + 1000);
    let workflow = start(&[
        "--max-connections",
        "256",
        "--header-timeout-ms",
        "1000",
        "--idle-timeout-ms",
        "1000",
    ])
    .await;
    let addr = workflow.addr;
    let started = std::time::Instant::now();
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..ATTACKERS {
        attackers.spawn(async move {
            let mut opened = 0_u32;
            while started.elapsed() < ATTACK {
                let Ok(Ok(mut stream)) =
                    tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr)).await
                else {
                    continue;
                };
                opened += 1;
                let _ = stream
                    .write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .await;
                let mut sink = Vec::new();
                let left = ATTACK.saturating_sub(started.elapsed());
                let _ = tokio::time::timeout(left, stream.read_to_end(&mut sink)).await;
            }
            opened
        });
    }
    // Let the attackers fill the bound first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A probe every 100 ms, each on its own connection and task, so a
    // slow one does not delay the next.
    // The probes run on a thread and runtime of their own, as a client
    // apart from the attackers would: the attackers' tasks must not delay
    // a probe's request past its place at the bound.
    let probing = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut probes = tokio::task::JoinSet::new();
            let mut every = tokio::time::interval(Duration::from_millis(100));
            while started.elapsed() < ATTACK {
                every.tick().await;
                probes.spawn(probe_status(addr));
            }
            probes.join_all().await
        })
    });
    let opened: u32 = attackers.join_all().await.into_iter().sum();
    let waits = probing.join().expect("the probes ran");
    let slowest = waits
        .iter()
        .map(|(wait, _)| *wait)
        .max()
        .unwrap_or_default();
    let failed: Vec<_> = waits.iter().filter(|(_, answer)| answer.is_err()).collect();
    println!(
        "{ATTACKERS} slow senders re-filling a bound of {MAX} ({opened} connections in {ATTACK:?}, \
         header timeout {HEADER:?}): {} probes of /status, slowest {slowest:?}, {} failed",
        waits.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "every probe answered: {failed:?}");
    assert!(
        slowest <= BOUND,
        "/status within {BOUND:?}, slowest {slowest:?}"
    );
}
