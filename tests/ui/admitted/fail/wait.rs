use admission_core::admitted;

#[admitted(class = work, wait = "250ms")]
async fn rotate() -> String {
    String::new()
}

fn main() {}
