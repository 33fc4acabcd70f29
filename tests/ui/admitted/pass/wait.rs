use std::sync::LazyLock;

use admission_axum::admitted;
use admission_core::{Class, Code, RequestPools};
use axum::Router;
use axum::routing::{get, post};

static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());

// Waits up to 20 ms for a lease instead of failing fast.
#[admitted(class = work, pools = POOLS, wait = "20ms")]
async fn rotate() -> &'static str {
    "rotated"
}

#[admitted(class = control, pools = POOLS, wait_ms = 20)]
async fn read() -> &'static str {
    "read"
}

fn main() {
    // The waiting handlers are still axum handlers: their futures are `Send`.
    let _router: Router = Router::new()
        .route("/rotate", post(rotate))
        .route("/read", get(read));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert_eq!(rotate().await.unwrap(), "rotated");
        // Another caller (here another thread) holds the only work slot; a
        // caller holding it itself would be refused as reentrant instead.
        let held = std::thread::spawn(|| POOLS.try_lease(Class::Work).unwrap())
            .join()
            .unwrap();
        let rejection = rotate().await.unwrap_err();
        assert_eq!(
            rejection.refusal().map(|r| r.code()),
            Some(Code::WaitTimedOut)
        );
        drop(held);
        assert_eq!(read().await.unwrap(), "read");
    });
}
