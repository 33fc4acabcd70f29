//! `pools = PATH` names a `static LazyLock<RequestPools>`, here or in a
//! module; the handler is still an actix-web handler.

use std::sync::LazyLock;

use actix_web::{App, web};
use admission_actix::admitted;
use admission_core::{Class, Code, RequestPools};

static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());

mod state {
    use std::sync::LazyLock;

    use admission_core::RequestPools;

    pub static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());
}

#[admitted(class = control, pools = POOLS)]
async fn status() -> String {
    String::from("ok")
}

#[admitted(class = work, pools = crate::state::POOLS)]
async fn rotate() -> &'static str {
    "rotated"
}

fn main() {
    let _app = App::new()
        .route("/status", web::get().to(status))
        .route("/rotate", web::post().to(rotate));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        assert_eq!(status().await.unwrap(), "ok");
        let held = POOLS.try_lease(Class::Control).unwrap();
        let rejection = status().await.unwrap_err();
        assert_eq!(rejection.refusal().map(|r| r.code()), Some(Code::Saturated));
        drop(held);

        assert_eq!(rotate().await.unwrap(), "rotated");
        assert_eq!(state::POOLS.pool(Class::Work).stats().in_use, 0);
    });
}
