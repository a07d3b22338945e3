//! # hetla-factorizations
//!
//! Tiled algorithms written as task graphs, independent of how they are executed. A [`TaskGraph`]
//! is built in sequential order ("sequential task flow"): each task is a tile operation of
//! `hetla-kernels` and the tiles it reads or overwrites; dependencies are inferred from those
//! accesses (read after write, write after read, write after write), so any execution that respects
//! the edges computes what the sequential order computes. [`Tiling`] cuts a matrix into b x b tiles
//! with a ragged last row and column of tiles. The builders give the tiled Cholesky factorisation
//! ([`cholesky`]), the inverse from its factor ([`cholesky_inverse`]), the forward and backward
//! substitutions of a solve ([`forward_substitution`], [`backward_substitution`]), LU with partial
//! pivoting over block columns ([`lu`]) and over tiles spread on process rows ([`lu_tiles`]),
//! Householder QR with a flat or binary reduction tree and the application of Q^H to right-hand
//! sides ([`qr`], [`qr_with_rhs`]), Aasen's symmetric indefinite factorisation ([`ldlt`]), and the
//! tiled general matrix product ([`matmul`]). [`ProcessGrid`] distributes tiles 2D block-cyclic
//! over MPI ranks.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod builders;
mod distribution;
mod graph;
mod index;
mod ldlt;
mod lu;
mod matmul;
mod qr;
mod split;
mod tiling;

pub use builders::{
    FACTOR, RHS, SUMS, Substitution, backward_substitution, cholesky, cholesky_inverse,
    cholesky_inverting_panels, distributed_substitution, forward_substitution, lu, lu_shape,
    lu_step, sum_shape, triangular_inverse,
};
pub use distribution::{GridError, Message, ProcessGrid, Rank, bytes_sent, messages, task_rank};
pub use graph::{Access, MatrixId, Mode, Task, TaskGraph, TaskId, TileRef};
pub use hetla_kernels::{MatMul, Op};
pub use ldlt::{
    STEPS, ldlt, ldlt_columns, ldlt_columns_shapes, ldlt_columns_step, ldlt_shapes, ldlt_step,
};
pub use lu::{EXCHANGE, LuSwapRole, PIVOTS, lu_tiles, lu_tiles_shapes};
pub use matmul::{MATMUL_A, MATMUL_B, MATMUL_C, MatMulTiling, matmul};
pub use qr::{QrTree, qr, qr_apply_rhs, qr_columns, qr_columns_shape, qr_t_slot, qr_with_rhs};
pub use split::{GridSplit, RankShare, Receipt, SplitError};
pub use tiling::{Tail, Tiling, TilingError};
