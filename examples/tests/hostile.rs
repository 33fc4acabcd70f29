//! Malformed and hostile HTTP against the real `exporter` and `workflow`
//! binaries, over raw sockets on 127.0.0.1: garbage request lines, binary
//! noise, huge and broken headers, bad percent-encoding, unknown methods,
//! broken framing, truncated requests, and invalid `work_ms` values for
//! `POST /operations`. Afterwards each process must still be alive, answer
//! `/healthz` with `200`, shut down cleanly on SIGTERM, and never have
//! written "panicked at" to stderr. No answer may be a `500`.
//!
//! Every case runs at once, each on its own connection, and each waits at
//! most [`ANSWER`] for an answer, so a binary's whole run is bounded.
//!
//! Then the attacks that once took a binary off the air or flooded its
//! logs: slowloris at the descriptor limit (the exporter under `ulimit -n
//! 1024` with 1100 unfinished requests: `/healthz` must keep answering and
//! memory must stay flat), half-sent requests past the header-read timeout,
//! error answers that must not echo the request, and thousands of
//! malformed requests that must not write thousands of log lines.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use support::Service;

/// How long a case waits for the head of an answer; a server still waiting
/// for the rest of a malformed request may give none.
const ANSWER: Duration = Duration::from_secs(3);
/// How long a binary may take to exit after SIGTERM (its drain deadline is
/// 5 s by default, and nothing is running).
const EXIT: Duration = Duration::from_secs(15);

/// One malformed request: what is sent, and whether the client then hangs
/// up at once instead of waiting for an answer.
#[derive(Debug, Clone)]
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    hang_up: bool,
}

fn case(name: &'static str, bytes: impl Into<Vec<u8>>) -> Case {
    Case {
        name,
        bytes: bytes.into(),
        hang_up: false,
    }
}

/// A request cut short: sent, then the connection is closed.
fn truncated(name: &'static str, bytes: impl Into<Vec<u8>>) -> Case {
    Case {
        hang_up: true,
        ..case(name, bytes)
    }
}

