//! The error type of the public API.

use hetla_factorizations::TilingError;
use hetla_kernels::KernelError;

/// Everything that can go wrong in hetla, with what was wrong and what would be right.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The matrix is not (numerically) positive definite: the Cholesky pivot of this global column
    /// (0-based) was not positive.
    #[error(
        "the matrix is not positive definite: the pivot of column {column} (0-based) is not positive"
    )]
    NotPositiveDefinite {
        /// Global column whose pivot failed.
        column: usize,
    },
    /// LU met an exactly zero pivot (LAPACK ?getrf's info > 0): U is singular, the factorisation
    /// completed and can be inspected ([`LuFactor::singular`](crate::LuFactor::singular)), but no
    /// system can be solved with it.
    #[error(
        "the matrix is singular: the pivot of column {column} (0-based) is exactly zero, so U has no inverse (LAPACK ?getrf's info = {})",
        column + 1
    )]
    Singular {
        /// The first column (0-based) whose pivot is zero.
        column: usize,
    },
    /// A least-squares problem whose R is numerically singular: an exactly zero diagonal entry
    /// (LAPACK ?gels's info > 0), or a condition estimate beyond 1 / (max(m, n) eps), where a
    /// solution through R would be rounding error. A does not have full column rank.
    #[error(
        "A is rank deficient: R's diagonal entry at column {column} (0-based) is zero or negligible beside the others (R's condition number beyond 1 / (max(m, n) eps); LAPACK ?gels's info = {} when it is exactly zero); least squares through QR needs full column rank: lstsq_rank (QR with column pivoting) gives the minimum-norm solution and the rank",
        column + 1
    )]
    RankDeficient {
        /// The first column (0-based) whose diagonal entry of R is zero.
        column: usize,
    },
    /// A least-squares problem with fewer rows than columns (underdetermined).
    #[error(
        "least squares needs at least as many rows as columns: A is {rows}x{cols} (an underdetermined system has no unique least-squares solution)"
    )]
    Underdetermined {
        /// Rows of A.
        rows: usize,
        /// Columns of A.
        cols: usize,
    },
    /// An operand whose rows do not match the matrix it is used with.
    #[error("{what} has {rows} rows, expected {expected} (the rows of {of})")]
    RowsMismatch {
        /// Which argument.
        what: &'static str,
        /// Its rows.
        rows: usize,
        /// The rows it needs.
        expected: usize,
        /// The matrix whose rows those are.
        of: &'static str,
    },
    /// A square matrix was expected.
    #[error("{what} must be square, got {rows}x{cols}")]
    NotSquare {
        /// Which argument.
        what: &'static str,
        /// Its rows.
        rows: usize,
        /// Its columns.
        cols: usize,
    },
    /// The right-hand sides do not have as many rows as the matrix has columns.
    #[error("dimension mismatch: A is {n}x{n} but B has {rows} rows (expected {n})")]
    DimensionMismatch {
        /// Order of A.
        n: usize,
        /// Rows of B.
        rows: usize,
    },
    /// An entry that is infinite or NaN.
    #[error("{what} has a non-finite entry {value} at row {row}, column {col} (0-based)")]
    NonFinite {
        /// Which argument.
        what: &'static str,
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        col: usize,
        /// The entry itself.
        value: f64,
    },
    /// A determinant that is no normal `f64` (it overflows or underflows): its logarithm is exact.
    #[error(
        "det A = exp({log_det}) is out of the range of f64 (about exp(-708) to exp(709)): use log_det (log_abs_det of an LU factor)"
    )]
    DeterminantOutOfRange {
        /// ln det A.
        log_det: f64,
    },
    /// An iterative solver that did not converge: eigenvalues (a fallback of the symmetric
    /// indefinite factor's inertia) or singular values.
    #[error("the {what} did not converge")]
    NoConvergence {
        /// What was sought, and of which matrix ("eigenvalues of T").
        what: &'static str,
    },
    /// A downdate A - W W^H that would not be positive definite; the factor was left unchanged.
    #[error(
        "the downdate by column {column} of W leaves A - W W^H not positive definite (||L^-1 w||_2 = {norm} >= 1); the factor is unchanged"
    )]
    DowndateNotPositiveDefinite {
        /// The column of W (0-based) at which definiteness is lost.
        column: usize,
        /// ||L^-1 w||_2 of that column against the factor before it (1 or more: indefinite).
        norm: f64,
    },
    /// A tile size of zero.
    #[error("tile size must be at least 1, got 0")]
    ZeroTileSize,
    /// Column-major storage described inconsistently (slice too short, leading dimension smaller
    /// than the number of rows, or a view whose rows are not contiguous).
    #[error("invalid storage for {what}: {reason}")]
    Layout {
        /// Which argument.
        what: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// An option of the configuration is out of range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option.
        option: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// An error from a tile kernel (backend not built, operands rejected...).
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A task panicked inside its kernel; the run stopped cleanly.
    #[error("task {task} ({op}) panicked: {message}")]
    TaskPanicked {
        /// The task, in its graph.
        task: hetla_factorizations::TaskId,
        /// Its operation.
        op: String,
        /// The panic message.
        message: String,
    },
    /// An error in describing a tiling.
    #[error(transparent)]
    Tiling(TilingError),
    /// A lower bound could not be computed.
    #[error(transparent)]
    Bounds(#[from] hetla_bounds::BoundsError),
    /// A run that does not fit this machine (memory, task count), found before it starts.
    #[error("{what} does not fit this machine: {reason}")]
    TooLarge {
        /// What was asked for ("a 1000000000 x 1000000000 matrix").
        what: String,
        /// What it needs against what there is.
        reason: String,
    },
    /// The runtime's error, kept whole: a platform or its devices that cannot be built, performance
    /// models or files that cannot be read or written, a memory node too small for a task's tiles,
    /// no worker for a task, a plan that does not fit, a scheduler that stalled.
    #[error(transparent)]
    Runtime(#[from] hetla_runtime::Error),
    /// Threads could not be started.
    #[error("cannot start {threads} threads: {reason}")]
    Spawn {
        /// How many were asked for.
        threads: usize,
        /// What the system said.
        reason: String,
    },
    /// A process grid that is not PxQ with P, Q >= 1.
    #[error(transparent)]
    Grid(#[from] hetla_factorizations::GridError),
    /// A distributed operation found what the ranks exchanged inconsistent.
    #[error("rank {rank}: {reason}")]
    Distributed {
        /// The rank that found it.
        rank: usize,
        /// What it found.
        reason: String,
    },
    /// Copying the result back from the devices to host memory failed after the tasks ran (the
    /// matrix in host memory may be incomplete).
    #[error("the write-back of the result from the devices failed: {0}")]
    WriteBack(#[source] KernelError),
}

/// A cluster spec or topology error, as the runtime reports it (it builds the platforms).
impl From<hetla_clusters::ClusterError> for Error {
    fn from(e: hetla_clusters::ClusterError) -> Self {
        Error::Runtime(e.into())
    }
}

impl From<TilingError> for Error {
    fn from(e: TilingError) -> Self {
        match e {
            TilingError::ZeroTileSize => Error::ZeroTileSize,
            other => Error::Tiling(other),
        }
    }
}

impl Error {
    /// A short name of the kind of error ("invalid_option", "too_large"), for scripts (the CLI's
    /// `--json` errors).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::NotPositiveDefinite { .. } => "not_positive_definite",
            Error::Singular { .. } => "singular",
            Error::NotSquare { .. } => "not_square",
            Error::RankDeficient { .. } => "rank_deficient",
            Error::Underdetermined { .. } => "underdetermined",
            Error::RowsMismatch { .. } => "rows_mismatch",
            Error::DimensionMismatch { .. } => "dimension_mismatch",
            Error::NonFinite { .. } => "non_finite",
            Error::ZeroTileSize => "zero_tile_size",
            Error::DeterminantOutOfRange { .. } => "determinant_out_of_range",
            Error::DowndateNotPositiveDefinite { .. } => "downdate_not_positive_definite",
            Error::NoConvergence { .. } => "no_convergence",
            Error::Layout { .. } => "layout",
            Error::InvalidOption { .. } => "invalid_option",
            Error::Kernel(_) => "kernel",
            Error::TaskPanicked { .. } => "task_panicked",
            Error::Tiling(_) => "tiling",
            Error::Bounds(_) => "bounds",
            Error::TooLarge { .. } => "too_large",
            Error::Runtime(e) => e.kind(),
            Error::WriteBack(_) => "write_back",
            Error::Spawn { .. } => "spawn",
            Error::Grid(_) => "grid",
            Error::Distributed { .. } => "distributed",
        }
    }
}

/// Result with hetla's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
