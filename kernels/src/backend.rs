//! Run-time choice of the library that executes the tile kernels (its calls: `library`, `run` and
//! the kernel families' files).

use std::{fmt, str::FromStr};

use crate::error::KernelError;

/// The library that runs the CPU tile kernels. Chosen at run time; a backend not compiled into this
/// build reports [`KernelError::BackendUnavailable`] instead of running. Serialised by its name
/// ("faer", "openblas").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// faer, pure Rust, always available (the default).
    #[default]
    Faer,
    /// OpenBLAS (cargo feature `openblas`, system library `libopenblas`).
    OpenBlas,
}

impl Backend {
    /// Every backend hetla knows, compiled in or not.
    pub const ALL: [Backend; 2] = [Backend::Faer, Backend::OpenBlas];

    /// The backend's name, which is also the value `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Faer => "faer",
            Backend::OpenBlas => "openblas",
        }
    }

    /// Whether this build can run the backend.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Faer => true,
            Backend::OpenBlas => cfg!(feature = "openblas"),
        }
    }

    /// The backends this build can run.
    pub fn available() -> Vec<Backend> {
        Self::ALL.into_iter().filter(|b| b.is_available()).collect()
    }

    /// `Ok(self)` when compiled in, else the error that says how to enable it.
    pub fn ensure_available(self) -> Result<Self, KernelError> {
        if self.is_available() {
            Ok(self)
        } else {
            Err(KernelError::BackendUnavailable { name: self.name() })
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = KernelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| KernelError::UnknownBackend {
                given: s.to_string(),
            })
    }
}
