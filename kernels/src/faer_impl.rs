//! The sequential tile kernels on faer (pure Rust); `split` makes the parallel ones.
//!
//! faer's `matmul` is fastest with a column-major right operand. With a transposed (row-major) one
//! its AVX2 kernels run 2.5x slower (tiles 512 to 2048 of a larger matrix: 20 against 51 Gflop/s on
//! one thread, measured by calling faer's x86 GEMM with the AVX2 instruction set on a Zen 4), so on
//! a machine without AVX-512 a product whose right operand is a transposed view (C -= A B^T of the
//! Cholesky GEMM and SYRK) first packs it into this thread's column-major scratch: O(k n) copies
//! against O(m n k) flops. With AVX-512 faer's own transposed path measured as fast as packing (47
//! against 44-48 Gflop/s at 512 on one thread), so the view is passed as it is there.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{LltError, cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::{matmul_with_conj, triangular::BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place_with_conj, solve_upper_triangular_in_place_with_conj,
};
use std::cell::RefCell;

use faer::{Accum, Conj, MatMut, MatRef, Par};

use crate::product::Product;
use crate::scalar::adjoint_conj;
use crate::{KernelError, Scalar};

/// A right operand smaller than this many elements is used as it is: packing would cost more than
/// the slow layout.
const PACK_MIN_ELEMENTS: usize = 64 * 64;

