use admission_core::admitted;

#[admitted(class = reads)]
async fn status() -> String {
    String::new()
}

fn main() {}
