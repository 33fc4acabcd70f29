use admission_axum::admitted;

struct App;

impl App {
    #[admitted(class = control)]
    async fn status(&self) -> String {
        String::new()
    }
}

fn main() {}
