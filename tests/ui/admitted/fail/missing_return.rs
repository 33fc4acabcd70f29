use admission_core::admitted;

#[admitted(class = work)]
async fn rotate() {}

fn main() {}
