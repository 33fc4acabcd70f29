use std::sync::LazyLock;

use admission_axum::admitted;
use admission_core::{Class, RequestPools};

static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());

#[derive(Debug)]
struct Invalid;

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid")
    }
}

impl std::error::Error for Invalid {}

// `?` and `return` in the body keep their meaning: they end the handler's
// own `Result`, which the attribute wraps.
#[admitted(class = work, pools = POOLS)]
async fn parse(input: String) -> Result<u32, Invalid> {
    if input.is_empty() {
        return Err(Invalid);
    }
    let n: u32 = input.parse().map_err(|_| Invalid)?;
    Ok(n)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert_eq!(parse("7".into()).await.unwrap().unwrap(), 7);
        assert!(parse(String::new()).await.unwrap().is_err());
        assert_eq!(POOLS.pool(Class::Work).stats().in_use, 0);
    });
}