/// Cases every HTTP/1.1 server must survive.
fn malformed() -> Vec<Case> {
    // Past hyper's and actix-web's limits on a head.
    let huge = "a".repeat(1024 * 1024);
    let many: String = (0..2000).map(|i| format!("X-H{i}: {i}\r\n")).collect();
    let noise: Vec<u8> = (0..=255u8).cycle().take(8192).collect();
    vec![
        case("garbage request line", "GARBAGE\r\n\r\n"),
        case("binary noise", noise),
        case("only line feeds", "\n\n\n\n"),
        case("request line without a version", "GET /healthz\r\n\r\n"),
        case(
            "unknown version",
            "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n",
        ),
        case(
            "version garbage",
            "GET /healthz HTTQ/1.x\r\nHost: x\r\n\r\n",
        ),
        case(
            "HTTP/2 preface on HTTP/1",
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ),
        case(
            "huge header",
            format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {huge}\r\n\r\n"),
        ),
        case(
            "thousands of headers",
            format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{many}\r\n"),
        ),
        case(
            "huge request line",
            format!("GET /{huge} HTTP/1.1\r\nHost: x\r\n\r\n"),
        ),
        case(
            "bad percent-encoding in the path",
            "GET /%zz%%/%ff%fe%00%C0%AF HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "bad percent-encoding in the query",
            "GET /metrics?%zz=%%&%E0%A4%A&%ff=%fe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "bad percent-encoding on /healthz",
            "GET /healthz?%%%=%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "control bytes in the target",
            b"GET /metrics\x01\x7f?\x02 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        case(
            "NUL in a header value",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n".to_vec(),
        ),
        case(
            "header without a colon",
            "GET /metrics HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
        ),
        case(
            "space before the colon",
            "GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n",
        ),
        case(
            "unknown method",
            "FOO /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "extension method",
            "PROPFIND / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "method name of 4 KiB",
            format!("{} /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "M".repeat(4096)),
        ),
        case(
            "CONNECT",
            "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
        ),
        case(
            "TRACE",
            "TRACE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "asterisk form",
            "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "absolute form",
            "GET http://evil.invalid/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
        case(
            "non-numeric content-length",
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        ),
        case(
            "negative content-length",
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        ),
        case(
            "conflicting content-lengths",
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        ),
        case(
            "bad chunk size",
            "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        ),
        case(
            "chunked and content-length",
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
        truncated("truncated request line", "GET /metr"),
        truncated(
            "truncated head",
            "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Half: ab",
        ),
        truncated(
            "truncated body",
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc",
        ),
        truncated("connect and say nothing", ""),
    ]
}

/// `POST /operations?work_ms=VALUE`, complete.
fn create(value: &str) -> String {
    format!(
        "POST /operations?work_ms={value} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

/// The workflow's own inputs: invalid `work_ms` values and operation ids,
/// each of which must get a `4xx`.
fn workflow_inputs() -> Vec<Case> {
    let read =
        |id: &str| format!("GET /operations/{id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    vec![
        case("work_ms=abc", create("abc")),
        case("work_ms=-1", create("-1")),
        case("work_ms above u64", create("99999999999999999999999999")),
        case("work_ms=u64::MAX", create("18446744073709551615")),
        case("work_ms empty", create("")),
        case("work_ms=1e3", create("1e3")),
        case("work_ms=0x10", create("0x10")),
        case("work_ms=%zz", create("%zz")),
        case("work_ms NaN", create("NaN")),
        case("work_ms valid then invalid", create("1&work_ms=abc")),
        case(
            "work_ms without a value",
            "POST /operations?work_ms HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
        case("operation id abc", read("abc")),
        case("operation id -1", read("-1")),
        case("operation id above u64", read("99999999999999999999999999")),
        case("operation id %zz", read("%zz")),
        case(
            "POST with a garbage body",
            "POST /operations?work_ms=1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{\"a\":[",
        ),
        case(
            "POST /operations with a bad chunk size",
            "POST /operations?work_ms=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        ),
        truncated(
            "POST /operations truncated",
            "POST /operations?work_ms=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{",
        ),
    ]
}

/// What a case got back.
#[derive(Debug)]
enum Outcome {
    /// The status code of the answer's head.
    Answered(u16),
    /// The server closed the connection without an answer.
    Closed,
    /// No answer within [`ANSWER`] (the server waits for more).
    Silent,
    /// The client hung up on purpose.
    HungUp,
}

/// Sends `case` on a fresh connection and reads the head of the answer.
async fn send(addr: SocketAddr, case: Case) -> (Case, Outcome) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    // The server may close early on a request it rejects: later writes
    // failing is part of the case.
    let _ = stream.write_all(&case.bytes).await;
    let _ = stream.flush().await;
    if case.hang_up {
        drop(stream);
        return (case, Outcome::HungUp);
    }
    let read = async {
        let mut head = Vec::new();
        let mut buf = [0; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        head
    };
    let outcome = match tokio::time::timeout(ANSWER, read).await {
        Err(_) => Outcome::Silent,
        Ok(head) if head.is_empty() => Outcome::Closed,
        Ok(head) => {
            let text = String::from_utf8_lossy(&head);
            let status = text
                .strip_prefix("HTTP/1.1 ")
                .or_else(|| text.strip_prefix("HTTP/1.0 "))
                .and_then(|rest| rest.get(..3))
                .and_then(|code| code.parse().ok())
                .unwrap_or_else(|| panic!("{}: an HTTP answer, got {text:?}", case.name));
            Outcome::Answered(status)
        }
    };
    (case, outcome)
}

/// Sends every case at once and returns what each got.
async fn send_all(addr: SocketAddr, cases: Vec<Case>) -> Vec<(Case, Outcome)> {
    let mut set = JoinSet::new();
    for case in cases {
        set.spawn(send(addr, case));
    }
    let mut outcomes = Vec::new();
    while let Some(sent) = set.join_next().await {
        outcomes.push(sent.expect("a case's task did not panic"));
    }
    outcomes
}

/// `GET /healthz` on a fresh connection answers `200`.
async fn assert_healthy(addr: SocketAddr, after: &str) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let response = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap_or_else(|err| panic!("/healthz answers after {after}: {err}"));
    assert_eq!(
        response.status(),
        reqwest::StatusCode::OK,
        "/healthz answers 200 after {after}"
    );
}

/// Runs `cases` against `binary`, then checks it is alive and healthy,
/// exits cleanly on SIGTERM and never panicked.
async fn survives(binary: &str, args: &[&str], cases: Vec<Case>) -> Vec<(Case, Outcome)> {
    let mut service = Service::start(binary, args).await;
    let count = cases.len();
    let outcomes = send_all(service.addr, cases).await;
    let name = std::path::Path::new(binary)
        .file_name()
        .map_or_else(|| binary.into(), |name| name.to_string_lossy());
    for (case, outcome) in &outcomes {
        println!("{name}: {}: {outcome:?}", case.name);
    }
    let after = format!("{count} malformed requests");
    for (case, outcome) in &outcomes {
        if let Outcome::Answered(status) = outcome {
            assert!(
                *status < 500 || *status == 503,
                "{}: a malformed request gets a client error, never {status}",
                case.name
            );
        }
    }
    service.assert_alive(&after);
    assert_healthy(service.addr, &after).await;
    service.terminate();
    let (status, stderr) = service.exit_within(EXIT).await;
    assert!(
        !stderr.contains("panicked at"),
        "no handler panicked; stderr:\n{stderr}"
    );
    assert!(
        status.success(),
        "a clean exit on SIGTERM, got {status}; stderr:\n{stderr}"
    );
    outcomes
}

#[tokio::test]
async fn exporter_survives_malformed_requests() {
    survives(
        env!("CARGO_BIN_EXE_exporter"),
        &["--series", "200"],
        malformed(),
    )
    .await;
}

#[tokio::test]
async fn workflow_survives_malformed_requests() {
    let mut cases = malformed();
    cases.extend(workflow_inputs());
    // Every case is sent at once: with the default two work slots, a bad
    // `work_ms` could meet a full work class and be refused (503) before it
    // is parsed. Room for all of them keeps this test about parsing.
    let outcomes = survives(
        env!("CARGO_BIN_EXE_workflow"),
        &["--work-slots", "64", "--control-slots", "64"],
        cases,
    )
    .await;
    for (case, outcome) in &outcomes {
        if case.name.starts_with("work_ms") || case.name.starts_with("operation id") {
            assert!(
                matches!(outcome, Outcome::Answered(400..=499)),
                "{}: an invalid value gets a 4xx, got {outcome:?}",
                case.name
            );
        }
    }
}

/// Asserts that `raw` (a whole answer) repeats none of `sent`.
fn assert_no_echo(raw: &str, sent: &[&str], case: &str) {
    let lower = raw.to_lowercase();
    for fragment in sent {
        assert!(
            !lower.contains(&fragment.to_lowercase()),
            "{case}: the answer repeats {fragment:?}:\n{raw}"
        );
    }
}

/// Sends `request` on a fresh connection and reads the whole answer (the
/// request asks for `Connection: close`), at most [`ANSWER`].
async fn whole_answer(addr: SocketAddr, request: &str) -> String {
    whole_answer_within(addr, request, ANSWER).await
}

/// [`whole_answer`], waiting at most `within`.
async fn whole_answer_within(addr: SocketAddr, request: &str, within: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut answer))
        .await
        .expect("an answer in time")
        .expect("readable");
    String::from_utf8_lossy(&answer).into_owned()
}

/// The body of a raw answer.
fn body_of(raw: &str) -> &str {
    raw.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

#[tokio::test]
async fn workflow_error_answers_are_problem_documents_that_echo_nothing() {
    let mut workflow = Service::workflow(&[]).await;
    let long_id = "7".repeat(10_000);
    let cases = [
        (
            "markup in the id",
            "/operations/%3Cscript%3Ealert(1)%3C%2Fscript%3E".to_owned(),
            400,
            "WORKFLOW_BAD_OPERATION_ID",
            vec!["<script", "alert(1)", "%3Cscript"],
        ),
        (
            "a 10 000-digit id",
            format!("/operations/{long_id}"),
            400,
            "WORKFLOW_BAD_OPERATION_ID",
            vec!["7777777777"],
        ),
        (
            "CRLF in the id",
            "/operations/1%0d%0aX-Evil:%20yes".to_owned(),
            400,
            "WORKFLOW_BAD_OPERATION_ID",
            vec!["x-evil", "yes"],
        ),
        (
            "an id nobody created",
            "/operations/987654321".to_owned(),
            404,
            "WORKFLOW_NO_SUCH_OPERATION",
            vec!["987654321"],
        ),
        (
            "an unknown route",
            "/nope/%3Cscript%3E".to_owned(),
            404,
            "NOT_FOUND",
            vec!["nope", "<script"],
        ),
    ];
    for (case, target, status, code, never) in cases {
        let raw = whole_answer(
            workflow.addr,
            &format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
        .await;
        let head = raw.lines().next().unwrap_or_default();
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status} ")),
            "{case}: {status}, got {head:?}"
        );
        assert!(
            raw.to_lowercase()
                .contains("content-type: application/problem+json"),
            "{case}: a problem document:\n{raw}"
        );
        let body: serde_json::Value = serde_json::from_str(body_of(&raw))
            .unwrap_or_else(|err| panic!("{case}: a JSON body ({err}):\n{raw}"));
        assert_eq!(body["code"], code, "{case}");
        assert!(
            raw.len() < 600,
            "{case}: a small answer, got {} bytes",
            raw.len()
        );
        assert_no_echo(&raw, &never, case);
    }
    let raw = whole_answer(
        workflow.addr,
        "DELETE /operations/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(raw.starts_with("HTTP/1.1 405 "), "DELETE: 405, got {raw}");
    assert!(body_of(&raw).contains("METHOD_NOT_ALLOWED"), "{raw}");
    workflow.assert_alive("the echo cases");
}

#[tokio::test]
async fn exporter_error_answers_are_problem_documents_that_echo_nothing() {
    let mut exporter = Service::exporter(&["--series", "100"]).await;
    for (case, request, status, code) in [
        (
            "an unknown route",
            "GET /nope/%3Cscript%3Esecret-42 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            404,
            "NOT_FOUND",
        ),
        (
            "a method the route does not serve",
            "DELETE /metrics?secret-42 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            405,
            "METHOD_NOT_ALLOWED",
        ),
    ] {
        let raw = whole_answer(exporter.addr, request).await;
        assert!(
            raw.starts_with(&format!("HTTP/1.1 {status} ")),
            "{case}: {status}, got {raw}"
        );
        let body: serde_json::Value = serde_json::from_str(body_of(&raw))
            .unwrap_or_else(|err| panic!("{case}: a JSON body ({err}):\n{raw}"));
        assert_eq!(body["code"], code, "{case}");
        assert_no_echo(&raw, &["secret-42", "<script", "nope"], case);
    }
    exporter.assert_alive("the echo cases");
}

#[tokio::test]
async fn exporter_answers_head_metrics_without_a_walk() {
    let exporter = Service::exporter(&["--series", "100"]).await;
    let started = || async {
        let text = whole_answer(
            exporter.addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        text.lines()
            .find_map(|line| line.strip_prefix("exporter_walks_started_total "))
            .and_then(|value| value.trim().parse::<u64>().ok())
            .expect("the walk counter is exported")
    };
    let before = started().await;
    for _ in 0..5 {
        let raw = whole_answer(
            exporter.addr,
            "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(raw.starts_with("HTTP/1.1 200 "), "HEAD answers 200: {raw}");
        assert!(
            raw.contains("openmetrics-text"),
            "with the scrape's type: {raw}"
        );
    }
    assert_eq!(
        started().await,
        before + 1,
        "five HEADs walked nothing (the one walk is the GET that counts)"
    );
}

/// 5000 malformed request lines write at most two log lines (one at once,
/// then one per 10 s), both at `WARN`, none at `ERROR`.
#[tokio::test]
async fn workflow_logs_malformed_requests_as_one_rate_limited_line() {
    const MALFORMED: usize = 5000;
    let mut workflow = Service::workflow(&[]).await;
    let started = Instant::now();
    let mut sent = 0;
    for _ in 0..MALFORMED {
        let mut stream = TcpStream::connect(workflow.addr).await.expect("connect");
        let _ = stream.write_all(b"GARBAGE\r\n\r\n").await;
        // Read the `400` (or the close) so the connection is done.
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(ANSWER, stream.read_to_end(&mut answer)).await;
        sent += 1;
    }
    let took = started.elapsed();
    workflow.assert_alive("5000 malformed requests");
    assert_healthy(workflow.addr, "5000 malformed requests").await;
    let status = whole_answer(
        workflow.addr,
        "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let status: serde_json::Value = serde_json::from_str(body_of(&status)).expect("JSON status");
    let counted = status["client_errors"].as_u64().expect("client_errors");
    assert!(
        counted >= u64::try_from(MALFORMED).unwrap(),
        "every malformed request is counted though not logged: {counted}"
    );
    workflow.terminate();
    let (status, logs) = workflow.exit_within(EXIT).await;
    assert!(status.success(), "a clean exit, got {status}");
    let noisy: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("actix_http") || line.contains("actix_server::accept"))
        .collect();
    println!(
        "{sent} malformed requests in {took:?}: {} framework lines, {} bytes of logs",
        noisy.len(),
        logs.len()
    );
    assert!(
        !logs.contains("ERROR"),
        "client errors are never logged at ERROR:\n{}",
        noisy.join("\n")
    );
    // One line per 10 s, and the count left over written at the exit.
    let allowed = 2 + usize::try_from(took.as_secs() / 10).unwrap_or(usize::MAX);
    assert!(
        (1..=allowed).contains(&noisy.len()),
        "one WARN line per 10 s at most ({allowed} in {took:?}), got:\n{}",
        noisy.join("\n")
    );
    assert!(
        noisy
            .iter()
            .all(|line| line.contains("WARN") && line.contains("count=")),
        "each line is a WARN with a count:\n{}",
        noisy.join("\n")
    );
    assert!(
        logs.len() < 16 * 1024,
        "the logs stay small: {} bytes",
        logs.len()
    );
}

/// A binary run with its open-file limit lowered (by the shell's `ulimit
/// -n`, in the child only: this test process keeps its own limit), killed
/// when dropped.
struct Limited {
    child: tokio::process::Child,
    addr: SocketAddr,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The task copying stderr; it ends at the pipe's end, after the exit.
    reader: tokio::task::JoinHandle<()>,
}

impl Limited {
    /// Starts `binary --listen 127.0.0.1:0 ARGS` under `ulimit -n nofile`.
    async fn start(binary: &str, nofile: u32, args: &[&str]) -> Limited {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", r#"ulimit -n "$1" && shift && exec "$@""#, "sh"])
            .arg(nofile.to_string())
            .arg(binary)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh starts");
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
            .await
            .expect("the binary prints its address in time")
            .expect("stdout is readable")
            .expect("a first line");
        let addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("`listening on ADDR`, got {first:?}"))
            .parse()
            .expect("an address");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("piped")).lines();
        let collected = std::sync::Arc::clone(&stderr);
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut all = collected.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let limited = Limited {
            child,
            addr,
            stderr,
            reader,
        };
        assert_eq!(
            limited.open_files_limit(),
            Some(u64::from(nofile)),
            "the child runs under the lowered limit"
        );
        limited
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    /// A line of `/proc/PID/status` or `/proc/PID/limits`, by prefix.
    fn proc_line(&self, file: &str, prefix: &str) -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/{}/{file}", self.pid())).ok()?;
        text.lines()
            .find(|line| line.starts_with(prefix))
            .map(str::to_owned)
    }

    /// Resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        self.proc_line("status", "VmRSS:")
            .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            .expect("VmRSS is readable")
    }

    /// The soft open-file limit the process runs under.
    fn open_files_limit(&self) -> Option<u64> {
        self.proc_line("limits", "Max open files")?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, then the exit status within [`EXIT`].
    async fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.pid().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("`kill` runs");
        assert!(killed.success());
        let status = tokio::time::timeout(EXIT, self.child.wait())
            .await
            .expect("it exits in time")
            .expect("an exit status");
        // Every line the process wrote before it exited, not only those
        // the reader had copied by now.
        tokio::time::timeout(EXIT, &mut self.reader)
            .await
            .expect("stderr reaches its end once the process exited")
            .expect("the reader task");
        (status, self.stderr())
    }
}

/// `GET /healthz` on a fresh connection: `Ok` with the time to a `200`, or
/// why not (refused, closed, or no answer within `within`).
async fn probe_healthz(addr: SocketAddr, within: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        if answer.starts_with(b"HTTP/1.1 200 ") {
            Ok(started.elapsed())
        } else if answer.is_empty() {
            Err("closed without an answer".to_owned())
        } else {
            Err(String::from_utf8_lossy(&answer).into_owned())
        }
    };
    tokio::time::timeout(within, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {within:?}")))
}

/// Slowloris at the descriptor limit: 1100 connections that never finish
/// their request head, against the exporter under `ulimit -n 1024`. Before
/// connection admission, `/healthz` timed out for as long as the attacker
/// held them and RSS grew to 376 MB. Now the bound (the limit less what
/// the process holds less a quarter, about 740) is reached before the
/// descriptors run out, and past it a newcomer evicts the connection that
/// has waited longest for a head.
#[tokio::test]
async fn exporter_keeps_healthz_up_with_1100_unfinished_requests_at_1024_descriptors() {
    const ATTACKERS: usize = 1100;
    const PROBE: Duration = Duration::from_secs(2);
    let exporter = Limited::start(
        env!("CARGO_BIN_EXE_exporter"),
        1024,
        &["--series", "200", "--cardinality-interval-ms", "600000"],
    )
    .await;
    probe_healthz(exporter.addr, PROBE)
        .await
        .expect("/healthz answers before the attack");
    let rss_before = exporter.rss_kib();

    // The prober: `/healthz` every 100 ms from the first attacker on, each
    // on a fresh connection, until told to stop.
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let addr = exporter.addr;
    let prober = tokio::spawn(async move {
        let mut probes = Vec::new();
        let mut every = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = &mut stopped => return probes,
                _ = every.tick() => {}
            }
            let at = Instant::now();
            probes.push((at, probe_healthz(addr, PROBE).await));
        }
    });

    let attack_started = Instant::now();
    let mut attackers = Vec::with_capacity(ATTACKERS);
    for i in 0..ATTACKERS {
        let mut stream = TcpStream::connect(exporter.addr)
            .await
            .unwrap_or_else(|err| {
                panic!("attacker {i} connects (the test's own descriptors): {err}")
            });
        // Half a request head, never finished (a refused connection may
        // already be closed: that write failing is part of the attack).
        let _ = stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await;
        attackers.push(stream);
    }
    let opened = attack_started.elapsed();
    // Hold them a while (every newcomer now evicts the oldest), then probe some more.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let rss_during = exporter.rss_kib();
    stop.send(()).expect("the prober runs");
    let probes = prober.await.expect("the prober did not panic");

    // How long `/healthz` was unreachable: the longest run of failed
    // probes, from the first failure to the next success.
    let mut unreachable = Duration::ZERO;
    let mut failing_since = None;
    for (at, outcome) in &probes {
        match (outcome, failing_since) {
            (Err(_), None) => failing_since = Some(*at),
            (Ok(_), Some(since)) => {
                unreachable = unreachable.max(at.duration_since(since));
                failing_since = None;
            }
            _ => {}
        }
    }
    let failures: Vec<_> = probes
        .iter()
        .filter_map(|(at, outcome)| {
            outcome
                .as_ref()
                .err()
                .map(|why| (at.duration_since(attack_started), why))
        })
        .collect();
    let slowest = probes
        .iter()
        .filter_map(|(_, outcome)| outcome.as_ref().ok())
        .max()
        .copied()
        .unwrap_or_default();
    drop(attackers);
    let after = probe_healthz(exporter.addr, PROBE).await;
    let rss_after = exporter.rss_kib();
    println!(
        "{ATTACKERS} unfinished requests opened in {opened:?} at a 1024-descriptor limit: \
         {} probes of /healthz, {} failed, longest unreachable {unreachable:?}, slowest answer {slowest:?}; \
         RSS {rss_before} KiB before, {rss_during} KiB during, {rss_after} KiB after",
        probes.len(),
        failures.len()
    );
    assert!(
        failing_since.is_none(),
        "/healthz answers at the end of the attack; failures: {failures:?}"
    );
    assert!(
        unreachable <= Duration::from_millis(1500),
        "/healthz unreachable at most 1.5 s, was {unreachable:?}; failures: {failures:?}"
    );
    after.expect("/healthz answers after the attack");
    assert!(
        rss_during < rss_before + 64 * 1024,
        "memory stays flat under the attack: {rss_before} KiB before, {rss_during} KiB during"
    );
    let metrics = whole_answer(
        exporter.addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let evicted = metrics
        .lines()
        .find_map(|line| line.strip_prefix("exporter_connections_evicted_total "))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .expect("evictions are exported");
    assert!(evicted > 0, "the attackers were evicted, and counted");
    let max = counter(&metrics, "exporter_connections_max");
    assert!(
        (700..=1024 - 256 - 8).contains(&max),
        "the bound leaves a quarter of 1024 and what the process held at startup: {max}"
    );

    let (status, stderr) = exporter.terminate().await;
    assert!(status.success(), "a clean exit, got {status}:\n{stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
    assert!(!stderr.contains("ERROR"), "nothing at ERROR:\n{stderr}");
    let enforced = stderr
        .lines()
        .filter(|line| line.contains("connection limits enforced"))
        .count();
    assert!(
        (1..=2).contains(&enforced),
        "one rate-limited WARN line per 10 s, got {enforced}:\n{stderr}"
    );
}

/// A request head that is not finished in time is closed, counted and not
/// answered; a kept-alive connection idle for longer than the header
/// timeout (but not the idle timeout) is still served.
#[tokio::test]
async fn exporter_closes_half_sent_requests_after_the_header_timeout_and_keeps_idle_ones() {
    let exporter = Service::exporter(&[
        "--series",
        "100",
        "--header-timeout-ms",
        "500",
        "--idle-timeout-ms",
        "30000",
    ])
    .await;
    let mut slow = TcpStream::connect(exporter.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    let sent = Instant::now();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut answer))
        .await
        .expect("the server closes a half-sent request in time")
        .expect("a clean close");
    let closed_after = sent.elapsed();
    assert!(answer.is_empty(), "nothing is answered to half a request");
    assert!(
        closed_after >= Duration::from_millis(400) && closed_after < Duration::from_secs(3),
        "closed at the header timeout (500 ms), after {closed_after:?}"
    );

    // Kept alive: one request, then silence longer than the header
    // timeout, then another request on the same connection.
    let mut kept = TcpStream::connect(exporter.addr).await.unwrap();
    let request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    for round in 0..2 {
        kept.write_all(request).await.unwrap();
        let mut buf = [0; 512];
        let n = tokio::time::timeout(ANSWER, kept.read(&mut buf))
            .await
            .expect("an answer")
            .expect("readable");
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200 "),
            "round {round}: {:?}",
            String::from_utf8_lossy(&buf[..n])
        );
        if round == 0 {
            // Idle for longer than the header timeout, on purpose.
            tokio::time::sleep(Duration::from_millis(1200)).await;
        }
    }
    let metrics = whole_answer(
        exporter.addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        metrics.contains("exporter_connections_header_timeouts_total 1"),
        "the timeout is counted:\n{}",
        metrics
            .lines()
            .filter(|l| l.starts_with("exporter_connections"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The refused client's `Retry-After` counts the walks running now, as
/// the process serves it. Cold (no walk ever finished, no expected work
/// given): 1, the documented cold bound, never the running walks' age
/// (which points the wrong way). Warm (walks typically take 4 s, two just
/// started): the typical time less what they have run, 3 or 4. How the
/// hint counts down as walks age is pinned on a paused clock in
/// admission-core (`a_cold_pools_hint_counts_down_the_expected_work_and_
/// never_the_age`, and the work-times unit tests): this process runs on the
/// real clock, so letting its walks age here would only make the test
/// sleep.
#[tokio::test]
async fn exporter_retry_after_counts_the_walks_running_now() {
    const SCRAPE: &str = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let exporter = Service::exporter(&[
        "--series",
        "100",
        "--walk-delay-ms",
        "4000",
        "--cardinality-interval-ms",
        "600000",
    ])
    .await;
    let mut seen = Vec::new();
    for case in ["cold", "warm"] {
        // Scrape until one is refused: the ones with no answer within
        // 300 ms were admitted and walk (the pool has two workers).
        let mut walkers = Vec::new();
        let full_at = loop {
            assert!(walkers.len() <= 2, "{case}: two walks fill the pool");
            let mut stream = TcpStream::connect(exporter.addr).await.unwrap();
            stream.write_all(SCRAPE.as_bytes()).await.unwrap();
            let mut head = [0; 12];
            match tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut head))
                .await
            {
                Err(_walking) => walkers.push(stream),
                Ok(Ok(_)) if &head == b"HTTP/1.1 503" => break Instant::now(),
                Ok(other) => {
                    panic!("{case}: a scrape is walked or refused, got {other:?} {head:?}")
                }
            }
        };
        let raw = whole_answer(exporter.addr, SCRAPE).await;
        let aged = full_at.elapsed();
        assert!(
            raw.starts_with("HTTP/1.1 503 "),
            "{case}: still full: {raw}"
        );
        let hint: u64 = raw
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("retry-after: ")
                    .map(str::to_owned)
            })
            .and_then(|value| value.trim().parse().ok())
            .expect("a Retry-After in whole seconds");
        println!("{case}: Retry-After {hint} with two 4 s walks, the pool full for {aged:?}");
        seen.push(hint);
        for mut walker in walkers {
            let mut answer = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), walker.read_to_end(&mut answer))
                .await
                .expect("the walk ends")
                .expect("readable");
            assert!(
                answer.starts_with(b"HTTP/1.1 200 "),
                "{case}: the walk answers"
            );
        }
    }
    assert_eq!(
        seen[0], 1,
        "cold: no walk finished and none expected: 1 s, not the walks' age"
    );
    assert!(
        (3..=4).contains(&seen[1]),
        "warm: walks take 4 s and have just started: 3 or 4 s, got {}",
        seen[1]
    );
}

/// At the descriptor limit actix-web's own acceptor failed every 500 ms
/// (`Too many open files`), each logged at `ERROR`. The workflow is now
/// served from the shared accept loop: under `ulimit -n 128` with a bound
/// above it on purpose, failed accepts close the longest-waiting
/// connection (else back off), are logged as one `WARN` line per 10 s
/// with a count and the OS error, and the service answers while the
/// attackers are still there.
#[tokio::test]
async fn workflow_logs_descriptor_exhaustion_at_most_once_per_interval() {
    let workflow = Limited::start(
        env!("CARGO_BIN_EXE_workflow"),
        128,
        &["--max-connections", "10000"],
    )
    .await;
    let mut attackers = Vec::new();
    for _ in 0..200 {
        let mut stream = TcpStream::connect(workflow.addr).await.expect("connect");
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ").await;
        attackers.push(stream);
    }
    // With the attackers' connections still open on their side.
    probe_healthz(workflow.addr, Duration::from_secs(2))
        .await
        .expect("/healthz answers with 200 attackers at 128 descriptors");
    drop(attackers);
    let (status, stderr) = workflow.terminate().await;
    assert!(status.success(), "a clean exit, got {status}:\n{stderr}");
    let accept: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("ADMISSION_ACCEPT_FAILED"))
        .collect();
    println!(
        "accept errors logged as {} lines:\n{}",
        accept.len(),
        accept.join("\n")
    );
    assert!(!stderr.contains("ERROR"), "nothing at ERROR:\n{stderr}");
    // One line per 10 s, and the count left over written at the exit.
    assert!(
        (1..=3).contains(&accept.len()),
        "one WARN line per 10 s, got:\n{}",
        accept.join("\n")
    );
    assert!(
        accept[0].contains("os_error=24"),
        "the line names the OS error (EMFILE): {}",
        accept[0]
    );
}

