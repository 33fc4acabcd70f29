//! Shared test support: a real actix-web server on 127.0.0.1, a client,
//! gates that hold handlers, and a bounded wait.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpServer, web};
use admission_actix::AdmissionControl;
use tokio::sync::{mpsc, watch};

/// How long any wait in a test may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A running server: its address, its handle and its thread.
pub struct Server {
    pub addr: SocketAddr,
    handle: ServerHandle,
    thread: JoinHandle<std::io::Result<()>>,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops the server (without waiting for open requests) and joins it.
    pub async fn stop(self) {
        self.handle.stop(false).await;
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .expect("join task")
            .expect("server thread did not panic")
            .expect("server ran without an I/O error");
    }
}

/// Starts a 2-worker server on a fresh port of 127.0.0.1, in its own thread
/// and actix system, with `admission` wrapping routes from `configure`.
pub fn serve<F>(admission: AdmissionControl, configure: F) -> Server
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    serve_with(admission, configure, true)
}

/// [`serve`], with actix-web's `h1_allow_half_closed` set: `false` makes a
/// worker close a connection (and drop its response) as soon as the client
/// closes its side, instead of at the next failed write.
pub fn serve_with<F>(admission: AdmissionControl, configure: F, allow_half_closed: bool) -> Server
where
    F: Fn(&mut web::ServiceConfig) + Send + Clone + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                App::new()
                    .wrap(admission.clone())
                    .configure(configure.clone())
            })
            .workers(2)
            .h1_allow_half_closed(allow_half_closed)
            .disable_signals()
            .listen(listener)?
            .run();
            handle_tx.send(server.handle()).expect("test is waiting");
            server.await
        })
    });
    let handle = handle_rx.recv().expect("server started");
    Server {
        addr,
        handle,
        thread,
    }
}

/// A client of its own, so that each request opens its own connection.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// Holds handlers until the test opens it; tells the test each arrival.
#[derive(Clone)]
pub struct Gate {
    arrived: mpsc::UnboundedSender<()>,
    open: watch::Receiver<bool>,
}

/// The test's side of a [`Gate`].
pub struct GateControl {
    arrived: mpsc::UnboundedReceiver<()>,
    open: watch::Sender<bool>,
}

pub fn gate() -> (Gate, GateControl) {
    let (arrived_tx, arrived_rx) = mpsc::unbounded_channel();
    let (open_tx, open_rx) = watch::channel(false);
    (
        Gate {
            arrived: arrived_tx,
            open: open_rx,
        },
        GateControl {
            arrived: arrived_rx,
            open: open_tx,
        },
    )
}

impl Gate {
    /// Says it arrived, then waits until the gate opens.
    pub async fn pass(&self) {
        self.arrived.send(()).expect("test is listening");
        let mut open = self.open.clone();
        open.wait_for(|open| *open).await.expect("gate kept");
    }
}

impl GateControl {
    /// Waits until `n` handlers have arrived.
    pub async fn arrivals(&mut self, n: usize) {
        for _ in 0..n {
            within("a handler to arrive at the gate", self.arrived.recv())
                .await
                .expect("gate kept");
        }
    }

    /// Whether another handler arrived.
    pub fn more_arrived(&mut self) -> bool {
        self.arrived.try_recv().is_ok()
    }

    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

/// Awaits `future`, failing the test if it takes longer than [`PATIENCE`].
pub async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A bounded polling wait, only for state nothing can signal (a pool's
/// counters after actix-web dropped a body on its own thread).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

/// A response's problem body, parsed.
pub async fn problem(response: reqwest::Response) -> serde_json::Value {
    let bytes = response.bytes().await.expect("body");
    serde_json::from_slice(&bytes).expect("problem body is JSON")
}

/// Shares a value with handlers through app data.
pub fn data<T: Send + Sync + 'static>(value: T) -> web::Data<T> {
    web::Data::from(Arc::new(value))
}
