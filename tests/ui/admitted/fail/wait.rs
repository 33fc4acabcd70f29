use admission_core::admitted;

#[admitted(class = work, wait = "soon")]
async fn rotate() -> String {
    String::new()
}

fn main() {}
