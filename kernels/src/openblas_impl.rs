//! The tile kernels on OpenBLAS (CBLAS level 3 and LAPACK dpotrf).
//!
//! faer views map onto BLAS arguments without copies when they are column-major (the
//! normal case: tiles of a column-major matrix) or transposed column-major (passed with a
//! transpose flag). Any other layout is copied into a column-major temporary first.
//! Every call here is sequential: OpenBLAS's thread count is process-wide, so it is set to
//! one before each call, and `split` runs the pieces of a parallel kernel on the caller's
//! pool, each cluster on its own pinned threads.

use std::ffi::{c_char, c_int};

use cblas_sys::{
    CBLAS_TRANSPOSE, CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, CblasRight,
    CblasTrans, cblas_dgemm, cblas_dsyrk, cblas_dtrsm,
};
use faer::{Mat, MatMut, MatRef, Par};
// Links the system OpenBLAS (the `system` feature of openblas-src).
use openblas_src as _;

use crate::{KernelError, Op};

unsafe extern "C" {
    /// OpenBLAS extension: the number of threads its next calls use.
    fn openblas_set_num_threads(num_threads: c_int);
    /// OpenBLAS extension: the number of threads its next calls use.
    fn openblas_get_num_threads() -> c_int;
}

/// Sets OpenBLAS's process-wide thread count (1 for hetla's kernels; the `--compare`
/// peer that calls dpotrf on a whole matrix uses all threads).
pub(crate) fn set_threads(par: Par) {
    let n = crate::split::threads(par);
    // SAFETY: plain FFI call taking an integer; OpenBLAS clamps it to its thread limit.
    unsafe { openblas_set_num_threads(n.min(c_int::MAX as usize) as c_int) }
}

/// The thread count OpenBLAS's next call would use.
pub(crate) fn get_threads() -> usize {
    // SAFETY: plain FFI call without arguments.
    unsafe { openblas_get_num_threads() }.max(1) as usize
}

fn int(value: usize) -> Result<c_int, KernelError> {
    crate::error::blas_int(value, "openblas")
}

/// A read operand as BLAS sees it: pointer, leading dimension, transpose flag. `_copy`
/// keeps a column-major copy alive when the view had no BLAS-compatible layout.
struct BlasRef {
    ptr: *const f64,
    ld: c_int,
    trans: CBLAS_TRANSPOSE,
    _copy: Option<Mat<f64>>,
}

fn blas_ref(m: MatRef<'_, f64>) -> Result<BlasRef, KernelError> {
    let (r, c) = (m.nrows() as isize, m.ncols() as isize);
    let (rs, cs) = (m.row_stride(), m.col_stride());
    let direct = |ld: isize, trans| {
        Ok(BlasRef {
            ptr: m.as_ptr(),
            ld: int(ld as usize)?,
            trans,
            _copy: None,
        })
    };
    if rs == 1 && cs >= r.max(1) {
        return direct(cs, CblasNoTrans);
    }
    if cs == 1 && rs >= c.max(1) {
        return direct(rs, CblasTrans);
    }
    let copy = m.to_owned();
    Ok(BlasRef {
        ptr: copy.as_ptr(),
        ld: int(copy.col_stride() as usize)?,
        trans: CblasNoTrans,
        _copy: Some(copy),
    })
}

/// Runs `f(ptr, ld)` on the written operand, through a column-major copy (copied back
/// afterwards) when the view is not column-major.
fn with_col_major<R>(
    mut m: MatMut<'_, f64>,
    f: impl FnOnce(*mut f64, c_int) -> Result<R, KernelError>,
) -> Result<R, KernelError> {
    if m.row_stride() == 1 && m.col_stride() >= (m.nrows() as isize).max(1) {
        let ld = int(m.col_stride() as usize)?;
        f(m.as_ptr_mut(), ld)
    } else {
        let mut copy = m.to_owned();
        let ld = int(copy.col_stride() as usize)?;
        let out = f(copy.as_ptr_mut(), ld)?;
        m.copy_from(&copy);
        Ok(out)
    }
}

pub(crate) fn potrf(a: MatMut<'_, f64>) -> Result<(), KernelError> {
    set_threads(Par::Seq);
    potrf_on_current_threads(a)
}

fn potrf_on_current_threads(a: MatMut<'_, f64>) -> Result<(), KernelError> {
    let n = int(a.nrows())?;
    if n == 0 {
        return Ok(());
    }
    with_col_major(a, |ptr, lda| {
        let mut info: c_int = 0;
        // SAFETY: ptr addresses an n x n column-major matrix with leading dimension lda,
        // valid and exclusively borrowed for the call; the scalars live on this stack.
        unsafe { lapack_sys::dpotrf_(&(b'L' as c_char), &n, ptr, &lda, &mut info) };
        match info {
            // OpenBLAS's dpotrf lets a NaN pivot through (reference LAPACK does not):
            // the first non-finite diagonal entry is where the factorisation broke down.
            0 => match (0..n as usize).find(|&j| {
                // SAFETY: j < n, so j * (lda + 1) addresses a diagonal entry of the matrix.
                !unsafe { *ptr.add(j * (lda as usize + 1)) }.is_finite()
            }) {
                Some(index) => Err(KernelError::NotPositiveDefinite { index }),
                None => Ok(()),
            },
            i if i > 0 => Err(KernelError::NotPositiveDefinite {
                index: i as usize - 1,
            }),
            i => Err(KernelError::Operands {
                op: Op::Potrf,
                reason: format!("dpotrf rejected argument {}", -i),
            }),
        }
    })
}