/// `binary` under `ulimit -n nofile`, `attackers` slow senders (each
/// re-opening as soon as it is closed when `reopen`, else holding its one
/// connection) for 4 s, and `path` probed every 100 ms on a fresh
/// connection: every probe answered within 2 s, a clean exit.
async fn health_holds_under_slow_senders(
    binary: &str,
    nofile: u32,
    (attackers, reopen): (usize, bool),
    args: &[&str],
    path: &str,
) {
    const ATTACK: Duration = Duration::from_secs(4);
    let server = Limited::start(binary, nofile, args).await;
    let addr = server.addr;
    let started = Instant::now();
    let mut attacking = JoinSet::new();
    for _ in 0..attackers {
        attacking.spawn(async move {
            let mut opened = 0_u32;
            while started.elapsed() < ATTACK {
                let Ok(Ok(mut stream)) =
                    tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await
                else {
                    continue;
                };
                opened += 1;
                let _ = stream.write_all(b"GET / HTTP/1.1\r\nX-Slow: ").await;
                let mut sink = Vec::new();
                let left = ATTACK.saturating_sub(started.elapsed());
                let _ = tokio::time::timeout(left, stream.read_to_end(&mut sink)).await;
                if !reopen {
                    // Held, on this side, to the end of the attack.
                    tokio::time::sleep(ATTACK.saturating_sub(started.elapsed())).await;
                }
            }
            opened
        });
    }
    // Let the attackers fill the bound first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    while started.elapsed() < ATTACK {
        let next = Instant::now() + Duration::from_millis(100);
        probes += 1;
        match probe(addr, path, Duration::from_secs(2)).await {
            Ok(took) => slowest = slowest.max(took),
            Err(why) => failed.push(format!("{:?}: {why}", started.elapsed())),
        }
        tokio::time::sleep_until(next.into()).await;
    }
    let opened: u32 = attacking.join_all().await.into_iter().sum();
    let (status, stderr) = server.terminate().await;
    println!(
        "{binary} at ulimit -n {nofile}, {attackers} slow senders ({opened} connections in \
         {ATTACK:?}): {probes} probes of {path}, slowest {slowest:?}, {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {probes} probes of {path} failed: {failed:#?}\n{stderr}",
        failed.len()
    );
    assert!(status.success(), "a clean exit, got {status}:\n{stderr}");
    assert!(!stderr.contains("ERROR"), "nothing at ERROR:\n{stderr}");
}

