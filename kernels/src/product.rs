//! The operands of a matrix product, as every GEMM path of the kernels passes them (the split
//! product, the sequential one, faer's and OpenBLAS's).

use faer::{Conj, MatRef};

/// The operands of C <- alpha op(A) op(B) + beta C, op conjugating an operand whose `Conj` says so
/// (A and B may be transposed views: with a conjugation, adjoints). With beta = 0 the old C is not
/// read (BLAS semantics).
#[derive(Clone, Copy)]
pub(crate) struct Product<'a, T> {
    pub(crate) a: (MatRef<'a, T>, Conj),
    pub(crate) b: (MatRef<'a, T>, Conj),
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
}

impl<'a, T> Product<'a, T> {
    /// alpha op(A) op(B) + beta C.
    pub(crate) fn new(
        a: (MatRef<'a, T>, Conj),
        b: (MatRef<'a, T>, Conj),
        alpha: f64,
        beta: f64,
    ) -> Self {
        Self { a, b, alpha, beta }
    }

    /// C - A B, neither conjugated.
    pub(crate) fn subtract(a: MatRef<'a, T>, b: MatRef<'a, T>) -> Self {
        Self::new((a, Conj::No), (b, Conj::No), -1.0, 1.0)
    }
}
