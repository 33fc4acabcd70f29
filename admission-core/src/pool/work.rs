//! The [`RegistryWork`] trait: a unit of blocking work.
//!
//! This module owns the trait and its impl for closures. It must never run
//! anything itself.

/// A unit of blocking or CPU-bound work (a full registry walk, a pure state
/// transition, a connector call) to run on a pool's worker thread.
///
/// Work always says whether it failed, so that a failure nobody waits for
/// any more is still reported. Closures returning a `Result` implement it.
///
/// # Examples
///
/// ```
/// use admission_core::RegistryWork;
///
/// struct Walk { series: usize }
///
/// impl RegistryWork for Walk {
///     type Output = String;
///     type Error = std::fmt::Error;
///     fn run(self) -> Result<String, std::fmt::Error> {
///         Ok(format!("{} series", self.series))
///     }
/// }
///
/// assert_eq!(Walk { series: 3 }.run().unwrap(), "3 series");
/// let closure = || Ok::<_, std::fmt::Error>(1);
/// assert_eq!(RegistryWork::run(closure).unwrap(), 1);
/// ```
pub trait RegistryWork: Send + 'static {
    /// What the work produces.
    type Output: Send + 'static;
    /// How the work fails; its type name is the class logged for an orphan.
    type Error: Send + 'static;

    /// Runs the work on the current (worker) thread.
    ///
    /// # Errors
    ///
    /// The work's own error.
    fn run(self) -> Result<Self::Output, Self::Error>;
}

impl<F, T, E> RegistryWork for F
where
    F: FnOnce() -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    type Output = T;
    type Error = E;

    fn run(self) -> Result<T, E> {
        self()
    }
}
