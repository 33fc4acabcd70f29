//! Once `RequestPools::global()` has created the default pools, installing
//! others is `ConfigError::GlobalAlreadySet`: a binary of its own, because
//! the global request pools are process-wide.

use admission_core::{Class, ConfigError, RequestPools};

#[test]
fn install_after_the_default_was_created_is_global_already_set() {
    assert_eq!(
        RequestPools::global().pool(Class::Work).capacity(),
        2,
        "the default work class"
    );
    assert_eq!(
        RequestPools::new(3, 6).unwrap().install_global(),
        Err(ConfigError::GlobalAlreadySet),
        "too late: the defaults are in use"
    );
    assert_eq!(RequestPools::global().pool(Class::Work).capacity(), 2);
}
