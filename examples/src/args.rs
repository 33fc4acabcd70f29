//! A small hand-written flag parser: `--name value` or `--name=value`.
//!
//! The binaries take a handful of flags; parsing them by hand keeps the
//! examples free of a command-line dependency.

use std::fmt;
use std::str::FromStr;

/// A command line split into flags and their values.
///
/// # Examples
///
/// ```
/// use admission_examples::args::Args;
///
/// let mut args = Args::parse(["--workers", "3", "--listen=127.0.0.1:0"].map(String::from)).unwrap();
/// assert_eq!(args.value::<usize>("workers").unwrap(), Some(3));
/// assert_eq!(args.value::<String>("listen").unwrap().as_deref(), Some("127.0.0.1:0"));
/// assert!(args.finish().is_ok());
/// ```
#[derive(Debug, Default)]
pub struct Args {
    pairs: Vec<(String, Option<String>)>,
}

/// A flag that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

impl ArgError {
    /// A usage error the parser cannot see by itself, such as two flags
    /// that do not go together.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_examples::args::ArgError;
    ///
    /// let err = ArgError::new("`--a` needs `--b`");
    /// assert_eq!(err.to_string(), "`--a` needs `--b`");
    /// ```
    pub fn new(message: impl Into<String>) -> ArgError {
        ArgError(message.into())
    }
}

impl Args {
    /// Splits `args` (without the program name) into flags.
    ///
    /// # Errors
    ///
    /// An [`ArgError`] for a word that is not a `--flag`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, ArgError> {
        let mut pairs: Vec<(String, Option<String>)> = Vec::new();
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                return Err(ArgError(format!("unexpected argument `{arg}`")));
            };
            if let Some((name, value)) = flag.split_once('=') {
                pairs.push((name.to_owned(), Some(value.to_owned())));
            } else {
                let value = args.next_if(|next| !next.starts_with("--"));
                pairs.push((flag.to_owned(), value));
            }
        }
        Ok(Args { pairs })
    }

    /// Whether `name` was given (and takes it).
    pub fn flag(&mut self, name: &str) -> bool {
        let before = self.pairs.len();
        self.pairs.retain(|(n, _)| n != name);
        self.pairs.len() != before
    }

    /// The value of `--name`, parsed, if it was given (the last one wins).
    ///
    /// # Errors
    ///
    /// An [`ArgError`] when the flag has no value or it does not parse.
    pub fn value<T>(&mut self, name: &str) -> Result<Option<T>, ArgError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        let mut found = None;
        self.pairs.retain(|(n, v)| {
            if n == name {
                found = Some(v.clone());
                false
            } else {
                true
            }
        });
        match found {
            None => Ok(None),
            Some(None) => Err(ArgError(format!("`--{name}` needs a value"))),
            Some(Some(raw)) => raw
                .parse()
                .map(Some)
                .map_err(|err| ArgError(format!("`--{name} {raw}`: {err}"))),
        }
    }

    /// Fails on any flag nobody asked for.
    ///
    /// # Errors
    ///
    /// An [`ArgError`] naming the first unknown flag.
    pub fn finish(self) -> Result<(), ArgError> {
        match self.pairs.first() {
            None => Ok(()),
            Some((name, _)) => Err(ArgError(format!("unknown flag `--{name}`"))),
        }
    }
}
