use admission_axum::admitted;

// `queue` and a bounded wait are two ways to wait: one of them.
#[admitted(class = work, queue, wait_ms = 250)]
async fn create() -> String {
    String::new()
}

fn main() {}
