//! # hetla
//!
//! Dense factorisations and matrix products on a heterogeneous node: symmetric (Hermitian) positive
//! definite systems by tiled Cholesky, general systems by tiled LU with partial pivoting, least
//! squares by tiled Householder QR, and C <- alpha op(A) op(B) + beta C, in every precision (`f32`,
//! `f64`, [`c32`], [`c64`]), on a [`Platform`] of CPU core clusters and GPUs.
//!
//! - [`solve_spd`], [`Cholesky`] and [`Factor`]: factor and solve, and from a factor its
//!   log-determinant, condition estimate, L, and rank-k updates and downdates; [`solve_spd_batch`]:
//!   many small systems, one per core; any [`Matrix`] (faer's, and ndarray's or nalgebra's with
//!   their features), results in the caller's type; [`solve_spd_mixed`]: factor in single precision
//!   and refine to double;
//! - [`solve`], [`Lu`] and [`LuFactor`]: LAPACK's ?gesv and ?getrf as a task graph, with the solves
//!   of A, A^T and A^H, determinant and `rcond`; [`solve_mixed`] refines an f32 factor;
//! - [`lstsq`], [`Qr`] and [`QrFactor`]: tiled Householder QR (flat or binary reduction trees) and
//!   least squares; [`CholeskyQr`] for tall-skinny matrices, [`PivotedQr`], [`lstsq_rank`] (?gelsy)
//!   and [`lstsq_svd`] (?gelsd's rank and singular values) for rank-deficient ones;
//!   [`solve_triangular`]: LAPACK's ?trtrs;
//! - [`check`]: LAPACK's test ratios of every factorisation and solve;
//! - [`limits`]: what a run needs against what the machine has, refused before any work;
//!   [`huge_page_matrix`]: a matrix in transparent huge pages; [`KernelCalibration`]: the tile
//!   kernels timed into a platform's models, and how clusters of several cores scale;
//! - [`Gemm`]: the multi-GPU product with its allocation strategies and the bytes it moved against
//!   their lower bounds;
//! - [`Plan`]: a factorisation or product planned once (its task graph, tile and why, kernels,
//!   bytes and flops), run here and bounded ([`BoundReport`]); `hetla-lab` simulates the same plans
//!   on modelled machines;
//! - `distributed` (feature `mpi`): matrices over MPI ranks, 2D block-cyclic.
//!
//! A matrix is cut into b x b tiles, the tiled algorithm is a task graph of tile kernels
//! (`hetla-factorizations`), and the runtime (`hetla-runtime`) runs the graph on the platform's
//! workers (`hetla-clusters`), placing each task with a scheduler and performance models, with CPU
//! kernels from faer or OpenBLAS and GPU kernels from cuBLAS/cuSOLVER (`hetla-kernels`).
//!
//! ```
//! use faer::Mat;
//! let a = hetla::matgen::random_spd(100, 1);
//! let b = Mat::<f64>::ones(100, 2);
//! let x = hetla::solve_spd(a.as_ref(), b.as_ref())?;
//! assert!(hetla::check::solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), faer::Par::Seq) < 1e-13);
//! # Ok::<(), hetla::Error>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod batch;
mod calibrate;
pub mod check;
mod cholesky;
mod condition;
mod copy;
#[cfg(feature = "mpi")]
pub mod distributed;
mod error;
mod family;
pub mod gemm;
mod gmres;
mod interop;
mod ldlt;
pub mod limits;
mod lu;
pub mod matgen;
mod mixed;
mod pages;
mod plan;
mod qr;
mod run;
mod tiles;
mod triangular;
mod trtri;

pub use calibrate::{KernelCalibration, ScalingSample};
pub use cholesky::batch::solve_spd_batch;
pub use cholesky::{Cholesky, Factor, cholesky_rcond, solve_spd};
pub use error::{Error, Result};
pub use family::{Family, FamilyRun};
pub use gemm::{Gemm, GemmReport, Placement, Strategy};
pub use hetla_clusters::{ClusterSpec, Topology};
pub use hetla_factorizations::Tail;
pub use hetla_kernels::{Backend, Op, Par, Precision, Scalar, TensorMath, c32, c64};
pub use hetla_runtime::{
    GpuSelection, HostMemory, ModelStore, PageLocked, Platform, SchedulerKind, Trace,
};
pub use interop::{Matrix, MatrixMut};
pub use ldlt::{Inertia, Ldl, Ldlt, LdltFactor, solve_symmetric};
pub use lu::batch::LuPivots;
pub use lu::{Lu, LuFactor, Trans, solve, solve_mixed};
pub use mixed::{Refinable, Refinement, RefinementPath, solve_spd_mixed};
pub use pages::{PagedMat, huge_page_matrix};
pub use plan::{Algorithm, BoundReport, ClassCount, DistributedBounds, Outcome, Plan, TileChoice};
pub use qr::{
    CholeskyQr, CholeskyQrFactor, CholeskyQrPath, PivotedQr, Qr, QrFactor, QrTree, RankedSolution,
    SvdSolution, lstsq, lstsq_rank, lstsq_svd,
};
pub use tiles::Storage;
pub use tiles::device::DeviceMatrix;
pub use triangular::{Triangle, solve_triangular};
pub use trtri::TriangularInverse;

/// The cudarc hetla's GPU kernels are built on (feature `cuda`): a [`DeviceMatrix`] is made from
/// its buffers.
#[cfg(feature = "cuda")]
pub use hetla_kernels::cudarc;

/// The faer hetla is built on (its matrices are hetla's native ones): use `hetla::faer` to stay on
/// the same version.
pub use faer;
