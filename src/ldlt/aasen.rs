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
//! The matrix itself is only read and permuted (left-looking): the flops are n^3/3 (Cholesky's), in
//! products, as the updates of a block column are the products of step 4.
//!
//! Storage (as PLASMA's): one n x n matrix holding the Hermitian input in both triangles; L's block
//! column k >= 1 goes into block column k - 1, from block row k down (L(k, k)'s unit lower triangle
//! below the diagonal of block (k, k-1), whose upper triangle keeps the U of its panel).

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

/// Q A Q^T = L T L^H (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Aasen<T> {
    pub blocks: Blocks,
    /// L in block columns shifted left by one (the upper triangles of its diagonal blocks hold
    /// their panels' U, which nothing reads after the factorisation).
    pub a: Mat<T>,
    /// T(k, k), Hermitian.
    pub diag: Vec<Mat<T>>,
    /// T(k+1, k), upper triangular (upper trapezoidal for a narrower last block).
    pub sub: Vec<Mat<T>>,
    /// The interchanges, in the order they were applied: row i swapped with `swaps[i] >= i` (rows
    /// of the first block are never swapped: `swaps[i] = i` there).
    pub swaps: Vec<usize>,
}

/// L(k, m) for 1 <= m <= k: block row k of L's block column m, stored in block column m - 1 of `a`.
fn l_block<T>(a: MatRef<'_, T>, blocks: Blocks, k: usize, m: usize) -> MatRef<'_, T> {
    a.submatrix(
        blocks.start(k),
        blocks.start(m - 1),
        blocks.size(k),
        blocks.size(m),
    )
}

/// Rows `from..` of the block of columns `cols` (start, width) of the Hermitian `a` with its rows
/// and columns permuted by `perm`: entry (r, c) is A(perm[r], perm[c]); the columns in parallel.
fn gather<T: Scalar>(
    a: MatRef<'_, T>,
    perm: &[usize],
    from: usize,
    (first, width): (usize, usize),
) -> Mat<T> {
    use rayon::prelude::*;
    let rows = a.nrows() - from;
    let mut out = Mat::<T>::zeros(rows, width);
    out.as_mut()
        .par_col_chunks_mut(1)
        .enumerate()
        .for_each(|(c, mut column)| {
            let source = a.col(perm[first + c]);
            for (r, &i) in perm[from..].iter().enumerate() {
                column[(r, 0)] = source[i];
            }
        });
    out
}

/// H(m, k) = T(m, m-1) L(k, m-1)^H + T(m, m) L(k, m)^H + T(m+1, m)^H L(k, m+1)^H for 1 <= m < k,
/// into rows (m - 1) b of `h`, the blocks in parallel (each on one thread).
fn hessenberg_column<T: Scalar>(
    l: MatRef<'_, T>,
    blocks: Blocks,
    k: usize,
    (diag, sub): (&[Mat<T>], &[Mat<T>]),
    lkk: MatRef<'_, T>,
    h: MatMut<'_, T>,
) {
    use rayon::prelude::*;
    if k < 2 {
        return;
    }
    let bk = blocks.size(k);
    let mut pieces = Vec::with_capacity(k - 1);
    let mut rest = h.submatrix_mut(0, 0, blocks.start(k - 1), bk);
    for m in 1..k {
        let (piece, tail) = rest.split_at_row_mut(blocks.size(m));
        pieces.push((m, piece));
        rest = tail;
    }
    pieces.into_par_iter().for_each(|(m, mut hm)| {
        let seq = Par::Seq;
        hm.fill(T::from_f64(0.0));
        let row = |j: usize| l_block(l, blocks, k, j);
        add_product(hm.rb_mut(), diag[m].as_ref(), row(m).adjoint(), 1.0, seq);
        if m >= 2 {
            add_product(
                hm.rb_mut(),
                sub[m - 1].as_ref(),
                row(m - 1).adjoint(),
                1.0,
                seq,
            );
        }
        let next = if m + 1 == k { lkk } else { row(m + 1) };
        add_product(hm, sub[m].adjoint(), next.adjoint(), 1.0, seq);
    });
}

/// [`swap_rows`] on column chunks of `m` in parallel.
fn swap_rows_in_parallel<T: Scalar>(m: MatMut<'_, T>, piv: &[usize]) {
    use rayon::prelude::*;
    const CHUNK: usize = 64;
    m.par_col_chunks_mut(CHUNK)
        .for_each(|chunk| swap_rows(chunk, piv));
}

/// The unit lower triangle of `m` (its diagonal taken as ones, its upper triangle as zeros).
fn unit_lower<T: Scalar>(m: MatRef<'_, T>) -> Mat<T> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => m[(i, j)],
        std::cmp::Ordering::Equal => T::from_f64(1.0),
        std::cmp::Ordering::Less => T::from_f64(0.0),
    })
}

/// dst <- dst + alpha lhs rhs (lhs, rhs possibly adjoint views).
fn add_product<T: Scalar>(
    dst: MatMut<'_, T>,
    lhs: MatRef<'_, impl faer::traits::Conjugate<Canonical = T>>,
    rhs: MatRef<'_, impl faer::traits::Conjugate<Canonical = T>>,
    alpha: f64,
    par: Par,
) {
    matmul(dst, Accum::Add, lhs, rhs, T::from_f64(alpha), par);
}

