//! Request classes.
//!
//! This module owns [`Class`]. It must never decide capacity: that is
//! [`RequestPools`](crate::RequestPools)' job.

use std::fmt;
use std::str::FromStr;

/// A request class, each with its own pool of leases.
///
/// # Examples
///
/// ```
/// use admission_core::Class;
///
/// assert_eq!("control".parse::<Class>(), Ok(Class::Control));
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

/// The error for a string that names no class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownClass(());

impl fmt::Display for UnknownClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown request class: expected `work` or `control`")
    }
}

impl std::error::Error for UnknownClass {}

impl FromStr for Class {
    type Err = UnknownClass;

    fn from_str(s: &str) -> Result<Class, UnknownClass> {
        match s {
            "work" => Ok(Class::Work),
            "control" => Ok(Class::Control),
            _ => Err(UnknownClass(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for class in Class::ALL {
            assert_eq!(class.to_string().parse::<Class>(), Ok(class));
        }
        assert_eq!(Class::Work.to_string(), "work");
        let unknown = "Work".parse::<Class>().unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "unknown request class: expected `work` or `control`"
        );
    }
}
