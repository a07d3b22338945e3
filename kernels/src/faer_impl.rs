//! The sequential tile kernels on faer (pure Rust); `split` makes the parallel ones.
//!
//! faer's `matmul` is fastest with a column-major right operand. With a transposed
//! (row-major) one its AVX2 kernels run 2.5x slower (tiles 512 to 2048 of a larger matrix:
//! 20 against 51 Gflop/s on one thread, measured by calling faer's x86 GEMM with the AVX2
//! instruction set on a Zen 4), so on a machine without AVX-512 a product whose right
//! operand is a transposed view (C -= A B^T of the Cholesky GEMM and SYRK) first packs it
//! into this thread's column-major scratch: O(k n) copies against O(m n k) flops. With
//! AVX-512 faer's own transposed path measured as fast as packing (47 against 44-48
//! Gflop/s at 512 on one thread), so the view is passed as it is there.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{LltError, cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::{matmul, triangular::BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use std::cell::RefCell;

use faer::{Accum, MatMut, MatRef, Par};

use crate::KernelError;

/// A right operand smaller than this many elements is used as it is: packing would cost
/// more than the slow layout.
const PACK_MIN_ELEMENTS: usize = 64 * 64;

thread_local! {
    /// Per-thread scratch for packed operands; grows to the largest operand seen.
    static SCRATCH: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// Whether a transposed right operand is packed before a product (see the module doc):
/// on machines whose faer GEMM has no AVX-512 kernels.
fn packs_transposed_operands() -> bool {
    static PACK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PACK.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            !std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            true
        }
    })
}

/// Calls `f` with `b` in column-major layout when that is faster: `b` itself when it is
/// column-major, small, or the machine's faer is fast on it, else a packed copy in this
/// thread's scratch (always when `force`, for tests).
fn with_col_major<R>(b: MatRef<'_, f64>, force: bool, f: impl FnOnce(MatRef<'_, f64>) -> R) -> R {
    let (k, n) = (b.nrows(), b.ncols());
    let pack_it = force || (packs_transposed_operands() && k * n >= PACK_MIN_ELEMENTS);
    if b.row_stride() == 1 || !pack_it {
        return f(b);
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.len() < k * n {
            scratch.resize(k * n, 0.0);
        }
        let mut packed = MatMut::from_column_major_slice_mut(&mut scratch[..k * n], k, n);
        pack(b, packed.as_mut());
        f(packed.as_ref())
    })
}

/// dst <- src, by 16 x 16 blocks so that both the reads and the writes stay in cache
/// lines (faer's `copy_from` of a transposed view goes element by element: 4.5x slower).
fn pack(src: MatRef<'_, f64>, dst: MatMut<'_, f64>) {
    const B: usize = 16;
    let (k, n) = (src.nrows(), src.ncols());
    assert!(dst.nrows() == k && dst.ncols() == n && dst.row_stride() == 1);
    let (s, rs, cs) = (src.as_ptr(), src.row_stride(), src.col_stride());
    let (d, ld) = (dst.as_ptr_mut(), dst.col_stride());
    for j0 in (0..n).step_by(B) {
        for i0 in (0..k).step_by(B) {
            for i in i0..(i0 + B).min(k) {
                for j in j0..(j0 + B).min(n) {
                    let (i, j) = (i as isize, j as isize);
                    // SAFETY: i < k and j < n, the shapes of both views (asserted above),
                    // so both offsets address elements of their views; dst is exclusive.
                    unsafe { *d.offset(i + j * ld) = *s.offset(i * rs + j * cs) };
                }
            }
        }
    }
}

pub(crate) fn potrf(mut a: MatMut<'_, f64>) -> Result<(), KernelError> {
    let par = Par::Seq;
    let n = a.nrows();
    // faer uses the strict upper triangle as scratch; LAPACK leaves it alone, and so must
    // we (it is the caller's data when factoring in place). Saving it costs O(n^2).
    // Column by column (contiguous in a column-major tile): a copy, not an element walk.
    let mut upper = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for j in 1..n {
        let col = a.as_ref().col(j).subrows(0, j);
        match col.try_as_col_major() {
            Some(col) => upper.extend_from_slice(col.as_slice()),
            None => upper.extend(col.iter().copied()),
        }
    }
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    // No regularisation: a non-positive pivot is an error the caller must see.
    let result = cholesky_in_place(
        a.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    );
    let mut start = 0;
    for j in 1..n {
        let saved = &upper[start..start + j];
        start += j;
        let mut col = a.as_mut().col_mut(j).subrows_mut(0, j);
        match col.as_mut().try_as_col_major_mut() {
            Some(col) => col.as_slice_mut().copy_from_slice(saved),
            None => col.iter_mut().zip(saved).for_each(|(x, &v)| *x = v),
        }
    }
    result
        .map(|_| ())
        .map_err(|LltError::NonPositivePivot { index }| KernelError::NotPositiveDefinite { index })
}