impl<T: Scalar> Aasen<T> {
    /// Factors the Hermitian `a` (both triangles) in blocks of `b` (1 <= b), LU panels on
    /// `backend`, products on `par`. `a` is only read: the interchanges are kept as a permutation
    /// through which each block column is gathered when its step comes.
    pub fn factor(a: MatRef<'_, T>, b: usize, backend: Backend, par: Par) -> Result<Self> {
        let n = a.nrows();
        let blocks = Blocks { n, b };
        let count = blocks.count();
        let (start, size) = (|k| blocks.start(k), |k| blocks.size(k));
        let mut l = Mat::<T>::zeros(n, n.saturating_sub(size(count.saturating_sub(1))));
        let mut diag: Vec<Mat<T>> = Vec::with_capacity(count);
        let mut sub: Vec<Mat<T>> = Vec::with_capacity(count.saturating_sub(1));
        let mut swaps: Vec<usize> = (0..n).collect();
        // Row i of the permuted matrix is row `perm[i]` of A.
        let mut perm: Vec<usize> = (0..n).collect();
        // H(m, k) for the current k, 1 <= m <= k, stacked: H(m, k) in rows (m - 1) b.
        let mut h = Mat::<T>::zeros(n, b.min(n));
        for k in 0..count {
            let (rk, bk) = (start(k), size(k));
            let column = gather(a, &perm, rk, (rk, bk));
            let lkk = if k == 0 {
                Mat::<T>::identity(bk, bk)
            } else {
                unit_lower(l_block(l.as_ref(), blocks, k, k))
            };
            // 1. H(m, k), 1 <= m < k, each from three block products, in parallel.
            hessenberg_column(
                l.as_ref(),
                blocks,
                k,
                (&diag, &sub),
                lkk.as_ref(),
                h.as_mut(),
            );
            // 2. T(k, k).
            let mut tkk = column.as_ref().subrows(0, bk).to_owned();
            if k >= 2 {
                let row = l.as_ref().submatrix(rk, 0, bk, start(k - 1));
                let hk = h.as_ref().submatrix(0, 0, start(k - 1), bk);
                add_product(tkk.as_mut(), row, hk, -1.0, par);
                let mut w = Mat::<T>::zeros(bk, size(k - 1));
                add_product(w.as_mut(), lkk.as_ref(), sub[k - 1].as_ref(), 1.0, par);
                let previous = l_block(l.as_ref(), blocks, k, k - 1);
                add_product(tkk.as_mut(), w.as_ref(), previous.adjoint(), -1.0, par);
            }
            if k >= 1 {
                solve_unit_lower_triangular_in_place(lkk.as_ref(), tkk.as_mut(), par);
                let mut t = tkk.adjoint().to_owned();
                solve_unit_lower_triangular_in_place(lkk.as_ref(), t.as_mut(), par);
                tkk = t;
            }
            hermitian_part(tkk.as_mut());
            diag.push(tkk);
            if k + 1 == count {
                break;
            }
            // 3. H(k, k) (k >= 1; the panel of k = 0 is A's block column).
            if k >= 1 {
                let mut hkk = h.as_mut().submatrix_mut(start(k - 1), 0, bk, bk);
                hkk.fill(T::from_f64(0.0));
                if k >= 2 {
                    let previous = l_block(l.as_ref(), blocks, k, k - 1);
                    add_product(
                        hkk.rb_mut(),
                        sub[k - 1].as_ref(),
                        previous.adjoint(),
                        1.0,
                        par,
                    );
                }
                add_product(hkk, diag[k].as_ref(), lkk.adjoint(), 1.0, par);
            }
            // 4. The next block column of L: W = A(k+1:, k) - L(k+1:, 1:k) H(1:k, k), in place in
            // L's storage (block column k holds L's block column k + 1).
            let below = start(k + 1);
            let rows = n - below;
            let (left, right) = l.as_mut().split_at_col_mut(rk);
            let mut w = right.submatrix_mut(below, 0, rows, bk);
            w.copy_from(column.as_ref().subrows(bk, rows));
            if k >= 1 {
                let update = left.rb().submatrix(below, 0, rows, rk);
                add_product(
                    w.rb_mut(),
                    update,
                    h.as_ref().submatrix(0, 0, rk, bk),
                    -1.0,
                    par,
                );
            }
            let piv = lu_any(backend, w.rb_mut(), par)?;
            let next = size(k + 1);
            let u = Mat::<T>::from_fn(
                next,
                bk,
                |i, j| {
                    if i <= j { w[(i, j)] } else { T::from_f64(0.0) }
                },
            );
            // T(k+1, k) = U L(k, k)^-H: its adjoint is L(k, k)^-1 U^H.
            let mut t = u.adjoint().to_owned();
            solve_unit_lower_triangular_in_place(lkk.as_ref(), t.as_mut(), par);
            sub.push(t.adjoint().to_owned());
            // The interchanges: on L's earlier columns, and on the permutation the rest of A is
            // read through.
            swap_rows_in_parallel(left.submatrix_mut(below, 0, rows, rk), &piv);
            for (i, &p) in piv.iter().enumerate() {
                swaps[below + i] = below + p;
                perm.swap(below + i, below + p);
            }
        }
        Ok(Self {
            blocks,
            a: l,
            diag,
            sub,
            swaps,
        })
    }

    /// L(j:, j) for j >= 1: L's block column j from its diagonal block down (stored in column j -
    /// 1).
    fn column(&self, j: usize) -> MatRef<'_, T> {
        let b = &self.blocks;
        let start = b.start(j);
        self.a
            .as_ref()
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
fn lu_any<T: Scalar>(backend: Backend, mut w: MatMut<'_, T>, par: Par) -> Result<Vec<usize>> {
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
