use admission_axum::admitted;

#[admitted(class = work, pools = { admission_core::RequestPools::new(2, 4).unwrap() })]
async fn rotate() -> String {
    String::new()
}

fn main() {}
