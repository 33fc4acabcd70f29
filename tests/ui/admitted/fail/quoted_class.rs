use admission_core::admitted;

#[admitted(class = "control")]
async fn status() -> String {
    String::new()
}

fn main() {}
