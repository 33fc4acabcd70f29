//! A server on 127.0.0.1 that answers a script in order (the last answer
//! repeats) and records each request's arrival: when, its method, the
//! headers the client carries and its body.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    status: StatusCode,
    headers: Vec<(&'static str, String)>,
}

impl Answer {
    pub(crate) fn ok() -> Answer {
        Answer {
            status: StatusCode::OK,
            headers: Vec::new(),
        }
    }

    pub(crate) fn refused(headers: &[(&'static str, &'static str)]) -> Answer {
        Answer::refused_owned(headers.iter().map(|(n, v)| (*n, (*v).to_owned())).collect())
    }

    pub(crate) fn refused_owned(headers: Vec<(&'static str, String)>) -> Answer {
        Answer {
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers,
        }
    }

    /// A trailers-only gRPC answer with `code` and, maybe, a pushback.
    pub(crate) fn grpc(code: u8, pushback: Option<&str>) -> Answer {
        let mut headers = vec![
            ("content-type", "application/grpc".to_owned()),
            ("grpc-status", code.to_string()),
        ];
        if let Some(pushback) = pushback {
            headers.push(("grpc-retry-pushback-ms", pushback.to_owned()));
        }
        Answer {
            status: StatusCode::OK,
            headers,
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub(crate) at: Instant,
    pub(crate) method: Method,
    pub(crate) budget_ms: Option<u64>,
    pub(crate) grpc_timeout: Option<String>,
    pub(crate) criticality: Option<String>,
    pub(crate) body: Vec<u8>,
}

#[derive(Debug)]
pub(crate) struct Scripted {
    addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Scripted {
    pub(crate) async fn start(script: Vec<Answer>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let record = arrivals.clone();
        let script = Arc::new(script);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (record, script) = (record.clone(), script.clone());
                let service = service_fn(move |request: Request<Incoming>| {
                    let (record, script) = (record.clone(), script.clone());
                    async move { Ok::<_, Infallible>(answer(request, &record, &script).await) }
                });
                tokio::spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Scripted { addr, arrivals }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/scripted", self.addr)
    }

    pub(crate) fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }
}

async fn answer(
    request: Request<Incoming>,
    record: &Mutex<Vec<Arrival>>,
    script: &[Answer],
) -> Response<Full<Bytes>> {
    let at = Instant::now();
    let (parts, body) = request.into_parts();
    let text = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default();
    let n = {
        let mut arrivals = record.lock().unwrap();
        arrivals.push(Arrival {
            at,
            method: parts.method.clone(),
            budget_ms: text("x-admission-budget-ms").and_then(|v| v.parse().ok()),
            grpc_timeout: text("grpc-timeout"),
            criticality: text("x-admission-criticality"),
            body,
        });
        arrivals.len() - 1
    };
    let scripted = &script[n.min(script.len() - 1)];
    let mut response = Response::new(Full::default());
    *response.status_mut() = scripted.status;
    for (name, value) in &scripted.headers {
        response
            .headers_mut()
            .insert(*name, value.parse().expect("a scripted header value"));
    }
    response
}
