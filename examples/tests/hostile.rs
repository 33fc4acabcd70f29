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

mod support;

use std::net::SocketAddr;
use std::time::Duration;

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
