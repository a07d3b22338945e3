//! The command line's errors: each layer's error kept whole (the library's, the laboratory's, the
//! runtime's), and the failures only the command line has: its own options, a peer library timed
//! beside hetla, the threads a peer runs on.

use hetla_kernels::KernelError;

/// What went wrong in a command, with what was wrong and what would be right.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option of the command line is out of range, or options disagree.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// A peer library timed beside hetla (`--compare`) failed on the matrix.
    #[error("the peer {name} failed on the matrix: {source}")]
    Peer {
        /// The peer ("OpenBLAS dpotrf").
        name: String,
        /// Its error.
        #[source]
        source: KernelError,
    },
    /// Threads for a peer could not be started.
    #[error("cannot start {threads} threads: {reason}")]
    Spawn {
        /// How many were asked for.
        threads: usize,
        /// What the system said.
        reason: String,
    },
    /// The library's error.
    #[error(transparent)]
    Library(#[from] hetla::Error),
    /// The laboratory's error (platform models, simulations).
    #[error(transparent)]
    Lab(#[from] hetla_lab::Error),
    /// The runtime's error (platforms, files).
    #[error(transparent)]
    Runtime(#[from] hetla_runtime::Error),
}

impl Error {
    /// A short name of the kind of error ("invalid_option", "too_large"): the `kind` of a `--json`
    /// error.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidOption { .. } => "invalid_option",
            Error::Peer { .. } => "peer",
            Error::Spawn { .. } => "spawn",
            Error::Library(e) => e.kind(),
            Error::Lab(e) => e.kind(),
            Error::Runtime(e) => e.kind(),
        }
    }

    /// An output file that could not be made.
    pub fn output(path: &std::path::Path, reason: impl std::fmt::Display) -> Self {
        Error::Runtime(hetla_runtime::Error::output(path, reason))
    }
}

impl From<KernelError> for Error {
    fn from(e: KernelError) -> Self {
        Error::Library(e.into())
    }
}

impl From<hetla_clusters::ClusterError> for Error {
    fn from(e: hetla_clusters::ClusterError) -> Self {
        Error::Runtime(e.into())
    }
}

/// Result with the command line's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