/// Issue 38.4 on the HTTP binaries: at `ulimit -n 64` (the idle process
/// already holds about 20 descriptors, so three quarters of the limit was
/// more than was left) 200 slow senders holding their connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_answers_healthz_at_64_descriptors() {
    health_holds_under_slow_senders(
        env!("CARGO_BIN_EXE_exporter"),
        64,
        (200, false),
        &["--series", "200", "--cardinality-interval-ms", "600000"],
        "/healthz",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_answers_status_at_64_descriptors() {
    health_holds_under_slow_senders(
        env!("CARGO_BIN_EXE_workflow"),
        64,
        (200, false),
        &[],
        "/status",
    )
    .await;
}

/// Issue 38.3: actix-web slowloris. The workflow at `ulimit -n 1024` with
/// 1100 slow-header connections re-opened as fast as they are closed;
/// before, actix-web could not evict and 17 of 28 `/status` probes went
/// unanswered within 2 s. Now it is served from the shared accept loop:
/// a newcomer evicts the connection that has waited longest for a head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_answers_status_under_1100_slow_senders_at_1024_descriptors() {
    health_holds_under_slow_senders(
        env!("CARGO_BIN_EXE_workflow"),
        1024,
        (1100, true),
        &[],
        "/status",
    )
    .await;
}

