//! The example services' command lines (clap): `--help` names every flag
//! with its meaning and default, `-h` works, old spellings (`--name value`,
//! `--name=value`, a flag given twice) still parse, and a bad value or an
//! unknown flag is a usage error with exit code 2. The lab's binaries are
//! checked the same way in `lab/tests/cli.rs`.

mod help;
mod support;

use help::{
    Binary, Flags, UsageError, assert_help_names_every_flag, assert_short_help, assert_usage_errors,
};
use support::Service;

const EXPORTER: Flags = &[
    ("--listen", Some("127.0.0.1:9464")),
    ("--workers", Some("2")),
    ("--series", Some("10000")),
    ("--walk-delay-ms", Some("0")),
    ("--shutdown-deadline-ms", Some("5000")),
    ("--cardinality-interval-ms", Some("10000")),
    ("--gate", Some("admission")),
    ("--coalesce-ms", Some("0")),
    // Counted from the descriptors open when the server starts listening:
    // no default to show (the help says how it is counted).
    ("--max-connections", None),
    ("--header-timeout-ms", Some("10000")),
    ("--idle-timeout-ms", Some("60000")),
    ("--write-timeout-ms", Some("10000")),
    ("--max-held-mb", Some("256")),
    ("--drain-delay-ms", Some("0")),
    ("--agent-check", None),
    ("--trust-peers", None),
    ("--metrics-backend", None),
    ("--trace-entries", Some("0")),
    ("--shadow", None),
];

const GRPC_EXPORTER: Flags = &[
    ("--listen", Some("127.0.0.1:50051")),
    ("--workers", Some("2")),
    ("--series", Some("10000")),
    ("--walk-delay-ms", Some("0")),
    ("--shutdown-deadline-ms", Some("5000")),
    ("--work-slots", Some("16")),
    ("--control-slots", Some("4")),
    ("--progress-timeout-ms", Some("30000")),
    ("--max-connections", None),
    ("--preface-timeout-ms", Some("5000")),
    ("--gate", Some("admission")),
];

const WORKFLOW: Flags = &[
    ("--listen", Some("127.0.0.1:8080")),
    ("--work-slots", Some("2")),
    ("--control-slots", Some("4")),
    ("--cycle-ms", Some("200")),
    ("--native-capacities", Some("2,3")),
    ("--shutdown-deadline-ms", Some("5000")),
    ("--http-workers", Some("2")),
    ("--max-connections", None),
    ("--header-timeout-ms", Some("5000")),
    ("--idle-timeout-ms", Some("5000")),
    ("--drain-delay-ms", Some("0")),
    ("--agent-check", None),
];

const BINARIES: [Binary; 3] = [
    (env!("CARGO_BIN_EXE_exporter"), EXPORTER),
    (env!("CARGO_BIN_EXE_grpc-exporter"), GRPC_EXPORTER),
    (env!("CARGO_BIN_EXE_workflow"), WORKFLOW),
];

#[test]
fn help_names_every_flag_with_its_meaning_and_default() {
    assert_help_names_every_flag(&BINARIES);
}

#[test]
fn short_help_works_too() {
    assert_short_help(&BINARIES);
}

#[test]
fn unknown_flags_and_bad_values_exit_2_with_a_precise_message() {
    let cases: [UsageError; 5] = [
        (
            env!("CARGO_BIN_EXE_exporter"),
            &["--workers", "x"],
            "invalid value 'x' for '--workers <N>'",
        ),
        (
            env!("CARGO_BIN_EXE_exporter"),
            &["--workers=0"],
            "must be at least 1",
        ),
        (
            env!("CARGO_BIN_EXE_exporter"),
            &["--gate", "nginx"],
            "unknown gate `nginx`",
        ),
        (
            env!("CARGO_BIN_EXE_grpc-exporter"),
            &["--max-connections=0"],
            "must be at least 1",
        ),
        (
            env!("CARGO_BIN_EXE_workflow"),
            &["--native-capacities", "2,x"],
            "--native-capacities",
        ),
    ];
    assert_usage_errors(&cases);
}

/// `--listen` is given twice here (the helper passes `--listen
/// 127.0.0.1:0`): the last one wins, as it did before clap.
#[tokio::test]
async fn old_spellings_still_start_the_servers() {
    let old = [
        "--listen=127.0.0.1:0",
        "--series",
        "10",
        "--shutdown-deadline-ms=1000",
        "--workers",
        "1",
    ];
    for binary in [
        env!("CARGO_BIN_EXE_exporter"),
        env!("CARGO_BIN_EXE_grpc-exporter"),
    ] {
        let service = Service::start(binary, &old).await;
        assert_ne!(service.addr.port(), 0, "{binary} listens");
    }
    let workflow =
        Service::workflow(&["--listen=127.0.0.1:0", "--work-slots=1", "--cycle-ms", "50"]).await;
    assert_ne!(workflow.addr.port(), 0);
}
