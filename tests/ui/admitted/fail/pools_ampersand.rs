use std::sync::LazyLock;

use admission_axum::admitted;
use admission_core::RequestPools;

static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(2, 4).unwrap());

#[admitted(class = work, pools = &POOLS)]
async fn rotate() -> String {
    String::new()
}

fn main() {}
