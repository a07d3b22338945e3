//! # hetla-factorizations
//!
//! Tiled algorithms written as task graphs, independent of how they are executed. A
//! [`TaskGraph`] is built in sequential order ("sequential task flow"): each task is a tile
//! operation of `hetla-kernels` and the tiles it reads or overwrites; dependencies are
//! inferred from those accesses (read after write, write after read, write after write),
//! so any execution that respects the edges computes what the sequential order computes.
//! [`Tiling`] cuts a matrix into b x b tiles with a ragged last row and column of tiles.
//! The builders give the tiled Cholesky factorisation ([`cholesky`]) and the forward and
//! backward substitutions of a solve ([`forward_substitution`], [`backward_substitution`]),
//! and the tiled general matrix product ([`matmul`]).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod builders;
mod distribution;
mod graph;
mod matmul;
mod tiling;

pub use builders::{
    FACTOR, RHS, SUMS, backward_substitution, cholesky, distributed_substitution,
    forward_substitution, sum_shape,
};
pub use distribution::{GridError, Message, ProcessGrid, Rank, bytes_sent, messages, task_rank};
pub use graph::{Access, MatrixId, Mode, Task, TaskGraph, TaskId, TileRef};
pub use hetla_kernels::{MatMul, Op};
pub use matmul::{MATMUL_A, MATMUL_B, MATMUL_C, MatMulTiling, matmul};
pub use tiling::{Tiling, TilingError};

/// Lets tables over a graph's tasks, or a run's workers or data handles (`Vec<T>`, `[T]`),
/// be indexed by the id newtype (a tuple struct over `usize`) directly.
#[doc(hidden)]
#[macro_export]
macro_rules! index_by {
    ($id:ty) => {
        impl<T> std::ops::Index<$id> for [T] {
            type Output = T;
            fn index(&self, id: $id) -> &T {
                &self[id.0]
            }
        }
        impl<T> std::ops::IndexMut<$id> for [T] {
            fn index_mut(&mut self, id: $id) -> &mut T {
                &mut self[id.0]
            }
        }
        impl<T> std::ops::Index<$id> for Vec<T> {
            type Output = T;
            fn index(&self, id: $id) -> &T {
                &self[id.0]
            }
        }
        impl<T> std::ops::IndexMut<$id> for Vec<T> {
            fn index_mut(&mut self, id: $id) -> &mut T {
                &mut self[id.0]
            }
        }
    };
}