thread_local! {
    /// Per-thread scratch for packed operands of any precision (8-byte words, the largest alignment
    /// of the four types); grows to the largest operand seen.
    static SCRATCH: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// Whether a transposed right operand is packed before a product (see the module doc): on machines
/// whose faer GEMM has no AVX-512 kernels.
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
/// column-major, small, or the machine's faer is fast on it, else a packed copy in this thread's
/// scratch (always when `force`, for tests).
fn with_col_major<T: Scalar, R>(
    b: MatRef<'_, T>,
    force: bool,
    f: impl FnOnce(MatRef<'_, T>) -> R,
) -> R {
    let (k, n) = (b.nrows(), b.ncols());
    let pack_it = force || (packs_transposed_operands() && k * n >= PACK_MIN_ELEMENTS);
    if b.row_stride() == 1 || !pack_it {
        return f(b);
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let words = (k * n * size_of::<T>()).div_ceil(size_of::<f64>());
        if scratch.len() < words {
            scratch.resize(words, 0.0);
        }
        // SAFETY: T is one of f32, f64, c32, c64 (sealed): plain data of alignment at most
        // 8, for which every bit pattern is a value; the scratch holds `words` 8-byte words,
        // at least k n elements of T, and stays borrowed for the view's life.
        let elements =
            unsafe { std::slice::from_raw_parts_mut(scratch.as_mut_ptr().cast::<T>(), k * n) };
        let mut packed = MatMut::from_column_major_slice_mut(elements, k, n);
        pack(b, packed.as_mut());
        f(packed.as_ref())
    })
}

/// dst <- src, by 16 x 16 blocks so that both the reads and the writes stay in cache lines (faer's
/// `copy_from` of a transposed view goes element by element: 4.5x slower).
fn pack<T: Scalar>(src: MatRef<'_, T>, dst: MatMut<'_, T>) {
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

pub(crate) fn potrf<T: Scalar>(mut a: MatMut<'_, T>) -> Result<(), KernelError> {
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
    let result = factor_in_place(a.as_mut(), par);
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
}

/// faer's Cholesky (L L^H) in place on `par`, no regularisation: a non-positive pivot is an error
/// the caller must see. The strict upper triangle is faer's scratch.
fn factor_in_place<T: Scalar>(mut a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
    let n = a.nrows();
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<T>(n, par, Default::default()));
    cholesky_in_place(
        a.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map(|_| {
        // faer leaves round-off in the imaginary parts of a complex factor's diagonal; LAPACK's
        // is real, exactly.
        crate::real_diagonal(a);
    })
    .map_err(|LltError::NonPositivePivot { index }| KernelError::NotPositiveDefinite { index })
}

pub(crate) fn trsm<T: Scalar>(l: MatRef<'_, T>, b: MatMut<'_, T>) -> Result<(), KernelError> {
    // X L^H = B  <=>  conj(L) X^T = B^T: a left lower solve on the transposed view, no copy
    // (measured: as fast as a column-major right-hand side with AVX-512, faster at 512).
    solve_lower_triangular_in_place_with_conj(l, adjoint_conj::<T>(), b.transpose_mut(), Par::Seq);
    Ok(())
}

/// C <- C - A A^H on the lower triangle of C (SYRK, or HERK for a complex type).
pub(crate) fn syrk<T: Scalar>(a: MatRef<'_, T>, c: MatMut<'_, T>) -> Result<(), KernelError> {
    if T::PRECISION.is_complex() {
        return herk(a, c);
    }
    with_col_major(a.transpose(), false, |at| {
        faer::linalg::matmul::triangular::matmul_with_conj(
            c,
            BlockStructure::TriangularLower,
            Accum::Add,
            a,
            BlockStructure::Rectangular,
            Conj::No,
            at,
            BlockStructure::Rectangular,
            Conj::No,
            T::from_f64(-1.0),
            Par::Seq,
        )
    });
    Ok(())
}

/// Order below which [`herk`] computes a diagonal block in full.
const HERK_LEAF: usize = 32;

/// C <- C - A A^H on the lower triangle of a complex C, without faer's triangular product: faer
/// 0.24.4's product into a lower-triangular complex destination also writes entries of the strict
/// upper triangle (1 of 21 at order 7, 16 of 2016 at 64; real types are not affected), which a tile
/// kernel must leave alone. Recursive halves: the off-diagonal block is a plain product, a diagonal
/// block of order at most [`HERK_LEAF`] is computed in full into scratch and only its lower
/// triangle subtracted (at most HERK_LEAF / n extra flops).
fn herk<T: Scalar>(a: MatRef<'_, T>, mut c: MatMut<'_, T>) -> Result<(), KernelError> {
    let n = c.nrows();
    if n <= HERK_LEAF {
        let mut full = faer::Mat::<T>::zeros(n, n);
        let (at, conj) = (a.transpose(), adjoint_conj::<T>());
        matmul_with_conj(
            full.as_mut(),
            Accum::Replace,
            a,
            Conj::No,
            at,
            conj,
            T::from_f64(1.0),
            Par::Seq,
        );
        for j in 0..n {
            for i in j..n {
                c[(i, j)] -= full[(i, j)];
            }
        }
        return Ok(());
    }
    let h = n / 2;
    let (top, bottom) = (a.subrows(0, h), a.subrows(h, n - h));
    let (c11, _, c21, c22) = c.split_at_mut(h, h);
    herk(top, c11)?;
    let above = (top.transpose(), adjoint_conj::<T>());
    matmul_packed(
        Product::new((bottom, Conj::No), above, -1.0, 1.0),
        c21,
        false,
    )?;
    herk(bottom, c22)
}

/// The product `p` into C (see [`Product`]): with beta = 0 the old C is never read, so NaN or
/// garbage there does not leak into the result.
pub(crate) fn matmul_scaled<T: Scalar>(
    p: Product<'_, T>,
    c: MatMut<'_, T>,
) -> Result<(), KernelError> {
    matmul_packed(p, c, false)
}

/// [`matmul_scaled`], packing a transposed `b` when that is faster or `force` says so.
pub(crate) fn matmul_packed<T: Scalar>(
    p: Product<'_, T>,
    mut c: MatMut<'_, T>,
    force: bool,
) -> Result<(), KernelError> {
    let ((a, conj_a), (b, conj_b), alpha, beta) = (p.a, p.b, p.alpha, p.beta);
    with_col_major(b, force, |b| {
        let alpha = T::from_f64(alpha);
        if beta == 0.0 {
            matmul_with_conj(c, Accum::Replace, a, conj_a, b, conj_b, alpha, Par::Seq);
        } else {
            scale(c.as_mut(), beta);
            matmul_with_conj(c, Accum::Add, a, conj_a, b, conj_b, alpha, Par::Seq);
        }
    });
    Ok(())
}

/// C <- beta C; beta = 0 overwrites C with zeros without reading it.
pub(crate) fn scale<T: Scalar>(mut c: MatMut<'_, T>, beta: f64) {
    if beta == 0.0 {
        c.fill(T::from_f64(0.0));
    } else if beta != 1.0 {
        let beta = T::from_f64(beta);
        faer::zip!(c).for_each(|faer::unzip!(x)| *x *= beta);
    }
}

/// X <- L^-1 X, or L^-H X when `adjoint`.
pub(crate) fn solve_lower<T: Scalar>(
    l: MatRef<'_, T>,
    adjoint: bool,
    x: MatMut<'_, T>,
) -> Result<(), KernelError> {
    if adjoint {
        solve_upper_triangular_in_place_with_conj(l.transpose(), adjoint_conj::<T>(), x, Par::Seq);
    } else {
        solve_lower_triangular_in_place_with_conj(l, Conj::No, x, Par::Seq);
    }
    Ok(())
}

/// faer's own Cholesky of a whole matrix on `par` (the `--compare` peer), strict upper triangle
/// used as faer's scratch.
pub(crate) fn library_potrf<T: Scalar>(a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
    factor_in_place(a, par)
}

/// faer's own LU with partial pivoting of a whole matrix in place on `par` (the `--compare` peer;
/// faer reports no zero pivot).
pub(crate) fn library_lu<T: Scalar>(a: MatMut<'_, T>, par: Par) -> Option<usize> {
    use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
    let n = a.nrows();
    let mut perm = vec![0usize; n];
    let mut perm_inv = vec![0usize; n];
    let mut buffer = MemBuffer::new(lu_in_place_scratch::<usize, T>(
        n,
        a.ncols(),
        par,
        Default::default(),
    ));
    lu_in_place(
        a,
        &mut perm,
        &mut perm_inv,
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    None
}

/// faer's own Bunch-Kaufman factorisation (`lblt`, L B L^H) of the lower triangle of a whole matrix
/// in place on `par` (the `--compare` peer of the symmetric indefinite family): B's diagonal on
/// `a`'s, its subdiagonal (nonzero at the first row of each 2 x 2 block) returned.
pub(crate) fn library_ldlt<T: Scalar>(a: MatMut<'_, T>, par: Par) -> faer::diag::Diag<T> {
    use faer::linalg::cholesky::lblt::factor::{cholesky_in_place, cholesky_in_place_scratch};
    let n = a.nrows();
    let mut subdiag = faer::diag::Diag::<T>::zeros(n);
    let (mut perm, mut perm_inv) = (vec![0usize; n], vec![0usize; n]);
    let mut buffer = MemBuffer::new(cholesky_in_place_scratch::<usize, T>(
        n,
        par,
        Default::default(),
    ));
    cholesky_in_place(
        a,
        subdiag.as_mut(),
        &mut perm,
        &mut perm_inv,
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    );
    subdiag
}

/// faer's blocked Householder QR of a whole matrix on `par` threads, at its recommended block size
/// (the peer of `hetla qr --compare`).
pub(crate) fn library_qr<T: Scalar>(a: MatMut<'_, T>, par: Par) {
    use faer::linalg::qr::no_pivoting::factor::{
        qr_in_place, qr_in_place_scratch, recommended_block_size,
    };
    let (m, n) = (a.nrows(), a.ncols());
    if m.min(n) == 0 {
        return;
    }
    let block = recommended_block_size::<T>(m, n);
    let mut coeff = faer::Mat::<T>::zeros(block, m.min(n));
    let mut buffer = MemBuffer::new(qr_in_place_scratch::<T>(
        m,
        n,
        block,
        par,
        Default::default(),
    ));
    qr_in_place(
        a,
        coeff.as_mut(),
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    );
}

#[cfg(test)]
mod tests {
    use faer::Mat;
    use faer::linalg::matmul::matmul;

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
        let packed_into = |c: MatMut<'_, f64>, beta| {
            let p = Product::new((a.as_ref(), Conj::No), (b, Conj::No), 1.5, beta);
            matmul_packed(p, c, true).unwrap()
        };
        packed_into(packed.as_mut(), 1.0);
        // Integer-valued operands: both orders of summation are exact.
        assert_eq!(packed, direct);
        let mut scaled = half.clone();
        packed_into(scaled.as_mut(), 2.0);
        assert_eq!(scaled, direct);
    }

    #[test]
    fn packed_adjoints_of_complex_operands_are_conjugated() {
        use crate::c32;
        let (m, n, k) = (70, 66, 65);
        let a = Mat::from_fn(m, k, |i, j| c32::new((i % 5) as f32, (j % 3) as f32 - 1.0));
        let b = Mat::from_fn(n, k, |i, j| c32::new((j % 7) as f32 - 3.0, (i % 4) as f32));
        let mut direct = Mat::<c32>::zeros(m, n);
        matmul(
            direct.as_mut(),
            Accum::Replace,
            a.as_ref(),
            b.adjoint(),
            c32::new(1.0, 0.0),
            Par::Seq,
        );
        let mut packed = Mat::<c32>::zeros(m, n);
        let adj = (b.as_ref().transpose(), Conj::Yes);
        matmul_packed(
            Product::new((a.as_ref(), Conj::No), adj, 1.0, 0.0),
            packed.as_mut(),
            true,
        )
        .unwrap();
        assert_eq!(packed, direct);
    }
}
