//! `RequestPools::install_global` succeeds once; a second call is
//! `ConfigError::GlobalAlreadySet`, and both work with `?` in a function
//! returning `Result<(), Box<dyn Error>>`. A binary of its own: the global
//! request pools are process-wide.

use std::error::Error;

use admission_core::{Class, ConfigError, RequestPools};

fn install(work: usize, control: usize) -> Result<(), Box<dyn Error>> {
    RequestPools::new(work, control)?.install_global()?;
    Ok(())
}

#[test]
fn install_global_twice_is_global_already_set() {
    install(3, 6).expect("the first install succeeds");
    assert_eq!(
        RequestPools::global().pool(Class::Work).capacity(),
        3,
        "global() returns the installed pools"
    );

    let again = install(1, 1).expect_err("a second install is refused");
    assert_eq!(
        again.downcast_ref::<ConfigError>(),
        Some(&ConfigError::GlobalAlreadySet),
        "the error through `?` is GlobalAlreadySet: {again}"
    );
    assert!(again.to_string().contains("install_global"), "{again}");
    assert_eq!(
        RequestPools::new(1, 1).unwrap().install_global(),
        Err(ConfigError::GlobalAlreadySet)
    );
    assert_eq!(
        RequestPools::global().pool(Class::Control).capacity(),
        6,
        "the first pools stay installed"
    );
}
