//! Matrices over MPI ranks, 2D block-cyclically, and their factorisations (feature `mpi`).
//!
//! A [`DistributedMatrix`] holds, on each rank, the tiles of the lower triangle (tile row >= tile
//! column) that its [`ProcessGrid`] gives it: tile (i, j) lives on rank `(i mod P) * Q + j mod Q`,
//! ScaLAPACK's layout with row-major rank order, so a matrix a user already distributes that way is
//! handed over tile for tile ([`DistributedMatrix::from_local_tiles`]). A matrix is built on every
//! rank at once, from an entry generator each rank evaluates for its own tiles
//! ([`DistributedMatrix::random_spd`]), from its local tiles, or scattered from rank 0
//! ([`DistributedMatrix::scatter`]); [`DistributedMatrix::gather`] brings it back to rank 0 (for
//! small cases and checks). Every function here is collective: all ranks of the communicator call
//! it with the same sizes and grid, and all return the same kind of result (checks that can fail on
//! one rank only are agreed on first).
//!
//! [`crate::Cholesky::factor_distributed`] factors such a matrix in place, each rank running the
//! tasks of its tiles (see its module, `cholesky/distributed.rs`: each family's distributed driver
//! lives in its folder). A general matrix holds every tile ([`DistributedMatrix::random`],
//! [`DistributedMatrix::from_local_general_tiles`]); [`crate::Lu::factor_distributed`] factors it
//! with partial pivoting on any grid and [`crate::Lu::solve_distributed`] solves with its factor
//! (`lu/distributed.rs`); [`crate::Qr::factor_distributed`] and
//! [`crate::Qr::least_squares_distributed`] factor a tall one on any grid (`qr/distributed.rs`).
//! All run on one engine (`distributed/exchange.rs`); what a run gives back, and the solve's
//! substitutions, are common (`distributed/run.rs`).
//!
//! The right-hand sides of a solve are a [`DistributedRhs`]: an `n x nrhs` matrix on the same grid,
//! every tile held (tile (i, c) on rank `(i mod P) * Q + c mod Q`, ScaLAPACK's layout of B in
//! `pdpotrs`): block rows over the process rows, and the columns of tiles, when there are several,
//! over the process columns. [`crate::Cholesky::solve_distributed`] overwrites them with the
//! solution.
//!
//! Every precision works alike ([`Wire`]: `f32`, `f64`, [`c32`](crate::c32), [`c64`](crate::c64);
//! complex matrices are Hermitian). Tiles travel as column-major messages of their real parts with
//! tag 0 (see `wire.rs`), from one rank to another in the order of [`DistributedMatrix::owned`]
//! (MPI keeps the order of messages between a pair).

mod bounds;
pub(crate) mod check;
pub(crate) mod exchange;
pub(crate) mod matrix;
pub(crate) mod run;
#[cfg(feature = "scalapack")]
pub mod scalapack;
pub(crate) mod wire;

pub use crate::lu::distributed::DistributedLu;
pub use crate::qr::distributed::DistributedLeastSquares;
pub use bounds::{faster_network, measure_network};
pub use check::PROBES;
pub use check::{least_squares_ratio, probed_qr_residual, probed_residual, solve_backward_error};
pub use hetla_factorizations::{GridError, ProcessGrid, Rank};
pub use matrix::{DistributedMatrix, DistributedRhs};
pub use run::{DistributedRun, DistributedSolve};
pub use wire::Wire;
