//! The laboratory's errors: a platform model that cannot be used, an option out of range, or the
//! library's and the runtime's errors, kept whole.

/// What went wrong in a modelled run, a platform file or a calibration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A platform model (preset or file) that cannot be used.
    #[error("platform model {name}: {reason}")]
    PlatformModel {
        /// The preset name or file.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An option of a modelled run is out of range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// The library's error (a plan, a run, a calibration's kernels).
    #[error(transparent)]
    Library(#[from] hetla::Error),
    /// The runtime's error (a simulated run, a platform, a file).
    #[error(transparent)]
    Runtime(#[from] hetla_runtime::Error),
    /// A tile kernel's error (calibrating a device's link).
    #[error(transparent)]
    Kernel(#[from] hetla_kernels::KernelError),
}

impl Error {
    /// A short name of the kind of error ("platform_model", "invalid_option"), for scripts (the
    /// CLI's `--json` errors).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::PlatformModel { .. } => "platform_model",
            Error::InvalidOption { .. } => "invalid_option",
            Error::Library(e) => e.kind(),
            Error::Runtime(e) => e.kind(),
            Error::Kernel(_) => "kernel",
        }
    }
}

impl From<hetla_clusters::ClusterError> for Error {
    fn from(e: hetla_clusters::ClusterError) -> Self {
        Error::Runtime(e.into())
    }
}

/// Result with the laboratory's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
