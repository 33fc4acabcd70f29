use admission_axum::admitted;

#[admitted(class = work, flow = "acme")]
async fn export() -> String {
    String::new()
}

fn main() {}
