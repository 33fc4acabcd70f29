use admission_core::{Class, LoopOwner, RequestPools, reserved};

#[reserved(slots = 2)]
struct RecoveryLoop;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let requests = RequestPools::new(1, 1).unwrap();
        let _every_work_slot = requests.try_lease(Class::Work).unwrap();
        let scanned = RecoveryLoop
            .execution(requests.execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(7)))
            .await;
        assert_eq!(scanned, Ok(7), "the loop runs on its own slots");
        assert_eq!(RecoveryLoop.reservation().stats().in_use, 0);
    });
}
