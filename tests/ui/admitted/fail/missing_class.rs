use admission_core::admitted;

#[admitted]
async fn status() -> String {
    String::new()
}

fn main() {}
