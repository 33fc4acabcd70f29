//! Reserved slots for background loop owners.
//!
//! This module declares and re-exports; each file owns one piece.

mod owner;
mod reservation;

pub use self::owner::LoopOwner;
pub use self::reservation::Reservation;
