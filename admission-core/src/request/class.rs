//! Request classes.
//!
//! This module owns [`Class`]. It must never decide capacity: that is
//! [`RequestPools`](crate::RequestPools)' job.

use std::fmt;

/// A request class, each with its own pool of leases.
///
/// # Examples
///
/// ```
/// use admission_core::Class;
///
/// assert_eq!(Class::Control.as_str(), "control");
/// assert_eq!(Class::Work.to_string(), "work");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Mutations (the incident's `WORK_SLOTS`, e.g. 2).
    Work,
    /// Reads and terminal control (the incident's `CONTROL_SLOTS`, e.g. 4).
    Control,
}

impl Class {
    /// Both classes.
    pub const ALL: [Class; 2] = [Class::Work, Class::Control];

    /// The class's name, which is also its pool's name: `work` or `control`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Work => "work",
            Class::Control => "control",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_pools_names() {
        assert_eq!(Class::Work.to_string(), "work");
        assert_eq!(Class::Control.as_str(), "control");
    }
}
