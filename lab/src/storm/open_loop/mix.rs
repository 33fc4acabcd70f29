//! Which criticality each open-loop request carries.
//!
//! This module owns [`Mix`], the shares of core's three [`Criticality`]
//! levels, parsed from `--mix`. It draws a level
//! from a number the caller supplies and never touches the network.

use std::fmt;
use std::str::FromStr;

pub use admission_core::Criticality;
pub use admission_http::{BUDGET_HEADER, CRITICALITY_HEADER};

/// `level`'s place in [`Criticality::ALL`]: the index of its counts.
pub(super) const fn slot(level: Criticality) -> usize {
    match level {
        Criticality::Critical => 0,
        Criticality::Default => 1,
        Criticality::Sheddable => 2,
    }
}

/// The shares of the three criticality levels among the requests of one
/// run, and whether the header is sent at all.
///
/// [`Mix::default`] sends no criticality header (every request counts as
/// `default` on both sides); a parsed or built mix sends it on every
/// request. Shares are weights: they are divided by their sum.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::open_loop::{Criticality, Mix};
///
/// let mix: Mix = "critical=0.1,default=0.3,sheddable=0.6".parse().unwrap();
/// assert!((mix.share(Criticality::Sheddable) - 0.6).abs() < 1e-9);
/// assert!(mix.sends_header());
/// assert_eq!(mix.to_string(), "critical=0.1,default=0.3,sheddable=0.6");
///
/// let plain = Mix::default();
/// assert!(!plain.sends_header());
/// assert_eq!(plain.share(Criticality::Default), 1.0);
/// assert!("urgent=1".parse::<Mix>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    /// Normalised shares, indexed by [`Criticality::index`].
    shares: [f64; 3],
    header: bool,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            shares: [0.0, 1.0, 0.0],
            header: false,
        }
    }
}

/// A `--mix` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMix(String);

impl fmt::Display for BadMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a mix such as `critical=0.1,default=0.3,sheddable=0.6` \
             (finite, non-negative weights with a positive sum)",
            self.0
        )
    }
}

impl std::error::Error for BadMix {}

impl Mix {
    /// Every request carries `level`.
    pub fn only(level: Criticality) -> Mix {
        let mut shares = [0.0; 3];
        shares[slot(level)] = 1.0;
        Mix {
            shares,
            header: true,
        }
    }

    /// A mix from weights per level (levels not named get none).
    ///
    /// # Errors
    ///
    /// A [`BadMix`] when a weight is negative or not finite, or they sum
    /// to zero.
    pub fn new(weights: &[(Criticality, f64)]) -> Result<Mix, BadMix> {
        let bad = || {
            let text: Vec<String> = weights.iter().map(|(c, w)| format!("{c}={w}")).collect();
            BadMix(text.join(","))
        };
        let mut shares = [0.0; 3];
        for (level, weight) in weights {
            if !weight.is_finite() || *weight < 0.0 {
                return Err(bad());
            }
            shares[slot(*level)] += weight;
        }
        let sum: f64 = shares.iter().sum();
        if sum <= 0.0 {
            return Err(bad());
        }
        for share in &mut shares {
            *share /= sum;
        }
        Ok(Mix {
            shares,
            header: true,
        })
    }

    /// The share of requests that carry `level`, in 0..=1.
    pub fn share(&self, level: Criticality) -> f64 {
        self.shares[slot(level)]
    }

    /// Whether requests carry the criticality header.
    pub fn sends_header(&self) -> bool {
        self.header
    }

    /// The level for a uniform draw `u` in `[0, 1)`.
    pub(super) fn pick(&self, u: f64) -> Criticality {
        let mut below = 0.0;
        for level in Criticality::ALL {
            below += self.shares[slot(level)];
            if u < below {
                return level;
            }
        }
        // Rounding left `u` above the last sum: the last level with a share.
        Criticality::ALL
            .into_iter()
            .rev()
            .find(|l| self.shares[slot(*l)] > 0.0)
            .unwrap_or(Criticality::Default)
    }
}

impl FromStr for Mix {
    type Err = BadMix;

    fn from_str(text: &str) -> Result<Mix, BadMix> {
        let bad = || BadMix(text.to_owned());
        let mut weights = Vec::new();
        for part in text.split(',') {
            let (name, weight) = part.split_once('=').ok_or_else(bad)?;
            let level = Criticality::ALL
                .into_iter()
                .find(|l| l.as_str() == name.trim())
                .ok_or_else(bad)?;
            let weight: f64 = weight.trim().parse().map_err(|_| bad())?;
            weights.push((level, weight));
        }
        Mix::new(&weights).map_err(|_| bad())
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.header {
            return f.write_str("none (no header)");
        }
        let parts: Vec<String> = Criticality::ALL
            .into_iter()
            .filter(|l| self.share(*l) > 0.0)
            .map(|l| format!("{l}={}", round(self.share(l))))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// `x` to at most six decimals, without trailing zeros.
fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