/// How long a probe's first TCP connect may take. Under a connection flood
/// on a loaded machine the listener's accept queue can be full for a
/// moment, and the kernel drops the probe's SYN; Linux sends it again after
/// 1 s and then 2 s more, so two drops take about 3 s. That is the
/// kernel's backlog, not the server's answer: a probe's own bound runs
/// from its established connection.
const CONNECT_WITHIN: Duration = Duration::from_millis(3500);

/// A probe of `path` on a fresh connection: `Ok` with the time from the
/// established connection to a `200`, which must come `within`.
///
/// A connection closed before it was read from (a reset, or a close with
/// no answer) is tried once more at once, within the same bound: at the
/// connection bound that is the documented answer to a newcomer, closed
/// at once so that it may retry, and a connection evicted in a burst that
/// the server accepted faster than it read is answered the same way.
async fn probe(addr: SocketAddr, path: &str, within: Duration) -> Result<Duration, String> {
    let first = match tokio::time::timeout(CONNECT_WITHIN, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => return Err(err.to_string()),
        Err(_) => return Err(format!("no connection within {CONNECT_WITHIN:?}")),
    };
    let connected = Instant::now();
    let attempts = async {
        match exchange(first, path, connected).await {
            Err(Exchange::Closed(_)) => {
                let again = TcpStream::connect(addr)
                    .await
                    .map_err(|err| Exchange::Failed(err.to_string()))?;
                exchange(again, path, connected).await
            }
            first => first,
        }
    };
    match tokio::time::timeout(within, attempts).await {
        Ok(Ok(took)) => Ok(took),
        Ok(Err(Exchange::Closed(why) | Exchange::Failed(why))) => Err(why),
        Err(_) => Err(format!("no answer within {within:?} of connecting")),
    }
}

