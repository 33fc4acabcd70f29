//! Starting the real `exporter` binary on a free port and talking to it.

// Each test crate that declares this module uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::task::JoinHandle;

/// How long the binary may take to print `listening on ADDR`.
const STARTUP: Duration = Duration::from_secs(30);

/// A running `exporter` process, killed when dropped.
#[derive(Debug)]
pub(crate) struct Exporter {
    child: Child,
    /// The address it printed.
    pub(crate) addr: SocketAddr,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl Exporter {
    /// Starts `exporter --listen 127.0.0.1:0 ARGS` and reads its
    /// `listening on ADDR` line.
    pub(crate) async fn start(args: &[&str]) -> Exporter {
        let mut child = Command::new(env!("CARGO_BIN_EXE_exporter"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the exporter binary starts");
        let stderr = tokio::spawn(read_all(child.stderr.take().expect("stderr is piped")));
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut first = String::new();
        tokio::time::timeout(STARTUP, stdout.read_line(&mut first))
            .await
            .expect("the exporter prints its address in time")
            .expect("stdout is readable");
        let addr = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first stdout line is `listening on ADDR`, got {first:?}"))
            .parse()
            .expect("the printed address parses");
        let stdout = tokio::spawn(rest(stdout, first));
        Exporter {
            child,
            addr,
            stdout,
            stderr,
        }
    }

    /// `http://ADDR{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM with the `kill` command.
    pub(crate) fn terminate(&self) {
        let pid = self.child.id().expect("the exporter is still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("`kill` runs");
        assert!(status.success(), "kill -TERM {pid} succeeded");
    }

    /// Waits for the process to exit, at most `within`; returns its status
    /// and everything it wrote (stdout then stderr).
    pub(crate) async fn exit_within(mut self, within: Duration) -> (ExitStatus, String) {
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the exporter exits within {within:?}"))
            .expect("waiting for the exporter");
        let stdout = self.stdout.await.expect("stdout reader");
        let stderr = self.stderr.await.expect("stderr reader");
        (status, format!("{stdout}{stderr}"))
    }
}

/// A client that gives up after `timeout`.
pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a plain HTTP client builds")
}

async fn read_all(mut pipe: impl AsyncRead + Unpin) -> String {
    let mut bytes = Vec::new();
    let _ = pipe.read_to_end(&mut bytes).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

async fn rest(mut stdout: BufReader<ChildStdout>, first: String) -> String {
    let mut text = first;
    let _ = stdout.read_to_string(&mut text).await;
    text
}