pub(crate) fn trsm(l: MatRef<'_, f64>, b: MatMut<'_, f64>) -> Result<(), KernelError> {
    triangular_solve(l, CblasRight, true, b)
}

pub(crate) fn solve_lower(
    l: MatRef<'_, f64>,
    transpose: bool,
    x: MatMut<'_, f64>,
) -> Result<(), KernelError> {
    triangular_solve(l, CblasLeft, transpose, x)
}

fn triangular_solve(
    l: MatRef<'_, f64>,
    side: cblas_sys::CBLAS_SIDE,
    transpose: bool,
    b: MatMut<'_, f64>,
) -> Result<(), KernelError> {
    let (m, n) = (int(b.nrows())?, int(b.ncols())?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    // The triangle must be read as lower: a transposed view of L would flip it, so such a
    // view is copied to column-major rather than passed with a transpose flag.
    let l = match blas_ref(l)? {
        r if matches!(r.trans, CblasNoTrans) => r,
        _ => blas_ref(l.to_owned().as_ref())?,
    };
    let trans = if transpose { CblasTrans } else { CblasNoTrans };
    set_threads(Par::Seq);
    with_col_major(b, |ptr, ldb| {
        // SAFETY: l.ptr/l.ld describe a valid column-major triangle of the order BLAS
        // expects (checked by the caller's shape check), ptr/ldb the exclusive m x n
        // right-hand side; both outlive the call.
        unsafe {
            cblas_dtrsm(
                CblasColMajor,
                side,
                CblasLower,
                trans,
                CblasNonUnit,
                m,
                n,
                1.0,
                l.ptr,
                l.ld,
                ptr,
                ldb,
            )
        };
        Ok(())
    })
}

pub(crate) fn syrk(a: MatRef<'_, f64>, c: MatMut<'_, f64>) -> Result<(), KernelError> {
    let (n, k) = (int(a.nrows())?, int(a.ncols())?);
    if n == 0 || k == 0 {
        return Ok(());
    }
    let a = blas_ref(a)?;
    // dsyrk's `trans` says how A is applied: NoTrans is C - A A^T with A stored n x k;
    // a view stored transposed (k x n) needs Trans to mean the same product.
    set_threads(Par::Seq);
    with_col_major(c, |ptr, ldc| {
        // SAFETY: a.ptr/a.ld describe the valid n x k operand, ptr/ldc the exclusive
        // n x n output; both outlive the call.
        unsafe {
            cblas_dsyrk(
                CblasColMajor,
                CblasLower,
                a.trans,
                n,
                k,
                -1.0,
                a.ptr,
                a.ld,
                1.0,
                ptr,
                ldc,
            )
        };
        Ok(())
    })
}

/// C <- alpha A B + beta C (A, B possibly transposed views); the caller handles k = 0.
pub(crate) fn gemm(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    c: MatMut<'_, f64>,
    alpha: f64,
    beta: f64,
) -> Result<(), KernelError> {
    set_threads(Par::Seq);
    gemm_on_current_threads(a, b, c, alpha, beta)
}

fn gemm_on_current_threads(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    c: MatMut<'_, f64>,
    alpha: f64,
    beta: f64,
) -> Result<(), KernelError> {
    let (m, n, k) = (int(c.nrows())?, int(c.ncols())?, int(a.ncols())?);
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let (a, b) = (blas_ref(a)?, blas_ref(b)?);
    with_col_major(c, |ptr, ldc| {
        // SAFETY: a, b describe valid m x k and k x n operands (shape-checked by the
        // caller), ptr/ldc the exclusive m x n output; all outlive the call.
        unsafe {
            cblas_dgemm(
                CblasColMajor,
                a.trans,
                b.trans,
                m,
                n,
                k,
                alpha,
                a.ptr,
                a.ld,
                b.ptr,
                b.ld,
                beta,
                ptr,
                ldc,
            )
        };
        Ok(())
    })
}

/// LAPACK dpotrf on OpenBLAS's own threads (`par`), then back to one thread.
pub(crate) fn library_potrf(a: MatMut<'_, f64>, par: Par) -> Result<(), KernelError> {
    with_library_threads(par, || potrf_on_current_threads(a))
}

/// dgemm (C - A B) on OpenBLAS's own threads (`par`), then back to one thread.
pub(crate) fn library_gemm_sub(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    c: MatMut<'_, f64>,
    par: Par,
) -> Result<(), KernelError> {
    with_library_threads(par, || gemm_on_current_threads(a, b, c, -1.0, 1.0))
}

fn with_library_threads<R>(par: Par, f: impl FnOnce() -> R) -> R {
    set_threads(par);
    let out = f();
    set_threads(Par::Seq);
    out
}
