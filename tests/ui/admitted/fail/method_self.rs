use admission_core::admitted;

struct App;

impl App {
    #[admitted(class = control)]
    async fn status(&self) -> String {
        String::new()
    }
}

fn main() {}
