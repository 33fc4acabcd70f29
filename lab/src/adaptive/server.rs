//! The HTTP server of one run: a gate in front of the backend, on a fresh
//! loopback port.
//!
//! This module owns [`Server`]: `GET /` admits through the run's
//! [`Front`] (`503` at once when refused), then serves through the
//! backend (`200`). A client that goes away drops its request, and with
//! it the ticket and the backend permit. It never serves anything else.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::backend::Backend;
use super::gate::Front;

#[derive(Debug, Clone)]
struct Served {
    front: Arc<Front>,
    backend: Arc<Backend>,
}

/// A running server; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds `127.0.0.1:0` and serves.
    pub(crate) async fn start(front: Arc<Front>, backend: Arc<Backend>) -> io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/", get(handle))
            .with_state(Served { front, backend });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Server { addr, task })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(served): State<Served>) -> StatusCode {
    let Some(ticket) = served.front.admit() else {
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    served.backend.serve().await;
    drop(ticket);
    StatusCode::OK
}
