//! The run's scratch directory and its loopback ports.
//!
//! This module owns [`Workdir`] (a fresh directory under the system's
//! temporary directory for logs and rendered configurations, removed when
//! dropped) and [`free_port`]. It never writes outside that directory.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// A directory of its own for one fleet run, removed when dropped.
///
/// # Examples
///
/// ```
/// use admission_lab::fleet::{Workdir, free_port};
///
/// let dir = Workdir::new().unwrap();
/// let path = dir.path().to_path_buf();
/// assert!(path.is_dir());
/// drop(dir);
/// assert!(!path.exists());
/// assert!(free_port().unwrap().ip().is_loopback());
/// ```
#[derive(Debug)]
pub struct Workdir {
    path: PathBuf,
}

impl Workdir {
    /// Creates `fleet-<pid>-<n>` under the temporary directory.
    ///
    /// # Errors
    ///
    /// The directory cannot be created.
    pub fn new() -> io::Result<Workdir> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "fleet-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Relaxed)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Workdir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A loopback address whose port was free a moment ago: bound to port 0,
/// then released for a child to bind (each child binds with
/// `SO_REUSEADDR`, as tokio and HAProxy do).
///
/// # Errors
///
/// No port could be bound.
pub fn free_port() -> io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}