pub(crate) fn trsm(l: MatRef<'_, f64>, b: MatMut<'_, f64>) -> Result<(), KernelError> {
    // X L^T = B  <=>  L X^T = B^T: a left lower solve on the transposed view, no copy
    // (measured: as fast as a column-major right-hand side with AVX-512, faster at 512).
    solve_lower_triangular_in_place(l, b.transpose_mut(), Par::Seq);
    Ok(())
}

pub(crate) fn syrk(a: MatRef<'_, f64>, c: MatMut<'_, f64>) -> Result<(), KernelError> {
    with_col_major(a.transpose(), false, |at| {
        faer::linalg::matmul::triangular::matmul(
            c,
            BlockStructure::TriangularLower,
            Accum::Add,
            a,
            BlockStructure::Rectangular,
            at,
            BlockStructure::Rectangular,
            -1.0,
            Par::Seq,
        )
    });
    Ok(())
}

/// C <- alpha A B + beta C (A, B possibly transposed views). With beta = 0 the old C is
/// never read, so NaN or garbage there does not leak into the result (BLAS semantics).
pub(crate) fn matmul_scaled(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    c: MatMut<'_, f64>,
    alpha: f64,
    beta: f64,
) -> Result<(), KernelError> {
    matmul_packed(a, b, c, alpha, beta, false)
}

/// [`matmul_scaled`], packing a transposed `b` when that is faster or `force` says so.
pub(crate) fn matmul_packed(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    mut c: MatMut<'_, f64>,
    alpha: f64,
    beta: f64,
    force: bool,
) -> Result<(), KernelError> {
    with_col_major(b, force, |b| {
        if beta == 0.0 {
            matmul(c, Accum::Replace, a, b, alpha, Par::Seq);
        } else {
            scale(c.as_mut(), beta);
            matmul(c, Accum::Add, a, b, alpha, Par::Seq);
        }
    });
    Ok(())
}

/// C <- beta C; beta = 0 overwrites C with zeros without reading it.
pub(crate) fn scale(mut c: MatMut<'_, f64>, beta: f64) {
    if beta == 0.0 {
        c.fill(0.0);
    } else if beta != 1.0 {
        faer::zip!(c).for_each(|faer::unzip!(x)| *x *= beta);
    }
}

pub(crate) fn solve_lower(
    l: MatRef<'_, f64>,
    transpose: bool,
    x: MatMut<'_, f64>,
) -> Result<(), KernelError> {
    if transpose {
        solve_upper_triangular_in_place(l.transpose(), x, Par::Seq);
    } else {
        solve_lower_triangular_in_place(l, x, Par::Seq);
    }
    Ok(())
}

/// faer's own Cholesky of a whole matrix on `par` (the `--compare` peer), strict upper
/// triangle used as faer's scratch.
pub(crate) fn library_potrf(a: MatMut<'_, f64>, par: Par) -> Result<(), KernelError> {
    let n = a.nrows();
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    cholesky_in_place(
        a,
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map(|_| ())
    .map_err(|LltError::NonPositivePivot { index }| KernelError::NotPositiveDefinite { index })
}

#[cfg(test)]
mod tests {
    use faer::Mat;

    use super::*;

    #[test]
    fn packed_transposed_operands_give_the_products_of_the_views() {
        // Large enough to pack; ragged sizes; B a transposed view inside a bigger matrix.
        let (m, n, k) = (70, 90, 65);
        let a = Mat::from_fn(m, k, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
        let big = Mat::from_fn(n + 3, k + 5, |i, j| ((i * 5 + j * 13) % 17) as f64 - 8.0);
        let b = big.as_ref().submatrix(2, 1, n, k).transpose();
        let c0 = Mat::from_fn(m, n, |i, j| (i + 2 * j) as f64);
        let mut direct = c0.clone();
        matmul(direct.as_mut(), Accum::Add, a.as_ref(), b, 1.5, Par::Seq);
        let mut packed = c0.clone();
        let half = Mat::from_fn(m, n, |i, j| 0.5 * (i + 2 * j) as f64);
        matmul_packed(a.as_ref(), b, packed.as_mut(), 1.5, 1.0, true).unwrap();
        // Integer-valued operands: both orders of summation are exact.
        assert_eq!(packed, direct);
        let mut scaled = half.clone();
        matmul_packed(a.as_ref(), b, scaled.as_mut(), 1.5, 2.0, true).unwrap();
        assert_eq!(scaled, direct);
    }
}
