//! Stage 1: Aasen's factorisation in blocks, Q A Q^T = L T L^H with T Hermitian block tridiagonal
//! (blocks of the tile's order b), in the communication-avoiding form of Ballard et al. (2014) that
//! PLASMA and SLATE use. Block column 0 of L is the identity; for k >= 1, L's block column k is the
//! unit lower trapezoidal factor of an LU with partial pivoting, whose interchanges are applied to
//! the rows of L's earlier columns and, symmetrically, to the rows and columns of the matrix not
//! yet reached.
//!
//! For each block column k (H = T L^H, block upper Hessenberg, is recomputed per column):
//!
//! 1. H(m, k) = T(m, m-1) L(k, m-1)^H + T(m, m) L(k, m)^H + T(m+1, m)^H L(k, m+1)^H, 1 <= m < k;
//! 2. T(k, k) = L(k, k)^-1 [A(k, k) - sum_m L(k, m) H(m, k) - L(k, k) T(k, k-1) L(k, k-1)^H] L(k,
//!    k)^-H (the two-sided solve of ?hegst), made exactly Hermitian;
//! 3. H(k, k) = T(k, k-1) L(k, k-1)^H + T(k, k) L(k, k)^H;
//! 4. W = A(k+1:, k) - sum_{1 <= m <= k} L(k+1:, m) H(m, k); P W = L(k+1:, k+1) U (LU with partial
//!    pivoting), T(k+1, k) = U L(k, k)^-H, and P applied as above.
//!
//! The matrix itself is only read, through the permutation (left-looking): the flops are n^3/3
//! (Cholesky's), in products, as the updates of a block column are the products of step 4. The
//! steps are the tasks of [`ldlt`](hetla_factorizations::ldlt)'s graph, run by the family's work
//! (`work.rs`) on the platform's clusters; this file holds what they leave ([`Aasen`]), its solves,
//! and the pieces the tasks share.
//!
//! Storage (as PLASMA's): one n x n matrix; L's block column k >= 1 goes into block column k - 1,
//! from block row k down (L(k, k)'s unit lower triangle below the diagonal of block (k, k-1), whose
//! upper triangle holds T(k, k-1)); T(k, k) in block (k, k), H's blocks above the diagonal.

use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_unit_lower_triangular_in_place, solve_unit_upper_triangular_in_place,
};
use faer::reborrow::*;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use hetla_kernels::{Backend, Scalar, swap_rows};

use crate::Result;

/// The blocks of order `n` in tiles of `b`: block k starts at `k * b` and has `min(b, n - k b)`
/// rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Blocks {
    pub n: usize,
    pub b: usize,
}

impl Blocks {
    pub fn count(&self) -> usize {
        self.n.div_ceil(self.b)
    }
    pub fn start(&self, k: usize) -> usize {
        k * self.b
    }
    pub fn size(&self, k: usize) -> usize {
        self.b.min(self.n - k * self.b)
    }
}

/// out(r, c) = A(rows[r], cols[c]): a block of the Hermitian matrix whose lower triangle is `a`
/// (its diagonal's imaginary parts taken as zero), rows and columns permuted.
///
/// Once the panels have interchanged rows, `rows` and `cols` are scattered over A and a read in the
/// block's order is a cache miss and often a TLB miss. So the indices are sorted first, and A is
/// read column by column in ascending rows: the entries on and below the diagonal, A(i, j) with
/// i >= j, down column j of A (the sorted rows from the first i >= j); the ones above it, conj(A(j,
/// i)) with i < j, down column i of A (the sorted columns from the first j > i).
pub(crate) fn gather<T: Scalar>(
    a: MatRef<'_, T>,
    rows: &[usize],
    cols: &[usize],
    mut out: MatMut<'_, T>,
) {
    check_gather(a, (rows, cols), out.as_ref());
    gather_sorted(a, &by_index(rows), &by_index(cols), out.rb_mut());
}

/// Panics unless every index is within A and `out` has their shape (a broken caller).
fn check_gather<T: Scalar>(
    a: MatRef<'_, T>,
    (rows, cols): (&[usize], &[usize]),
    out: MatRef<'_, T>,
) {
    let n = a.nrows().min(a.ncols());
    assert!(
        rows.iter().chain(cols).all(|&i| i < n)
            && (out.nrows(), out.ncols()) == (rows.len(), cols.len()),
        "gather: indices within A (order {n}) and an output of their shape"
    );
}

