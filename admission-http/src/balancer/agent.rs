//! The HAProxy agent-check responder.
//!
//! This module owns [`AgentCheck`] and [`AgentAnswer`]: on its own TCP
//! port, each connection gets one line saying the replica's weight (or
//! `drain` once readiness is withdrawn) and is closed. It must never wait
//! on a peer in its accept loop, never read more than [`MAX_PEER_BYTES`]
//! from one, never hold more than its bound of connections open, and never
//! answer `up` again once it has answered `drain`.

use std::fmt;
use std::io;
use std::net::Shutdown as Direction;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{LoadReport, Readiness};

/// The most bytes read from one agent-check peer (HAProxy's `agent-send`
/// string, if configured); the rest is never read.
pub const MAX_PEER_BYTES: usize = 256;

/// How long a closed-for-writing connection lingers for the peer's own
/// bytes before it is dropped.
pub const LINGER: Duration = Duration::from_millis(500);

/// Connections that may linger at once by default; past it a connection
/// still gets its line, and is closed at once.
pub const DEFAULT_MAX_LINGERING: usize = 64;

/// What the agent says on one connection.
///
/// # Examples
///
/// ```
/// use admission_http::balancer::AgentAnswer;
///
/// assert_eq!(AgentAnswer::Up { weight: 73 }.to_string(), "up ready 73%\n");
/// assert_eq!(AgentAnswer::Drain.to_string(), "drain\n");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[doc(hidden)]
pub enum AgentAnswer {
    /// Ready, with a weight in percent of the server's configured weight
    /// (`1..=100`). Written `up ready W%`: `up` marks the server's
    /// operational state up, `ready` cancels a `DRAIN` left by an earlier
    /// process on the same address (HAProxy keeps the administrative state
    /// the agent set until the agent says otherwise, so a replica restarted
    /// in a rolling restart must say `ready` to get traffic back).
    Up {
        /// Percent of the configured weight.
        weight: u8,
    },
    /// Readiness withdrawn: HAProxy puts the server in `DRAIN` (no new
    /// connections but persistent ones) and keeps it there.
    Drain,
}

impl fmt::Display for AgentAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentAnswer::Up { weight } => writeln!(f, "up ready {weight}%"),
            AgentAnswer::Drain => f.write_str("drain\n"),
        }
    }
}

/// An HAProxy agent-check responder: HAProxy's `agent-check` opens a TCP
/// connection to `agent-port` (and `agent-addr`) every `agent-inter`, reads
/// one ASCII line of words (a weight such as `73%`, and states such as
/// `up`, `ready`, `drain`), and acts on it (HAProxy configuration manual,
/// section 5.2, `agent-check`).
///
/// The weight is [`Load::agent_weight`](super::Load::agent_weight) of the
/// pools it reports on; from the moment readiness is withdrawn the answer
/// is `drain`, and since readiness never comes back, it never says `up`
/// again.
///
/// Bounded: the accept loop answers each connection with one non-blocking
/// write (a line of at most 16 bytes into a fresh socket's empty buffer)
/// and never waits on the peer. A connection then lingers, up to
/// [`LINGER`] and [`MAX_PEER_BYTES`], so that closing it does not reset a
/// peer that sent its `agent-send` string before reading; at most
/// `max_lingering` do at once, and the rest are closed at once after their
/// line. A flood therefore costs at most `max_lingering` small tasks, and a
/// peer that never reads nor closes costs at most [`LINGER`].
///
/// # Examples
///
/// ```
/// use admission_http::balancer::{AgentCheck, LoadReport, Readiness};
/// use admission_core::{Pool, Shutdown};
/// use tokio::io::AsyncReadExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let shutdown = Shutdown::default();
/// let registry = Pool::new("registry", 4).unwrap();
/// let agent = AgentCheck::new(Readiness::new(&shutdown), LoadReport::new(&registry));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = listener.local_addr()?;
/// tokio::spawn(agent.serve(listener));
///
/// let _slot = registry.try_admit().unwrap();
/// let mut line = String::new();
/// tokio::net::TcpStream::connect(addr).await?.read_to_string(&mut line).await?;
/// assert_eq!(line, "up ready 75%\n");
///
/// shutdown.shutdown().await;
/// line.clear();
/// tokio::net::TcpStream::connect(addr).await?.read_to_string(&mut line).await?;
/// assert_eq!(line, "drain\n");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct AgentCheck {
    readiness: Readiness,
    report: LoadReport,
    max_lingering: usize,
}

