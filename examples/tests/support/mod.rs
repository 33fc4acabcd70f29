//! Starting a real example binary on a free port and talking to it.

// Each test crate that declares this module uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// How long a binary may take to print `listening on ADDR`.
const STARTUP: Duration = Duration::from_secs(30);

/// A running binary, killed when dropped; everything it writes (stdout and
/// stderr, line by line) is kept.
#[derive(Debug)]
pub(crate) struct Service {
    child: Child,
    /// The address it printed.
    pub(crate) addr: SocketAddr,
    output: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Service {
    /// Starts `exporter --listen 127.0.0.1:0 ARGS`.
    pub(crate) async fn exporter(args: &[&str]) -> Service {
        Service::start(env!("CARGO_BIN_EXE_exporter"), args).await
    }

    /// Starts `workflow --listen 127.0.0.1:0 ARGS`.
    pub(crate) async fn workflow(args: &[&str]) -> Service {
        Service::start(env!("CARGO_BIN_EXE_workflow"), args).await
    }

    /// Starts `binary --listen 127.0.0.1:0 ARGS` and reads its
    /// `listening on ADDR` line.
    pub(crate) async fn start(binary: &str, args: &[&str]) -> Service {
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("{binary} starts: {err}"));
        let output = Arc::new(Mutex::new(String::new()));
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let first = tokio::time::timeout(STARTUP, stdout.next_line())
            .await
            .expect("the binary prints its address in time")
            .expect("stdout is readable")
            .expect("stdout has a first line");
        let addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first stdout line is `listening on ADDR`, got {first:?}"))
            .parse()
            .expect("the printed address parses");
        push_line(&output, &first);
        let readers = vec![
            tokio::spawn(collect(stdout, Arc::clone(&output))),
            tokio::spawn(collect(
                BufReader::new(child.stderr.take().expect("stderr is piped")).lines(),
                Arc::clone(&output),
            )),
        ];
        Service {
            child,
            addr,
            output,
            readers,
        }
    }

    /// `http://ADDR{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything written so far.
    pub(crate) fn logs(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asserts that the process is still running.
    pub(crate) fn assert_alive(&mut self, after: &str) {
        let exited = self
            .child
            .try_wait()
            .expect("the process status is readable");
        assert!(
            exited.is_none(),
            "still running after {after}, exited: {exited:?}"
        );
    }

    /// Sends SIGTERM with the `kill` command.
    pub(crate) fn terminate(&self) {
        let pid = self.child.id().expect("the process is still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("`kill` runs");
        assert!(status.success(), "kill -TERM {pid} succeeded");
    }

    /// Waits for the process to exit, at most `within`; returns its status
    /// and everything it wrote, once its pipes have closed.
    pub(crate) async fn exit_within(mut self, within: Duration) -> (ExitStatus, String) {
        let status = match tokio::time::timeout(within, self.child.wait()).await {
            Ok(waited) => waited.expect("the exit status is readable"),
            Err(_) => panic!(
                "the process exits within {within:?}; output:\n{}",
                self.logs()
            ),
        };
        // The pipes close with the process: the readers end on their own.
        for reader in std::mem::take(&mut self.readers) {
            tokio::time::timeout(within, reader)
                .await
                .expect("the pipes close at the exit")
                .expect("a pipe reader did not panic");
        }
        (status, self.logs())
    }
}

/// A client that gives up after `timeout`.
pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a plain HTTP client builds")
}

fn push_line(output: &Mutex<String>, line: &str) {
    let mut output = output.lock().unwrap_or_else(PoisonError::into_inner);
    output.push_str(line);
    output.push('\n');
}

/// Appends every line of a pipe to `output`.
async fn collect(
    mut lines: tokio::io::Lines<BufReader<impl AsyncRead + Unpin>>,
    output: Arc<Mutex<String>>,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        push_line(&output, &line);
    }
}

/// An HTTP/2 frame: its 9-byte header and `payload` (for clients written
/// frame by frame, which h2's own client will not be).
pub(crate) fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame");
    let mut frame = len.to_be_bytes()[1..].to_vec();
    frame.extend([kind, flags]);
    frame.extend(stream.to_be_bytes());
    frame.extend(payload);
    frame
}

/// An HPACK literal header field without indexing, new name, no Huffman.
pub(crate) fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0x00);
    for text in [name, value] {
        block.push(u8::try_from(text.len()).expect("a short header"));
        block.extend(text.as_bytes());
    }
}
