use admission_axum::admitted;
use admission_core::RequestPools;

fn make_pools() -> RequestPools {
    RequestPools::new(2, 4).unwrap()
}

#[admitted(class = work, pools = make_pools())]
async fn rotate() -> String {
    String::new()
}

fn main() {}
