use std::sync::OnceLock;

use admission_core::{Class, Code, RequestPools, admitted};

fn pools() -> &'static RequestPools {
    static POOLS: OnceLock<RequestPools> = OnceLock::new();
    POOLS.get_or_init(|| RequestPools::new(1, 1).unwrap())
}

// Waits up to 20 ms for a lease instead of failing fast.
#[admitted(class = work, pools = pools(), wait = "20ms")]
async fn rotate() -> &'static str {
    "rotated"
}

#[admitted(class = control, pools = pools(), wait_ms = 20)]
async fn read() -> &'static str {
    "read"
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert_eq!(rotate().await.unwrap(), "rotated");
        let held = pools().try_lease(Class::Work).unwrap();
        let refusal = rotate().await.unwrap_err();
        assert_eq!(refusal.code(), Code::WaitTimedOut);
        drop(held);
        assert_eq!(read().await.unwrap(), "read");
    });
}