/// Each index with its position, ascending by index.
fn by_index(indices: &[usize]) -> Vec<(usize, usize)> {
    let mut s: Vec<(usize, usize)> = indices.iter().copied().zip(0..).collect();
    s.sort_unstable();
    s
}

/// [`gather`] of the (index, position) pairs `rows` and `cols`, ascending by index (checked by the
/// caller against A's order and `out`'s shape).
fn gather_sorted<T: Scalar>(
    a: MatRef<'_, T>,
    rows: &[(usize, usize)],
    cols: &[(usize, usize)],
    mut out: MatMut<'_, T>,
) {
    let (base, rs, cs) = (a.as_ptr(), a.row_stride(), a.col_stride());
    // SAFETY: every index is below A's order (asserted above): the entry lies within `a`.
    let at = |i: usize, j: usize| unsafe { *base.offset(i as isize * rs + j as isize * cs) };
    for &(j, c) in cols {
        let from = rows.partition_point(|&(i, _)| i < j);
        for &(i, r) in &rows[from..] {
            out[(r, c)] = at(i, j);
        }
        if let Some(&(i, r)) = rows.get(from).filter(|&&(i, _)| i == j) {
            out[(r, c)] = T::from_f64(at(i, i).to_c64().re);
        }
    }
    for &(i, r) in rows {
        let from = cols.partition_point(|&(j, _)| j <= i);
        for &(j, c) in &cols[from..] {
            out[(r, c)] = conj(at(j, i));
        }
    }
}

/// [`gather`] on `par`'s threads, each a band of the columns (a block column's gather is one task
/// of the block-column graph, on its step's critical path: about 130 M entries/s on one Zen 4 core
/// at order 8192).
pub(crate) fn gather_par<T: Scalar>(
    a: MatRef<'_, T>,
    rows: &[usize],
    cols: &[usize],
    out: MatMut<'_, T>,
    par: Par,
) {
    use rayon::prelude::*;
    check_gather(a, (rows, cols), out.as_ref());
    let rows = by_index(rows);
    let width = cols.len().div_ceil(par.degree().max(1)).max(1);
    let mut bands = Vec::new();
    let mut rest = out;
    for c in cols.chunks(width) {
        let (band, right) = rest.split_at_col_mut(c.len());
        bands.push((c, band));
        rest = right;
    }
    (bands.into_par_iter()).for_each(|(c, band)| gather_sorted(a, &rows, &by_index(c), band));
}

/// The upper trapezoid of `m` (on and above its diagonal), zeros below.
pub(crate) fn upper<T: Scalar>(m: MatRef<'_, T>) -> Mat<T> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
        if i <= j { m[(i, j)] } else { T::from_f64(0.0) }
    })
}

/// The unit lower triangle of `m` (its diagonal taken as ones, its upper triangle as zeros).
pub(crate) fn unit_lower<T: Scalar>(m: MatRef<'_, T>) -> Mat<T> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => m[(i, j)],
        std::cmp::Ordering::Equal => T::from_f64(1.0),
        std::cmp::Ordering::Less => T::from_f64(0.0),
    })
}

/// dst <- dst + alpha lhs rhs (lhs, rhs possibly adjoint views).
pub(crate) fn add_product<T: Scalar>(
    dst: MatMut<'_, T>,
    lhs: MatRef<'_, impl faer::traits::Conjugate<Canonical = T>>,
    rhs: MatRef<'_, impl faer::traits::Conjugate<Canonical = T>>,
    alpha: f64,
    par: Par,
) {
    matmul(dst, Accum::Add, lhs, rhs, T::from_f64(alpha), par);
}

/// Q A Q^T = L T L^H (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Aasen<T: Scalar> {
    pub blocks: Blocks,
    /// The run's matrix (column-major, n x n) in the layout of
    /// [`ldlt`](hetla_factorizations::ldlt)'s graph: L(i, j + 1) in block (i, j) below the diagonal
    /// (L(k + 1, k + 1) below the diagonal of block (k + 1, k)); T's blocks and the workspace
    /// elsewhere, which only the factorisation reads. Once T's blocks are copied into `diag` and
    /// `sub`, the diagonal blocks and the blocks above them hold A's lower triangle, transposed
    /// ([`Aasen::input`]). A buffer in huge pages where the system offers them (on 2 cores at order
    /// 2048 in f64, H's blocks ran 1.4x faster than on 4 KiB pages, whose TLB entries their rows of
    /// L, n apart, exhaust): fresh zeroed pages the tasks touch first, or the buffer of a factor
    /// dropped earlier on the same platform (`KeptFactors`).
    pub a: crate::pages::PageBuffer<T>,
    /// The column stride of `a` ([`padded_stride`](crate::pages::padded_stride)).
    pub stride: usize,
    /// T(k, k), Hermitian.
    pub diag: Vec<Mat<T>>,
    /// T(k+1, k), upper triangular (upper trapezoidal for a narrower last block).
    pub sub: Vec<Mat<T>>,
    /// The interchanges, in the order they were applied: row i swapped with `swaps[i] >= i` (rows
    /// of the first block are never swapped: `swaps[i] = i` there).
    pub swaps: Vec<usize>,
}