impl AgentCheck {
    /// A responder that says `drain` once `readiness` is withdrawn and
    /// otherwise weighs the pools `report` reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::{AgentAnswer, AgentCheck, LoadReport, Readiness};
    /// use admission_core::{Pool, Shutdown};
    ///
    /// let agent = AgentCheck::new(
    ///     Readiness::new(&Shutdown::default()),
    ///     LoadReport::new(&Pool::new("registry", 2).unwrap()),
    /// );
    /// assert_eq!(agent.answer(), AgentAnswer::Up { weight: 100 });
    /// ```
    pub fn new(readiness: Readiness, report: LoadReport) -> AgentCheck {
        AgentCheck {
            readiness,
            report,
            max_lingering: DEFAULT_MAX_LINGERING,
        }
    }

    /// At most `max` connections linger at once (see the type's docs); at
    /// least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::{AgentCheck, LoadReport, Readiness};
    /// use admission_core::{Pool, Shutdown};
    ///
    /// let agent = AgentCheck::new(
    ///     Readiness::new(&Shutdown::default()),
    ///     LoadReport::new(&Pool::new("registry", 2).unwrap()),
    /// )
    /// .max_lingering(8);
    /// # drop(agent);
    /// ```
    #[must_use]
    pub fn max_lingering(mut self, max: usize) -> AgentCheck {
        self.max_lingering = max.max(1);
        self
    }

    /// What a connection would be told now.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::balancer::{AgentAnswer, AgentCheck, LoadReport, Readiness};
    /// use admission_core::{Pool, Shutdown};
    ///
    /// let pool = Pool::new("registry", 2).unwrap();
    /// let readiness = Readiness::new(&Shutdown::default());
    /// let agent = AgentCheck::new(readiness.clone(), LoadReport::new(&pool));
    /// let _held = (pool.try_admit().unwrap(), pool.try_admit().unwrap());
    /// assert_eq!(agent.answer(), AgentAnswer::Up { weight: 1 }, "full, but never ejected");
    /// readiness.withdraw();
    /// assert_eq!(agent.answer(), AgentAnswer::Drain);
    /// ```
    #[doc(hidden)]
    pub fn answer(&self) -> AgentAnswer {
        if self.readiness.is_ready() {
            AgentAnswer::Up {
                weight: self.report.load().agent_weight(),
            }
        } else {
            AgentAnswer::Drain
        }
    }

    /// Answers every connection on `listener` until the future is dropped.
    /// Keep it running through the drain delay and the drain, so that the
    /// balancer reads `drain` (spawn it, and let the process exit end it).
    ///
    /// An accept error (out of file descriptors, say) is logged by its
    /// class and retried after a short pause; it never ends the loop.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it stops accepting and aborts the lingering
    /// connections, which only closes them.
    pub async fn serve(self, listener: TcpListener) {
        let lingering = Arc::new(Semaphore::new(self.max_lingering));
        let mut tasks = JoinSet::new();
        loop {
            // Reap finished lingerers so the set stays as small as the bound.
            while tasks.try_join_next().is_some() {}
            let stream = match listener.accept().await {
                Ok((stream, _peer)) => stream,
                Err(err) => {
                    tracing::warn!(class = ?err.kind(), "agent-check accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let line = self.answer().to_string();
            if let Err(err) = write_line(&stream, line.as_bytes()) {
                tracing::debug!(class = ?err.kind(), "agent-check answer not written");
                continue;
            }
            match Arc::clone(&lingering).try_acquire_owned() {
                Ok(permit) => {
                    tasks.spawn(async move {
                        linger(stream).await;
                        drop(permit);
                    });
                }
                // Past the bound: the line is out; close without lingering.
                Err(_) => drop(stream),
            }
        }
    }
}

/// Writes `line` without waiting: a fresh socket's send buffer is empty,
/// so a short line either goes out whole or the connection is dropped.
fn write_line(stream: &TcpStream, line: &[u8]) -> io::Result<()> {
    match stream.try_write(line)? {
        n if n == line.len() => Ok(()),
        _ => Err(io::Error::from(io::ErrorKind::WriteZero)),
    }
}

/// Half-closes `stream` (the peer reads the line, then end of stream) and
/// reads what the peer sends, at most [`MAX_PEER_BYTES`] and for at most
/// [`LINGER`], so the close that follows is a FIN, not a reset that could
/// cost the peer its unread line.
async fn linger(stream: TcpStream) {
    let Ok(stream) = stream.into_std() else {
        return;
    };
    if stream.shutdown(Direction::Write).is_err() {
        return;
    }
    let Ok(stream) = TcpStream::from_std(stream) else {
        return;
    };
    let mut buf = [0_u8; MAX_PEER_BYTES];
    let mut read = 0;
    let _ = tokio::time::timeout(LINGER, async {
        while read < buf.len() {
            if stream.readable().await.is_err() {
                return;
            }
            match stream.try_read(&mut buf[read..]) {
                Ok(0) => return,
                Ok(n) => read += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    })
    .await;
}
