use crate::Op;

/// What can go wrong inside a tile kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// POTRF met a pivot that is not positive (or not a number) at this column of the tile.
    #[error("the tile is not positive definite: non-positive pivot at tile column {index}")]
    NotPositiveDefinite {
        /// Column (0-based, inside the tile) whose pivot was not positive.
        index: usize,
    },
    /// A triangular tile with a zero on its diagonal has no inverse (LAPACK ?trtri's info > 0).
    #[error("the triangular tile is singular: zero on its diagonal at tile column {index}")]
    Singular {
        /// Column (0-based, inside the tile) of the zero.
        index: usize,
    },
    /// The operands handed to a kernel do not have the shapes the operation needs.
    #[error("{op} got operands of the wrong shape: {reason}")]
    Operands {
        /// The operation that was asked for.
        op: Op,
        /// Which operand was wrong and what it should have been.
        reason: String,
    },
    /// The backend was not compiled into this build.
    #[error("backend `{name}` is not available in this build: rebuild with `--features {name}`")]
    BackendUnavailable {
        /// The backend's name (also the cargo feature that enables it).
        name: &'static str,
    },
    /// The backend name is not one hetla knows.
    #[error("unknown backend `{given}`: expected `faer` or `openblas`")]
    UnknownBackend {
        /// What was given.
        given: String,
    },
    /// A dimension does not fit the backend's integer type (BLAS uses 32-bit ints).
    #[error("dimension {value} is too large for the {backend} backend (at most {max})")]
    TooLarge {
        /// The backend.
        backend: &'static str,
        /// The offending dimension or leading dimension.
        value: usize,
        /// The largest value the backend accepts.
        max: usize,
    },
    /// A GPU call failed (driver, cuBLAS or cuSOLVER error, out of device memory), or no GPU
    /// library could be loaded.
    #[error("GPU: {message}")]
    Gpu {
        /// What failed, with the library's status.
        message: String,
    },
}

/// `value` as the 32-bit integer BLAS, LAPACK and cuBLAS take, or [`KernelError::TooLarge`] naming
/// `backend`.
#[cfg(any(feature = "cuda", feature = "openblas"))]
pub(crate) fn blas_int(value: usize, backend: &'static str) -> Result<i32, KernelError> {
    i32::try_from(value).map_err(|_| KernelError::TooLarge {
        backend,
        value,
        max: i32::MAX as usize,
    })
}
