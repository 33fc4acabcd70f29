//! The stop signal the example services share.
//!
//! This module owns [`terminated`]; it must never start a shutdown itself:
//! it only says when one was asked for.

/// Completes on SIGTERM or SIGINT (SIGINT only where there is no SIGTERM).
///
/// # Cancel safety
///
/// Cancel safe: dropping it stops listening.
///
/// # Examples
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// admission_examples::signal::terminated().await;
/// // drain under the deadline, counted from now
/// # }
/// ```
pub async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
            },
            Err(err) => {
                tracing::error!(class = ?err.kind(), "cannot listen for SIGTERM; SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("SIGINT received");
    }
}