/// How one exchange of [`probe`] failed.
enum Exchange {
    /// Closed before any answer: reset, or closed with nothing sent.
    Closed(String),
    /// Anything else: another answer, or another error.
    Failed(String),
}

/// One request of `path` on `stream`, a fresh connection.
async fn exchange(
    mut stream: TcpStream,
    path: &str,
    started: Instant,
) -> Result<Duration, Exchange> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::ConnectionReset {
            Exchange::Closed(e.to_string())
        } else {
            Exchange::Failed(e.to_string())
        }
    };
    stream.write_all(request.as_bytes()).await.map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.map_err(io)?;
    if answer.starts_with(b"HTTP/1.1 200 ") {
        Ok(started.elapsed())
    } else if answer.is_empty() {
        Err(Exchange::Closed("closed without an answer".to_owned()))
    } else {
        Err(Exchange::Failed(
            String::from_utf8_lossy(&answer[..answer.len().min(200)]).into_owned(),
        ))
    }
}

/// A counter's value in an exposition.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} is exported"))
}

/// Finding 4 of issue 26: attackers that re-open at once. Before, only a
/// connection that had waited 1 s for its head could be evicted, so
/// attackers re-opening faster than the bound per second got 81-89 % of
/// `/healthz` refused. Now a newcomer evicts the oldest waiting connection
/// however young, so attackers evict each other and the probes (which send
/// their request at once) are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_keeps_health_up_while_attackers_reopen_as_fast_as_they_can() {
    /// Attacker tasks, each keeping at most `HELD` connections.
    const TASKS: usize = 4;
    const HELD: usize = 250;
    const ATTACK: Duration = Duration::from_secs(4);
    const WITHIN: Duration = Duration::from_millis(1500);
    let exporter = Limited::start(
        env!("CARGO_BIN_EXE_exporter"),
        1024,
        &["--series", "200", "--cardinality-interval-ms", "600000"],
    )
    .await;
    probe(exporter.addr, "/healthz", WITHIN)
        .await
        .expect("/healthz answers before the attack");
    let addr = exporter.addr;
    let attack_started = Instant::now();
    let mut attackers = JoinSet::new();
    for _ in 0..TASKS {
        attackers.spawn(async move {
            let mut held = std::collections::VecDeque::with_capacity(HELD);
            let (mut opened, mut slow) = (0_u64, 0_u64);
            while attack_started.elapsed() < ATTACK {
                let connect =
                    tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr));
                let Ok(Ok(mut stream)) = connect.await else {
                    slow += 1;
                    continue;
                };
                let _ = stream
                    .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .await;
                opened += 1;
                held.push_back(stream);
                if held.len() > HELD {
                    held.pop_front();
                }
            }
            (opened, slow)
        });
    }
    let mut probes = Vec::new();
    let mut every = tokio::time::interval(Duration::from_millis(100));
    while attack_started.elapsed() < ATTACK {
        every.tick().await;
        for path in ["/healthz", "/readyz"] {
            let at = attack_started.elapsed();
            probes.push((at, path, probe(addr, path, WITHIN).await));
        }
    }
    let (opened, slow) = attackers
        .join_all()
        .await
        .into_iter()
        .fold((0, 0), |(o, s), (opened, slow)| (o + opened, s + slow));
    let failures: Vec<_> = probes
        .iter()
        .filter(|(_, _, outcome)| outcome.is_err())
        .collect();
    let slowest = probes
        .iter()
        .filter_map(|(_, _, outcome)| outcome.as_ref().ok())
        .max()
        .copied()
        .unwrap_or_default();
    let metrics = whole_answer(
        addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let evicted = counter(&metrics, "exporter_connections_evicted_total");
    let refused = counter(&metrics, "exporter_connections_refused_total");
    println!(
        "{opened} attacker connections in {ATTACK:?} ({TASKS} tasks holding {HELD} each, bound 768): \
         ({slow} connects over 200 ms); {} probes of /healthz and /readyz, {} failed, slowest {slowest:?}; \
         {evicted} evicted, {refused} refused",
        probes.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "every probe answered within {WITHIN:?}: {failures:?}"
    );
    assert!(
        opened > 768,
        "the attack went past the bound ({opened} opened)"
    );
    assert!(evicted > 0, "the attack is counted: {evicted} evicted");
    let (status, stderr) = exporter.terminate().await;
    assert!(status.success(), "a clean exit, got {status}:\n{stderr}");
    let enforced = stderr
        .lines()
        .filter(|line| line.contains("connection limits enforced"))
        .count();
    assert!(
        (1..=2).contains(&enforced),
        "one rate-limited WARN line per 10 s, with counts, got {enforced}:\n{stderr}"
    );
}

