//! # hetla-kernels
//!
//! The tile operations of hetla's tiled algorithms, on column-major tiles of any shape (ragged edge
//! tiles included) in any of the four precisions ([`Scalar`]: `f32`, `f64`, [`c32`], [`c64`];
//! complex matrices are Hermitian): POTRF, TRSM, SYRK and GEMM for the Cholesky factorisation, and
//! the triangular solves and updates of the forward and backward substitutions; TRTRI, LAUUM and
//! their panel steps for the inverse of an SPD matrix from its factor; the panel, update and
//! interchanges of LU with partial pivoting (module `lu`, its interchanges given as LAPACK's ipiv);
//! the six tile operations of Householder QR (GEQRT, UNMQR, and the stacked TSQRT/TSMQR and
//! TTQRT/TTMQR, module `qr`). Each operation has an exact flop count ([`Op::flops`]) and takes an
//! explicit parallelism ([`Par`]): a kernel never decides on its own how many threads to use. Two
//! CPU backends are chosen at run time through
//! [`Backend`]: faer (pure Rust, always built) and OpenBLAS (cargo feature `openblas`).
//!
//! faer kernels run on the rayon pool they are called from; run them inside a dedicated pool's
//! `install` to control placement. OpenBLAS has its own threads, whose number is set from `Par`
//! before every call.
//!
//! GPU kernels (cuBLAS and cuSOLVER through cudarc, cargo feature `cuda`, on by default) live in
//! [`cuda`]: the CUDA libraries are loaded at run time, so the feature builds on a machine without
//! CUDA, where [`cuda::device_count`] is 0.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod aasen;
mod any;
mod backend;
mod compiled;
mod copy;
mod entry;
#[cfg(feature = "cuda")]
pub use cudarc;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_libs;
mod device_span;
pub mod elementwise;
mod erased;
mod error;
mod faer_impl;
mod inverse;
mod library;
mod lu;
mod op;
#[cfg(feature = "openblas")]
mod openblas_impl;
mod par;
mod pinned;
mod potri;
mod product;
mod qr;
mod run;
mod scalar;
mod split;
mod tensor;
#[cfg(test)]
mod test_support;

pub use backend::Backend;
pub use copy::copy_by_columns;
pub use device_span::DeviceSpan;
pub use erased::{AnyMat, AnyMut, AnyRef};
pub use error::KernelError;
pub use faer::Par;
pub use inverse::MAX_CONDITION as INVERSE_MAX_CONDITION;
pub use library::{
    bunch_kaufman_complex, bunch_kaufman_real, hermitian_eigen, hermitian_eigenvalues,
};
pub use lu::swap_rows;
pub use par::par_for;
pub use pinned::{HostRange, PinnedRanges};
pub use qr::reflector_ts;

pub use op::{
    Blas, CheckShapes, Codelet, CountFlops, CpuCall, GpuCall, KernelArgs, MatMul, Op, PanelFound,
    PanelSlot, RateSource, ReflectorSlot, Shape, Shapes, Slot, Solve, Stack, hessenberg_groups,
};
pub use scalar::{Precision, Scalar, UnknownPrecision, c32, c64, real_diagonal};
pub use tensor::TensorMath;
