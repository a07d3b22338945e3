//! The LU of a small matrix on the calling core (a matrix of a batch, or one alone whose min(m, n)
//! is at most [`SMALL_LU`]): faer's recursive LU with LAPACK's interchanges and zero-pivot rule.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting;
use faer::{MatMut, Par};
use hetla_kernels::{Backend, KernelError, Scalar};

/// The largest min(m, n) [`crate::Lu::factor_in_place`] factors on the calling core by
/// [`small_lu`], as a batch factors each matrix (above it, the panel kernel on every core).
pub(crate) const SMALL_LU: usize = 64;

/// LU with partial pivoting of the m x k `a` (k <= m; column-major is fastest) on the calling core:
/// its interchanges in `ipiv` (LAPACK's) and the first column with an exactly zero pivot. With the
/// faer backend, faer's recursive LU (blocks of 16 columns, 2.2x the panel kernel's rate on 64 x
/// 64: 31 against 70 us) chooses LAPACK's pivots (the first largest |re| + |im| of the column); it
/// divides by a zero pivot where LAPACK leaves the column as it is, so a matrix with one is
/// factored again from a copy by the backend's panel kernel, which follows LAPACK there. Another
/// backend keeps the panel kernel (its products on that backend's GEMM).
pub(crate) fn small_lu<T: Scalar>(
    backend: Backend,
    mut a: MatMut<'_, T>,
    ipiv: &mut [usize],
) -> Result<Option<usize>, KernelError> {
    if backend != Backend::Faer {
        return backend.lu_panel(a, ipiv, Par::Seq);
    }
    let (m, k) = (a.nrows(), a.ncols());
    let copy = a.to_owned();
    let (mut perm, mut perm_inv) = (vec![0usize; m], vec![0usize; m]);
    let mut buffer = MemBuffer::new(partial_pivoting::factor::lu_in_place_scratch::<usize, T>(
        m,
        k,
        Par::Seq,
        Default::default(),
    ));
    partial_pivoting::factor::lu_in_place(
        a.as_mut(),
        &mut perm,
        &mut perm_inv,
        Par::Seq,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    let zero = T::from_f64(0.0);
    if (0..k).any(|j| a[(j, j)] == zero) {
        a.copy_from(copy.as_ref());
        return backend.lu_panel(a, ipiv, Par::Seq);
    }
    // The interchanges that make faer's permutation (row i of P A is row perm[i] of A): step j
    // brings row perm[j] from where the earlier steps left it.
    let (mut at, mut row_at): (Vec<usize>, Vec<usize>) = ((0..m).collect(), (0..m).collect());
    for (j, pivot) in ipiv.iter_mut().enumerate().take(k) {
        let p = at[perm[j]];
        *pivot = p;
        row_at.swap(j, p);
        at[row_at[j]] = j;
        at[row_at[p]] = p;
    }
    Ok(None)
}