impl<T: Scalar> Aasen<T> {
    /// The factorisation a run of the plan left in `a` (see `Aasen::a`), with each panel's
    /// interchanges (local to the rows below its block, as the panel's ipiv); `input` is the
    /// factored matrix (its lower triangle), kept in `a`'s dead workspace for [`Aasen::input`].
    pub fn from_run(
        mut a: crate::pages::PageBuffer<T>,
        stride: usize,
        blocks: Blocks,
        pivots: &[Vec<usize>],
        input: MatRef<'_, T>,
    ) -> Self {
        let count = blocks.count();
        let whole =
            MatRef::from_column_major_slice_with_stride(a.as_slice(), blocks.n, blocks.n, stride);
        let block = |i: usize, j: usize| {
            whole.submatrix(
                blocks.start(i),
                blocks.start(j),
                blocks.size(i),
                blocks.size(j),
            )
        };
        let diag = (0..count).map(|k| block(k, k).to_owned()).collect();
        let sub = (0..count.saturating_sub(1))
            .map(|k| upper(block(k + 1, k)))
            .collect();
        // A(i, j), i >= j, into entry (j, i): the diagonal blocks (T(k, k) copied out above) and
        // the blocks above them (H's, dead since the run ended), the pages of which the run has
        // touched. A copy into fresh memory cost more than the copy itself (at order 8192 in f64 on
        // 2 Zen 4 cores, 0.30-0.35 s into small pages and 0.6-0.85 s into huge ones, where the run
        // took 3.5 s): the guest's first touch of memory is slow.
        let held = MatMut::from_column_major_slice_with_stride_mut(
            a.as_mut_slice(),
            blocks.n,
            blocks.n,
            stride,
        );
        crate::copy::copy_par(input, held.transpose_mut(), |j| j);
        let mut swaps: Vec<usize> = (0..blocks.n).collect();
        for (k, piv) in pivots.iter().enumerate() {
            let below = blocks.start(k + 1);
            for (i, &p) in piv.iter().enumerate() {
                swaps[below + i] = below + p;
            }
        }
        Self {
            blocks,
            a,
            stride,
            diag,
            sub,
            swaps,
        }
    }

