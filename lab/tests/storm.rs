//! The `storm` binary's contract: it ends by itself, exits 0 and prints one
//! table; with `--url` it storms any server; with `--grpc` it storms the
//! gRPC exporter.

use std::time::Duration;

use admission_examples::exporter::{self, Config};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The cell of right-aligned column `name` in `row`, found by where the
/// column ends in `header`.
fn cell<'a>(header: &str, row: &'a str, name: &str) -> &'a str {
    let end = header.find(name).expect("the column exists") + name.len();
    row[..end]
        .split("  ")
        .last()
        .expect("a cell before the column end")
        .trim()
}

async fn run_storm(args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_storm"))
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the storm ends by itself")
    .expect("the storm binary runs");
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn storm_with_tiny_settings_exits_0_and_prints_the_table() {
    let (status, stdout, stderr) =
        run_storm(&["--duration-ms", "300", "--clients", "8", "--series", "500"]).await;
    assert!(status.success(), "storm exits 0, got {status}:\n{stderr}");
    for column in [
        "mode",
        "phase",
        "requests",
        "ok p50",
        "ok p99",
        "refused p99",
        "walks run",
        "max walks at once",
        "memory growth",
    ] {
        assert!(stdout.contains(column), "column `{column}` in:\n{stdout}");
    }
    assert_eq!(
        stdout.matches("mode ").count(),
        1,
        "one table, one header:\n{stdout}"
    );
    let mode_of = |line: &str| line.split_whitespace().next().unwrap_or("").to_owned();
    for mode in [
        "admission",
        "admission+coalesce",
        "unbounded-queue",
        "tower-limit+shed",
    ] {
        assert_eq!(
            stdout.lines().filter(|l| mode_of(l) == mode).count(),
            2,
            "two phases of `{mode}`:\n{stdout}"
        );
    }
    assert!(
        stderr.contains("storm: admission / patient"),
        "progress on stderr:\n{stderr}"
    );
    let header = stdout.lines().next().expect("a header");
    let admission_peak: Vec<u64> = stdout
        .lines()
        .filter(|l| l.starts_with("admission"))
        .map(|l| {
            cell(header, l, "max walks at once")
                .parse()
                .unwrap_or_else(|_| panic!("a peak in {l:?}"))
        })
        .collect();
    assert!(
        admission_peak.iter().all(|&peak| peak <= 2),
        "admission, coalescing or not, never runs more walks than its 2 workers: \
         {admission_peak:?}\n{stdout}"
    );
    let coalesce = stdout
        .lines()
        .find(|l| mode_of(l) == "admission+coalesce" && l.contains(" patient "))
        .unwrap_or_else(|| panic!("a patient coalescing row:\n{stdout}"));
    let number = |name: &str| -> u64 {
        cell(header, coalesce, name)
            .parse()
            .unwrap_or_else(|_| panic!("a number for `{name}` in {coalesce:?}"))
    };
    assert!(number("ok") > 0, "coalescing serves scrapes: {coalesce}");
    assert!(
        number("walks run") <= number("ok") + number("gave up") + number("errors"),
        "a patient scraper waits for every walk it started: no walk runs for nobody: {coalesce}"
    );
}

#[tokio::test]
async fn storm_with_url_storms_that_server() {
    // The exporter in-process, as `exporter --series 100` would serve it.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/metrics", listener.local_addr().expect("bound"));
    let (stop, stopped) = oneshot::channel::<()>();
    let config = Config {
        series: 100,
        ..Config::default()
    };
    let server = tokio::spawn(exporter::serve(config, listener, async {
        let _ = stopped.await;
    }));
    let (status, stdout, stderr) =
        run_storm(&["--duration-ms", "300", "--clients", "4", "--url", &url]).await;
    assert!(status.success(), "storm exits 0, got {status}:\n{stderr}");
    assert!(
        stdout.starts_with("mode "),
        "the table comes first:\n{stdout}"
    );
    let header = stdout.lines().next().expect("a header");
    let row = stdout
        .lines()
        .find(|l| l.starts_with("url "))
        .unwrap_or_else(|| panic!("one `url` row:\n{stdout}"));
    assert!(row.contains(" patient "), "the patient phase only: {row}");
    let ok: u64 = cell(header, row, "ok").parse().expect("an ok count");
    assert!(ok > 0, "an idle exporter answers some scrapes: {row}");
    assert_eq!(
        cell(header, row, "max walks at once"),
        "-",
        "peak walks unknown for a remote server: {row}"
    );
    assert_eq!(
        cell(header, row, "walks run"),
        "-",
        "walks run unknown for a remote server: {row}"
    );
    let _ = stop.send(());
    server
        .await
        .expect("the exporter task ends")
        .expect("the exporter served and stopped");
}

#[tokio::test]
async fn storm_grpc_prints_a_row_per_grpc_gate_and_phase() {
    let (status, stdout, stderr) = run_storm(&[
        "--grpc",
        "--duration-ms",
        "300",
        "--clients",
        "8",
        "--series",
        "500",
    ])
    .await;
    assert!(status.success(), "storm --grpc exits 0:\n{stderr}");
    let mode_of = |line: &str| line.split_whitespace().next().unwrap_or("").to_owned();
    for mode in ["grpc-admission", "grpc-tonic-limit+shed"] {
        assert_eq!(
            stdout.lines().filter(|l| mode_of(l) == mode).count(),
            2,
            "two phases of `{mode}`:\n{stdout}"
        );
    }
    let header = stdout.lines().next().expect("a header");
    for row in stdout.lines().filter(|l| mode_of(l) == "grpc-admission") {
        let peak: u64 = cell(header, row, "max walks at once")
            .parse()
            .expect("a number");
        assert!(
            peak <= 2,
            "admission never runs more walks than its 2 workers: {row}"
        );
        let ok: u64 = cell(header, row, "ok").parse().expect("a number");
        if row.contains(" patient ") {
            assert!(ok > 0, "admission serves patient callers: {row}");
        }
    }
    assert!(
        stdout.contains("UNAVAILABLE"),
        "the footer speaks gRPC:\n{stdout}"
    );
}
