//! The workflow service of incident 3 (actix-web): request admission by
//! class, and background loops with reserved slots that keep cycling while
//! requests hold every request slot.
//!
//! * `POST /operations?work_ms=MS`: a mutation under a *work* lease whose
//!   pure work takes MS.
//! * `GET /operations/{id}`: a read under a *control* lease.
//! * `GET /healthz` and `GET /status`: outside admission, never refused.
//! * Anything else, and any input it cannot use, gets a [`Problem`]: the
//!   same problem-document shape as a refusal, with no request data in it.
//! * Loops: [`RecoveryLoop`], [`ProviderLoop`] and [`BrokerConsumer`]
//!   (`#[reserved]`), and a [`NativeDispatcher`] sized from configuration.
//!
//! This module declares and re-exports; each file owns one piece.
//!
//! # Examples
//!
//! ```no_run
//! use admission_examples::workflow::{Config, Workflow};
//!
//! # #[actix_web::main]
//! # async fn main() -> std::io::Result<()> {
//! let config = Config::default();
//! let listener = std::net::TcpListener::bind(config.listen)?;
//! let workflow = Workflow::new(config).expect("valid configuration");
//! let stopped = workflow
//!     .serve(listener, async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await?;
//! stopped.log();
//! # Ok(())
//! # }
//! ```

mod config;
mod loops;
mod operations;
mod owners;
mod problem;
mod serve;
mod status;

pub use self::config::{BadCapacities, Config, NativeCapacities};
pub use self::loops::LoopStats;
pub use self::operations::{MAX_WORK_MS, Operation, State, Store, UnknownOperation};
pub use self::owners::{
    BROKER_MAX_TURNS, BROKER_SLOTS, BROKER_TURNS_PER_CYCLE, BrokerConsumer, NativeDispatcher,
    ProviderLoop, RecoveryLoop,
};
pub use self::problem::Problem;
pub use self::serve::{LOAD_REPORT_ROUTES, Stopped, Workflow};