    /// The factored matrix A: its lower triangle (a row-major view of the transposed copy
    /// [`Aasen::from_run`] kept; the view's upper triangle is the factor's L and T, not A's).
    pub fn input(&self) -> MatRef<'_, T> {
        let n = self.blocks.n;
        MatRef::from_column_major_slice_with_stride(self.a.as_slice(), n, n, self.stride)
            .transpose()
    }

    /// L(j:, j) for j >= 1: L's block column j from its diagonal block down (stored in column j -
    /// 1).
    fn column(&self, j: usize) -> MatRef<'_, T> {
        let b = &self.blocks;
        let start = b.start(j);
        MatRef::from_column_major_slice_with_stride(self.a.as_slice(), b.n, b.n, self.stride)
            .submatrix(start, b.start(j - 1), b.n - start, b.size(j))
    }

    /// X <- Q X (the interchanges in order).
    pub fn permute(&self, x: MatMut<'_, T>) {
        swap_rows(x, &self.swaps);
    }

    /// X <- Q^T X (the interchanges in reverse order).
    pub fn unpermute(&self, mut x: MatMut<'_, T>) {
        for i in (0..self.swaps.len()).rev() {
            let p = self.swaps[i];
            if p != i {
                for c in 0..x.ncols() {
                    let t = x[(i, c)];
                    x[(i, c)] = x[(p, c)];
                    x[(p, c)] = t;
                }
            }
        }
    }

    /// X <- L^-1 X.
    pub fn solve_l(&self, mut x: MatMut<'_, T>, par: Par) {
        let b = &self.blocks;
        for j in 1..b.count() {
            let col = self.column(j);
            let (diagonal, under) = col.split_at_row(b.size(j));
            let (_, mut rest) = x.rb_mut().split_at_row_mut(b.start(j));
            let (mut xj, below) = rest.rb_mut().split_at_row_mut(b.size(j));
            solve_unit_lower_triangular_in_place(diagonal, xj.rb_mut(), par);
            add_product(below, under, xj.rb(), -1.0, par);
        }
    }

    /// X <- L^-H X.
    pub fn solve_lh(&self, mut x: MatMut<'_, T>, par: Par) {
        let b = &self.blocks;
        for j in (1..b.count()).rev() {
            let col = self.column(j);
            let (diagonal, under) = col.split_at_row(b.size(j));
            let (_, mut rest) = x.rb_mut().split_at_row_mut(b.start(j));
            let (mut xj, below) = rest.rb_mut().split_at_row_mut(b.size(j));
            add_product(xj.rb_mut(), under.adjoint(), below.rb(), -1.0, par);
            solve_unit_upper_triangular_in_place(diagonal.adjoint(), xj.rb_mut(), par);
        }
    }

    /// L, explicitly (n x n, unit lower triangular).
    pub fn l(&self) -> Mat<T> {
        let b = &self.blocks;
        let mut l = Mat::<T>::identity(b.n, b.n);
        for j in 1..b.count() {
            let col = self.column(j);
            for c in 0..b.size(j) {
                for r in c + 1..col.nrows() {
                    l[(b.start(j) + r, b.start(j) + c)] = col[(r, c)];
                }
            }
        }
        l
    }
}

/// M <- (M + M^H) / 2: exactly Hermitian, with a real diagonal.
pub(crate) fn hermitian_part<T: Scalar>(mut m: MatMut<'_, T>) {
    let half = T::from_f64(0.5);
    for j in 0..m.ncols() {
        for i in j..m.nrows() {
            let x = (m[(i, j)] + conj(m[(j, i)])) * half;
            m[(i, j)] = x;
            m[(j, i)] = conj(x);
        }
    }
}

pub(crate) fn conj<T: Scalar>(x: T) -> T {
    faer::traits::ComplexField::conj_impl(&x)
}

/// LU with partial pivoting of `w` (m x b) in place, any m: the local interchanges (min(m, b) of
/// them). A narrower-than-wide panel (the last block's, m < b) factors its left m x m block and
/// applies the interchanges and L^-1 to the rest.
pub(crate) fn lu_any<T: Scalar>(
    backend: Backend,
    mut w: MatMut<'_, T>,
    par: Par,
) -> Result<Vec<usize>> {
    let (m, b) = (w.nrows(), w.ncols());
    let k = m.min(b);
    let mut piv = vec![0; k];
    if k == 0 {
        return Ok(piv);
    }
    backend.lu_panel(w.rb_mut().subcols_mut(0, k), &mut piv, par)?;
    if b > k {
        let (left, mut right) = w.rb_mut().split_at_col_mut(k);
        swap_rows(right.rb_mut(), &piv);
        solve_unit_lower_triangular_in_place(left.rb().submatrix(0, 0, k, k), right, par);
    }
    Ok(piv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_kernels::c64;

    /// The gather is the entry-by-entry definition: rows and columns scattered, repeated between
    /// them, on both sides of the diagonal and on it, conjugated above it, the diagonal made real.
    #[test]
    fn a_gather_is_the_permuted_hermitian_block() {
        let n = 37;
        let a = Mat::from_fn(n, n, |i, j| c64::new((i * n + j) as f64, 1.0 + i as f64));
        let rows = [36, 0, 5, 17, 4, 30, 12, 8, 9];
        let cols = [5, 33, 0, 17, 2, 36];
        let mut out = Mat::<c64>::zeros(rows.len(), cols.len());
        gather(a.as_ref(), &rows, &cols, out.as_mut());
        for (r, &i) in rows.iter().enumerate() {
            for (c, &j) in cols.iter().enumerate() {
                let expected = match i.cmp(&j) {
                    std::cmp::Ordering::Greater => a[(i, j)],
                    std::cmp::Ordering::Less => a[(j, i)].conj(),
                    std::cmp::Ordering::Equal => c64::new(a[(i, i)].re, 0.0),
                };
                assert_eq!(out[(r, c)], expected, "entry ({r}, {c}): A({i}, {j})");
            }
        }
    }
}
