//! Issue 39's bounded state, seen from outside: 100,000 distinct flow keys
//! asking a contended class leave the process's resident memory within
//! 1 MiB of where it was (a table that kept a few dozen bytes per key would
//! grow by several). Its own test binary, so no other test allocates
//! meanwhile; Linux only (it reads `/proc/self/statm`).

#![cfg(target_os = "linux")]

use admission_core::{Caller, Class, Code, RequestPools};

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_hundred_thousand_flow_keys_keep_memory_bounded() {
    let requests = RequestPools::new(4, 1).unwrap();
    let held: Vec<_> = (0..4)
        .map(|n| {
            requests
                .try_lease_for(Class::Work, Caller::default().with_flow(("holder", n)))
                .unwrap()
        })
        .collect();
    let before = resident_bytes();
    for key in 0..100_000_u32 {
        let refused = requests
            .try_lease_for(Class::Work, Caller::default().with_flow(key))
            .unwrap_err();
        assert!(matches!(refused.code(), Code::Saturated | Code::FlowShare));
    }
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 1 << 20,
        "100,000 keys grew the process by {grown} bytes"
    );
    drop(held);
    assert!(
        requests
            .try_lease_for(Class::Work, Caller::default())
            .is_ok(),
        "the class still serves"
    );
}