/// Finding 3 of issue 26: clients that never read. Before, every
/// `/metrics` response kept its 11.4 MB body (`--series 200000`) until the
/// 60 s idle timeout: 150 never-reading clients took RSS from 44 MB to
/// 1.73 GB (release binary). Now a response the client takes nothing of for the
/// write-progress timeout is dropped, and past `--max-held-mb` of bodies
/// not yet sent new scrapes are refused without a walk.
#[tokio::test]
async fn exporter_memory_stays_bounded_against_clients_that_never_read() {
    const CLIENTS: usize = 150;
    const MAX_HELD_MB: u64 = 24;
    const WORKERS: u64 = 2;
    const ATTACK: Duration = Duration::from_secs(16);
    const SCRAPE: &str = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let exporter = Limited::start(
        env!("CARGO_BIN_EXE_exporter"),
        1024,
        &[
            "--series",
            "200000",
            "--workers",
            "2",
            "--cardinality-interval-ms",
            "600000",
            "--write-timeout-ms",
            "2000",
            "--max-held-mb",
            "24",
        ],
    )
    .await;
    let addr = exporter.addr;
    // One scrape read whole: the body's size, and the idle RSS after it.
    let body = whole_answer_within(addr, SCRAPE, Duration::from_secs(30)).await;
    let body_kib = (body.len() / 1024) as u64;
    let rss_idle = exporter.rss_kib();

    // Each client asks for `/metrics` and never reads; when the server
    // drops it, it asks again, until the attack ends.
    let attack_started = Instant::now();
    let mut clients = JoinSet::new();
    for _ in 0..CLIENTS {
        clients.spawn(async move {
            let (mut asked, mut held) = (0_u64, Vec::new());
            while attack_started.elapsed() < ATTACK {
                let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
                    continue;
                };
                // A small window: the kernel holds little of the body.
                let _ = socket.set_recv_buffer_size(4096);
                let Ok(mut stream) = socket.connect(addr).await else {
                    continue;
                };
                if stream
                    .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await
                    .is_err()
                {
                    continue;
                }
                asked += 1;
                // Never read; ask again on a new connection once the
                // server may have given up on this one.
                held.push(stream);
                tokio::time::sleep(Duration::from_millis(2500)).await;
            }
            asked
        });
    }
    let mut rss_peak = rss_idle;
    while attack_started.elapsed() < ATTACK {
        tokio::time::sleep(Duration::from_millis(200)).await;
        rss_peak = rss_peak.max(exporter.rss_kib());
    }
    let asked: u64 = clients.join_all().await.into_iter().sum();
    println!("RSS {rss_idle} KiB idle, peak {rss_peak} KiB under the attack");
    let healthz = probe(addr, "/healthz", Duration::from_millis(1500)).await;
    let metrics = whole_answer_within(addr, SCRAPE, Duration::from_secs(30)).await;
    let write_timeouts = metrics
        .lines()
        .find_map(|line| line.strip_prefix("exporter_connections_write_timeouts_total "))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // What may be held on top of the idle RSS: the bound, one body (and
    // its encoding buffer, up to twice its size) per worker, and 16 MiB
    // of allocator slack. Without the two bounds this attack grows RSS by
    // about one body per walk for as long as it lasts.
    let bound = rss_idle + MAX_HELD_MB * 1024 + WORKERS * 2 * body_kib + 16 * 1024;
    println!(
        "{CLIENTS} never-reading clients, {asked} scrapes in {ATTACK:?}, body {body_kib} KiB: \
         RSS {rss_idle} KiB idle, peak {rss_peak} KiB (bound {bound} KiB); {write_timeouts} write timeouts"
    );
    healthz.expect("/healthz answers after the attack");
    assert!(
        rss_peak <= bound,
        "RSS peak {rss_peak} KiB within idle ({rss_idle} KiB) + {MAX_HELD_MB} MiB + \
         {WORKERS} x 2 bodies ({body_kib} KiB) + 16 MiB"
    );
    assert!(
        write_timeouts > 0,
        "stalled responses were dropped, and counted"
    );
    let (status, stderr) = exporter.terminate().await;
    assert!(status.success(), "a clean exit, got {status}:\n{stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
}
