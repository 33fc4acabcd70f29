//! A child process the fleet supervises.
//!
//! This module owns [`Supervised`]: a process spawned with its output in a
//! log file of the run's work directory (stdout's first line can be read
//! first, for `listening on ADDR`), stopped on request with SIGTERM and
//! killed and reaped when dropped, also while a panic unwinds. It never
//! signals a process it did not spawn, and never leaves one running after
//! its owner is gone.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{Child, Command};

/// A running child: killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Supervised {
    /// Spawns `command` as `name`, its stderr (and, unless `announce` asks
    /// for stdout, its stdout) appended to `dir/name.log`.
    ///
    /// With `announce`, stdout stays piped so [`Supervised::first_line`] can
    /// read it; the rest of it is then drained into the log.
    ///
    /// # Errors
    ///
    /// The log file cannot be created or the binary cannot be started.
    pub fn spawn(
        name: &str,
        mut command: Command,
        dir: &Path,
        announce: bool,
    ) -> io::Result<Supervised> {
        let log = dir.join(format!("{name}.log"));
        let file = File::options().create(true).append(true).open(&log)?;
        let stdout = if announce {
            Stdio::piped()
        } else {
            Stdio::from(file.try_clone()?)
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| io::Error::new(err.kind(), format!("cannot start {name}: {err}")))?;
        Ok(Supervised {
            name: name.to_owned(),
            child,
            log,
        })
    }

    /// The child's first line on stdout, within `bound`; the rest of its
    /// stdout is then copied into its log.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled read loses the piped stdout (the child
    /// then writes into a closed pipe).
    ///
    /// # Errors
    ///
    /// Stdout was not piped or was already taken, it closed first (the
    /// child died, its log is quoted), or the bound passed.
    pub async fn first_line(&mut self, bound: Duration) -> io::Result<String> {
        let stdout = self
            .child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other(format!("{}: stdout is not piped", self.name)))?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(bound, lines.next_line()).await;
        match line {
            Ok(Ok(Some(line))) => {
                let log = File::options().append(true).open(&self.log)?;
                tokio::spawn(drain(lines.into_inner(), log));
                Ok(line)
            }
            Ok(Ok(None)) => Err(self.failed("closed its stdout before a first line")),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(self.failed(&format!("wrote no line within {bound:?}"))),
        }
    }

    /// The process id (None once reaped).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends SIGTERM (with `kill -TERM`, the one signal tool every Unix has).
    ///
    /// # Errors
    ///
    /// The child was already reaped, or `kill` failed.
    pub fn terminate(&self) -> io::Result<()> {
        let pid = self
            .id()
            .ok_or_else(|| io::Error::other(format!("{} has already exited", self.name)))?;
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "kill -TERM {pid} ({}): {status}",
                self.name
            )))
        }
    }

    /// Waits for the child to exit, at most `bound`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the child keeps running and stays supervised.
    ///
    /// # Errors
    ///
    /// The bound passed (the child is still running) or waiting failed.
    pub async fn wait(&mut self, bound: Duration) -> io::Result<ExitStatus> {
        match tokio::time::timeout(bound, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => Err(self.failed(&format!("did not exit within {bound:?}"))),
        }
    }

    /// Whether the child has exited, without waiting.
    ///
    /// # Errors
    ///
    /// As [`tokio::process::Child::try_wait`].
    pub fn exited(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// An error naming the child, what went wrong and the end of its log.
    pub fn failed(&self, what: &str) -> io::Error {
        io::Error::other(format!(
            "{} {what}; the end of {}:\n{}",
            self.name,
            self.log.display(),
            self.log_tail(20)
        ))
    }

    /// The last `lines` lines of the child's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // SIGKILL, then reap if it is already gone; tokio reaps the rest
        // (kill_on_drop) once the kill has landed.
        let _ = self.child.start_kill();
        let _ = self.child.try_wait();
    }
}

/// Copies the rest of a child's stdout into its log, until it closes.
async fn drain(stdout: impl AsyncRead + Unpin, log: File) {
    let mut log = tokio::fs::File::from_std(log);
    let mut stdout = stdout;
    let _ = tokio::io::copy(&mut stdout, &mut log).await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::process::Command;

    use super::Supervised;
    use crate::fleet::Workdir;

    /// `Some(state)` from `/proc/PID/stat` (`R`, `S`, `Z`, ...), `None`
    /// once the process is gone.
    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.chars().next()
    }

    #[tokio::test]
    async fn a_child_is_killed_when_its_owner_panics() {
        let dir = Workdir::new().unwrap();
        let mut sleeper = Command::new("sleep");
        sleeper.arg("60");
        let child = Supervised::spawn("sleeper", sleeper, dir.path(), false).unwrap();
        let pid = child.id().unwrap();
        // Any live state counts: just after the fork it may still be `D`
        // (loading the image), which CI once caught.
        let first = state(pid);
        assert!(
            matches!(first, Some(s) if s != 'Z'),
            "it runs first: {first:?}"
        );
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _owned = child;
            panic!("the owner panics");
        }));
        assert!(unwound.is_err());
        // SIGKILL has been sent; the process is dead (a zombie until tokio
        // reaps it) within a bound, never left sleeping.
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while matches!(state(pid), Some(s) if s != 'Z') {
            assert!(std::time::Instant::now() < end, "pid {pid} still runs");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn terminate_sends_sigterm_and_wait_sees_the_exit() {
        let dir = Workdir::new().unwrap();
        let mut sleeper = Command::new("sleep");
        sleeper.arg("60");
        let mut child = Supervised::spawn("sleeper", sleeper, dir.path(), false).unwrap();
        child.terminate().unwrap();
        let status = child.wait(Duration::from_secs(10)).await.unwrap();
        assert!(!status.success(), "sleep ends by the signal: {status}");
        assert!(
            child.terminate().is_err(),
            "a reaped child is not signalled again"
        );
    }
}
