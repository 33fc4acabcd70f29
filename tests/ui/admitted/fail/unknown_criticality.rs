use admission_axum::admitted;

#[admitted(class = work, criticality = urgent)]
async fn checkout() -> String {
    String::new()
}

fn main() {}
