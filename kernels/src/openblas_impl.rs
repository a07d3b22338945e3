//! The tile kernels on OpenBLAS (CBLAS level 3 and LAPACK ?potrf), in the precision of the tiles
//! (s, d, c, z: the routine is chosen by [`Scalar::PRECISION`]).
//!
//! faer views map onto BLAS arguments without copies when they are column-major (the normal case:
//! tiles of a column-major matrix) or transposed column-major (passed with a transpose flag). Any
//! other layout is copied into a column-major temporary first. Every call here is sequential:
//! OpenBLAS's thread count is process-wide, so it is set to one before each call, and `split` runs
//! the pieces of a parallel kernel on the caller's pool, each cluster on its own pinned threads.

use std::ffi::{c_char, c_int};

use cblas_sys::{
    CBLAS_TRANSPOSE, CblasColMajor, CblasConjTrans, CblasLeft, CblasLower, CblasNoTrans,
    CblasNonUnit, CblasRight, CblasTrans, CblasUnit, CblasUpper, cblas_cgemm, cblas_cherk,
    cblas_ctrmm, cblas_ctrsm, cblas_dgemm, cblas_dsyrk, cblas_dtrmm, cblas_dtrsm, cblas_sgemm,
    cblas_ssyrk, cblas_strmm, cblas_strsm, cblas_zgemm, cblas_zherk, cblas_ztrmm, cblas_ztrsm,
};
use faer::{Conj, Mat, MatMut, MatRef, Par};
// Links the system OpenBLAS (the `system` feature of openblas-src).
use openblas_src as _;

use crate::product::Product;
use crate::{KernelError, Op, Precision, Scalar};

unsafe extern "C" {
    /// OpenBLAS extension: the number of threads its next calls use.
    fn openblas_set_num_threads(num_threads: c_int);
    /// OpenBLAS extension: the number of threads its next calls use.
    fn openblas_get_num_threads() -> c_int;
}

/// Sets OpenBLAS's process-wide thread count (1 for hetla's kernels; the `--compare` peer that
/// calls dpotrf on a whole matrix uses all threads).
pub(crate) fn set_threads(par: Par) {
    let n = crate::par::threads(par);
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

/// A read operand as BLAS sees it: pointer, leading dimension, transpose flag. `_copy` keeps a
/// column-major copy alive when the view had no BLAS-compatible layout.
struct BlasRef<T> {
    ptr: *const T,
    ld: c_int,
    trans: CBLAS_TRANSPOSE,
    _copy: Option<Mat<T>>,
}

/// `m`, conjugated when `conj` says so, as a BLAS operand: a column-major view as it is, a
/// transposed one with the transpose (conjugated: adjoint) flag, anything else (and a conjugated
/// view that is not transposed, which BLAS cannot express) as a copy.
fn blas_ref<T: Scalar>(m: MatRef<'_, T>, conj: Conj) -> Result<BlasRef<T>, KernelError> {
    let (r, c) = (m.nrows() as isize, m.ncols() as isize);
    let (rs, cs) = (m.row_stride(), m.col_stride());
    let conj = conj == Conj::Yes && T::PRECISION.is_complex();
    let direct = |ld: isize, trans| {
        Ok(BlasRef {
            ptr: m.as_ptr(),
            ld: int(ld as usize)?,
            trans,
            _copy: None,
        })
    };
    if rs == 1 && cs >= r.max(1) && !conj {
        return direct(cs, CblasNoTrans);
    }
    if cs == 1 && rs >= c.max(1) {
        return direct(rs, if conj { CblasConjTrans } else { CblasTrans });
    }
    let copy = if conj {
        m.conjugate().to_owned()
    } else {
        m.to_owned()
    };
    Ok(BlasRef {
        ptr: copy.as_ptr(),
        ld: int(copy.col_stride() as usize)?,
        trans: CblasNoTrans,
        _copy: Some(copy),
    })
}

/// Runs `f(ptr, ld)` on the written operand, through a column-major copy (copied back afterwards)
/// when the view is not column-major.
fn with_col_major<T: Scalar, R>(
    mut m: MatMut<'_, T>,
    f: impl FnOnce(*mut T, c_int) -> Result<R, KernelError>,
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

/// The real `x` in the four shapes a BLAS scalar argument takes (complex ones are passed by
/// address), so that one local outlives the call whatever the precision.
#[derive(Clone, Copy)]
struct BlasScalar {
    single: f32,
    double: f64,
    complex_single: [f32; 2],
    complex_double: [f64; 2],
}

impl BlasScalar {
    fn new(x: f64) -> Self {
        Self {
            single: x as f32,
            double: x,
            complex_single: [x as f32, 0.0],
            complex_double: [x, 0.0],
        }
    }
}

/// The adjoint flag of precision `T`: conjugate transpose for complex, transpose for real.
fn adjoint<T: Scalar>() -> CBLAS_TRANSPOSE {
    if T::PRECISION.is_complex() {
        CblasConjTrans
    } else {
        CblasTrans
    }
}

pub(crate) fn potrf<T: Scalar>(a: MatMut<'_, T>) -> Result<(), KernelError> {
    set_threads(Par::Seq);
    potrf_on_current_threads(a)
}

fn potrf_on_current_threads<T: Scalar>(a: MatMut<'_, T>) -> Result<(), KernelError> {
    let n = int(a.nrows())?;
    if n == 0 {
        return Ok(());
    }
    with_col_major(a, |ptr, lda| {
        let mut info: c_int = 0;
        let uplo = b'L' as c_char;
        // SAFETY: ptr addresses an n x n column-major matrix of T with leading dimension
        // lda, valid and exclusively borrowed for the call; the routine is the one of T's
        // precision (so the pointer casts are to T's own layout); the scalars live on this
        // stack.
        unsafe {
            match T::PRECISION {
                Precision::S => lapack_sys::spotrf_(&uplo, &n, ptr.cast(), &lda, &mut info),
                Precision::D => lapack_sys::dpotrf_(&uplo, &n, ptr.cast(), &lda, &mut info),
                Precision::C => lapack_sys::cpotrf_(&uplo, &n, ptr.cast(), &lda, &mut info),
                Precision::Z => lapack_sys::zpotrf_(&uplo, &n, ptr.cast(), &lda, &mut info),
            }
        };
        match info {
            // OpenBLAS's potrf lets a NaN pivot through (reference LAPACK does not):
            // the first non-finite diagonal entry is where the factorisation broke down.
            0 => match (0..n as usize).find(|&j| {
                // SAFETY: j < n, so j * (lda + 1) addresses a diagonal entry of the matrix.
                !unsafe { *ptr.add(j * (lda as usize + 1)) }.finite()
            }) {
                Some(index) => Err(KernelError::NotPositiveDefinite { index }),
                None => Ok(()),
            },
            i if i > 0 => Err(KernelError::NotPositiveDefinite {
                index: i as usize - 1,
            }),
            i => Err(KernelError::Operands {
                op: Op::Potrf,
                reason: format!("{}potrf rejected argument {}", T::PRECISION, -i),
            }),
        }
    })
}

/// B <- B L^-H.
pub(crate) fn trsm<T: Scalar>(l: MatRef<'_, T>, b: MatMut<'_, T>) -> Result<(), KernelError> {
    triangular_solve(l, CblasRight, true, 1.0, b)
}

/// X <- L^-1 X, or L^-H X when `adjoint`.
pub(crate) fn solve_lower<T: Scalar>(
    l: MatRef<'_, T>,
    adjoint: bool,
    x: MatMut<'_, T>,
) -> Result<(), KernelError> {
    triangular_solve(l, CblasLeft, adjoint, 1.0, x)
}

/// B <- alpha op(L)^-1 B (left) or alpha B op(L)^-1 (right), op the adjoint when `adjoint_l`.
fn triangular_solve<T: Scalar>(
    l: MatRef<'_, T>,
    side: cblas_sys::CBLAS_SIDE,
    adjoint_l: bool,
    alpha: f64,
    b: MatMut<'_, T>,
) -> Result<(), KernelError> {
    triangular_solve_diag(l, (side, CblasLower), adjoint_l, CblasNonUnit, alpha, b)
}

/// X <- L^-1 X with L the unit lower triangle of `l` (?trsm 'L', 'L', 'N', 'U'), one thread.
pub(crate) fn solve_unit_lower<T: Scalar>(
    l: MatRef<'_, T>,
    x: MatMut<'_, T>,
) -> Result<(), KernelError> {
    triangular_solve_diag(l, (CblasLeft, CblasLower), false, CblasUnit, 1.0, x)
}

/// X <- U^-1 X with U the upper triangle of `u` (?trsm 'L', 'U', 'N', 'N'), one thread.
pub(crate) fn solve_upper<T: Scalar>(
    u: MatRef<'_, T>,
    x: MatMut<'_, T>,
) -> Result<(), KernelError> {
    triangular_solve_diag(u, (CblasLeft, CblasUpper), false, CblasNonUnit, 1.0, x)
}

/// [`triangular_solve`] with the diagonal of L unit or not (`diag`), L read as the lower or the
/// upper triangle of `l` (`uplo`).
fn triangular_solve_diag<T: Scalar>(
    l: MatRef<'_, T>,
    (side, uplo): (cblas_sys::CBLAS_SIDE, cblas_sys::CBLAS_UPLO),
    adjoint_l: bool,
    diag: cblas_sys::CBLAS_DIAG,
    alpha: f64,
    b: MatMut<'_, T>,
) -> Result<(), KernelError> {
    let (m, n) = (int(b.nrows())?, int(b.ncols())?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    // The triangle must be read as it is: a transposed view of L would flip it, so such a view
    // is copied to column-major rather than passed with a transpose flag.
    let l = match blas_ref(l, Conj::No)? {
        r if matches!(r.trans, CblasNoTrans) => r,
        _ => blas_ref(l.to_owned().as_ref(), Conj::No)?,
    };
    let trans = if adjoint_l {
        adjoint::<T>()
    } else {
        CblasNoTrans
    };
    let one = BlasScalar::new(alpha);
    set_threads(Par::Seq);
    with_col_major(b, |ptr, ldb| {
        let (lp, ld) = (l.ptr, l.ld);
        let (o, t, u) = (CblasColMajor, uplo, diag);
        // SAFETY: l.ptr/l.ld describe a valid column-major triangle of the order BLAS
        // expects (checked by the caller's shape check), ptr/ldb the exclusive m x n
        // right-hand side; both outlive the call, and the routine is T's precision's.
        unsafe {
            match T::PRECISION {
                Precision::S => cblas_strsm(
                    o,
                    side,
                    t,
                    trans,
                    u,
                    m,
                    n,
                    one.single,
                    lp.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
                Precision::D => cblas_dtrsm(
                    o,
                    side,
                    t,
                    trans,
                    u,
                    m,
                    n,
                    one.double,
                    lp.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
                Precision::C => cblas_ctrsm(
                    o,
                    side,
                    t,
                    trans,
                    u,
                    m,
                    n,
                    &one.complex_single,
                    lp.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
                Precision::Z => cblas_ztrsm(
                    o,
                    side,
                    t,
                    trans,
                    u,
                    m,
                    n,
                    &one.complex_double,
                    lp.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
            }
        };
        Ok(())
    })
}

/// B <- B U with U the unit upper triangle of `u` (?trmm; the diagonal and lower triangle of `u`
/// are not read), on one thread.
pub(crate) fn unit_upper_product<T: Scalar>(
    u: MatRef<'_, T>,
    b: MatMut<'_, T>,
) -> Result<(), KernelError> {
    triangular_product(u, (CblasRight, CblasUpper, CblasNoTrans, CblasUnit), b)
}

/// B <- op(T) B (left) or B op(T) (right) with the triangle T of `u` (?trmm: side, uplo, trans,
/// diag as CBLAS names them), on one thread.
fn triangular_product<T: Scalar>(
    u: MatRef<'_, T>,
    (s, t, tr, d): (
        cblas_sys::CBLAS_SIDE,
        cblas_sys::CBLAS_UPLO,
        CBLAS_TRANSPOSE,
        cblas_sys::CBLAS_DIAG,
    ),
    b: MatMut<'_, T>,
) -> Result<(), KernelError> {
    let (m, n) = (int(b.nrows())?, int(b.ncols())?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    // The triangle must be read as stored: a view that is not column-major is copied.
    let u = match blas_ref(u, Conj::No)? {
        r if matches!(r.trans, CblasNoTrans) => r,
        _ => blas_ref(u.to_owned().as_ref(), Conj::No)?,
    };
    let one = BlasScalar::new(1.0);
    set_threads(Par::Seq);
    with_col_major(b, |ptr, ldb| {
        let (up, ld) = (u.ptr, u.ld);
        let o = CblasColMajor;
        // SAFETY: u.ptr/u.ld describe a valid column-major tile of the order `s` needs, ptr/ldb the
        // exclusive m x n operand (the caller checked the shapes); both outlive the call, and the
        // routine is T's precision's.
        unsafe {
            match T::PRECISION {
                Precision::S => cblas_strmm(
                    o,
                    s,
                    t,
                    tr,
                    d,
                    m,
                    n,
                    one.single,
                    up.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
                Precision::D => cblas_dtrmm(
                    o,
                    s,
                    t,
                    tr,
                    d,
                    m,
                    n,
                    one.double,
                    up.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
                Precision::C => cblas_ctrmm(
                    o,
                    s,
                    t,
                    tr,
                    d,
                    m,
                    n,
                    &one.complex_single,
                    up.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
                Precision::Z => cblas_ztrmm(
                    o,
                    s,
                    t,
                    tr,
                    d,
                    m,
                    n,
                    &one.complex_double,
                    up.cast(),
                    ld,
                    ptr.cast(),
                    ldb,
                ),
            }
        };
        Ok(())
    })
}

/// C <- C - A A^H on the lower triangle of C (SYRK, or HERK for a complex type).
pub(crate) fn syrk<T: Scalar>(a: MatRef<'_, T>, c: MatMut<'_, T>) -> Result<(), KernelError> {
    let (n, k) = (int(a.nrows())?, int(a.ncols())?);
    if n == 0 || k == 0 {
        return Ok(());
    }
    // ?syrk/?herk's `trans` says how A is applied: NoTrans is C - A A^H with A stored
    // n x k. A real view stored transposed (k x n) needs Trans to mean the same product;
    // a complex one is copied (ConjTrans would conjugate the product).
    let a = match blas_ref(a, Conj::No)? {
        r if T::PRECISION.is_complex() && !matches!(r.trans, CblasNoTrans) => {
            blas_ref(a.to_owned().as_ref(), Conj::No)?
        }
        r => r,
    };
    set_threads(Par::Seq);
    with_col_major(c, |ptr, ldc| {
        let (ap, lda, tr) = (a.ptr, a.ld, a.trans);
        let (o, l) = (CblasColMajor, CblasLower);
        // SAFETY: a.ptr/a.ld describe the valid n x k operand, ptr/ldc the exclusive
        // n x n output; both outlive the call, and the routine is T's precision's.
        unsafe {
            match T::PRECISION {
                Precision::S => {
                    cblas_ssyrk(o, l, tr, n, k, -1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
                Precision::D => {
                    cblas_dsyrk(o, l, tr, n, k, -1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
                Precision::C => {
                    cblas_cherk(o, l, tr, n, k, -1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
                Precision::Z => {
                    cblas_zherk(o, l, tr, n, k, -1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
            }
        };
        Ok(())
    })
}

/// C <- alpha op(A) op(B) + beta C (A, B possibly transposed views, conjugated where their `Conj`
/// says so); the caller handles k = 0.
pub(crate) fn gemm<T: Scalar>(p: Product<'_, T>, c: MatMut<'_, T>) -> Result<(), KernelError> {
    set_threads(Par::Seq);
    gemm_on_current_threads(p, c)
}

fn gemm_on_current_threads<T: Scalar>(
    p: Product<'_, T>,
    c: MatMut<'_, T>,
) -> Result<(), KernelError> {
    let ((a, conj_a), (b, conj_b), alpha, beta) = (p.a, p.b, p.alpha, p.beta);
    let (m, n, k) = (int(c.nrows())?, int(c.ncols())?, int(a.ncols())?);
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let (a, b) = (blas_ref(a, conj_a)?, blas_ref(b, conj_b)?);
    let (al, be) = (BlasScalar::new(alpha), BlasScalar::new(beta));
    with_col_major(c, |ptr, ldc| {
        let (o, ta, tb) = (CblasColMajor, a.trans, b.trans);
        let (ap, lda, bp, ldb) = (a.ptr, a.ld, b.ptr, b.ld);
        // SAFETY: a, b describe valid m x k and k x n operands (shape-checked by the
        // caller), ptr/ldc the exclusive m x n output; all outlive the call, and the
        // routine is T's precision's.
        unsafe {
            match T::PRECISION {
                Precision::S => cblas_sgemm(
                    o,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    al.single,
                    ap.cast(),
                    lda,
                    bp.cast(),
                    ldb,
                    be.single,
                    ptr.cast(),
                    ldc,
                ),
                Precision::D => cblas_dgemm(
                    o,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    al.double,
                    ap.cast(),
                    lda,
                    bp.cast(),
                    ldb,
                    be.double,
                    ptr.cast(),
                    ldc,
                ),
                Precision::C => cblas_cgemm(
                    o,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    &al.complex_single,
                    ap.cast(),
                    lda,
                    bp.cast(),
                    ldb,
                    &be.complex_single,
                    ptr.cast(),
                    ldc,
                ),
                Precision::Z => cblas_zgemm(
                    o,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    &al.complex_double,
                    ap.cast(),
                    lda,
                    bp.cast(),
                    ldb,
                    &be.complex_double,
                    ptr.cast(),
                    ldc,
                ),
            }
        };
        Ok(())
    })
}

/// LAPACK ?potrf on OpenBLAS's own threads (`par`), then back to one thread.
pub(crate) fn library_potrf<T: Scalar>(a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
    with_library_threads(par, || potrf_on_current_threads(a))
}

/// ?potrf then ?potri on OpenBLAS's own threads (`par`), then back to one thread.
pub(crate) fn library_inverse<T: Scalar>(a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
    with_library_threads(par, || {
        let mut a = a;
        potrf_on_current_threads(a.as_mut())?;
        lapack_triangle(Triangle::Potri, a)
    })
}

/// ?gemm (C - A B) on OpenBLAS's own threads (`par`), then back to one thread.
pub(crate) fn library_gemm_sub<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatMut<'_, T>,
    par: Par,
) -> Result<(), KernelError> {
    with_library_threads(par, || gemm_on_current_threads(Product::subtract(a, b), c))
}

/// ?getrf of a whole square matrix on OpenBLAS's own threads (`par`), then back to one thread; the
/// first exactly zero pivot's column (info > 0), if any.
pub(crate) fn library_lu<T: Scalar>(
    a: MatMut<'_, T>,
    par: Par,
) -> Result<Option<usize>, KernelError> {
    let (m, n) = (int(a.nrows())?, int(a.ncols())?);
    if m == 0 || n == 0 {
        return Ok(None);
    }
    let mut ipiv = vec![0 as c_int; m.min(n) as usize];
    with_library_threads(par, || {
        with_col_major(a, |ptr, lda| {
            let mut info: c_int = 0;
            let (ip, info_p) = (ipiv.as_mut_ptr(), &mut info);
            // SAFETY: ptr addresses an m x n column-major matrix of T with leading dimension
            // lda, valid and exclusively borrowed for the call; ipiv holds min(m, n) ints; the
            // routine is the one of T's precision.
            unsafe {
                match T::PRECISION {
                    Precision::S => lapack_sys::sgetrf_(&m, &n, ptr.cast(), &lda, ip, info_p),
                    Precision::D => lapack_sys::dgetrf_(&m, &n, ptr.cast(), &lda, ip, info_p),
                    Precision::C => lapack_sys::cgetrf_(&m, &n, ptr.cast(), &lda, ip, info_p),
                    Precision::Z => lapack_sys::zgetrf_(&m, &n, ptr.cast(), &lda, ip, info_p),
                }
            };
            match info {
                0 => Ok(None),
                i if i > 0 => Ok(Some(i as usize - 1)),
                i => Err(KernelError::Operands {
                    op: Op::LuPanel,
                    reason: format!("{}getrf rejected argument {}", T::PRECISION, -i),
                }),
            }
        })
    })
}

/// ?geqrf of a whole matrix on OpenBLAS's own threads (`par`), with the workspace it asks for.
pub(crate) fn library_qr<T: Scalar>(a: MatMut<'_, T>, par: Par) -> Result<(), KernelError> {
    let (m, n) = (int(a.nrows())?, int(a.ncols())?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    let mut tau = vec![T::from_f64(0.0); m.min(n) as usize];
    let tau = tau.as_mut_ptr();
    with_library_threads(par, || {
        with_col_major(a, |ptr, lda| {
            let call = |work: *mut T, lwork: c_int| {
                let mut info: c_int = 0;
                // SAFETY: ptr addresses an m x n column-major matrix of T with leading dimension
                // lda, valid and exclusively borrowed for the call; tau holds min(m, n) scalars
                // and work lwork of them (or one, for the query); the routine is T's precision's.
                unsafe {
                    match T::PRECISION {
                        Precision::S => lapack_sys::sgeqrf_(
                            &m,
                            &n,
                            ptr.cast(),
                            &lda,
                            tau.cast(),
                            work.cast(),
                            &lwork,
                            &mut info,
                        ),
                        Precision::D => lapack_sys::dgeqrf_(
                            &m,
                            &n,
                            ptr.cast(),
                            &lda,
                            tau.cast(),
                            work.cast(),
                            &lwork,
                            &mut info,
                        ),
                        Precision::C => lapack_sys::cgeqrf_(
                            &m,
                            &n,
                            ptr.cast(),
                            &lda,
                            tau.cast(),
                            work.cast(),
                            &lwork,
                            &mut info,
                        ),
                        Precision::Z => lapack_sys::zgeqrf_(
                            &m,
                            &n,
                            ptr.cast(),
                            &lda,
                            tau.cast(),
                            work.cast(),
                            &lwork,
                            &mut info,
                        ),
                    }
                };
                info
            };
            let mut query = [T::from_f64(0.0)];
            call(query.as_mut_ptr(), -1);
            let lwork = (query[0].re_f64() as usize).max(n as usize).max(1);
            let mut work = vec![T::from_f64(0.0); lwork];
            match call(work.as_mut_ptr(), int(lwork)?) {
                0 => Ok(()),
                i => Err(KernelError::Operands {
                    op: Op::Geqrt,
                    reason: format!("{}geqrf rejected argument {}", T::PRECISION, -i),
                }),
            }
        })
    })
}

/// ?sytrf (?hetrf) of a whole matrix's lower triangle on OpenBLAS's threads ([`library_ldlt`]).
pub(crate) fn library_sytrf<T: Scalar>(
    a: MatMut<'_, T>,
    par: Par,
) -> Result<Option<usize>, KernelError> {
    library_ldlt(a, Indefinite::BunchKaufman, par)
}

/// ?sytrf_aa_2stage (?hetrf_aa_2stage) of a whole matrix's lower triangle on OpenBLAS's threads
/// ([`library_ldlt`]).
pub(crate) fn library_sytrf_aa<T: Scalar>(
    a: MatMut<'_, T>,
    par: Par,
) -> Result<Option<usize>, KernelError> {
    library_ldlt(a, Indefinite::AasenTwoStage, par)
}

/// Which LAPACK factorisation of a symmetric (Hermitian) indefinite matrix [`library_ldlt`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Indefinite {
    /// ?sytrf / ?hetrf: Bunch-Kaufman's diagonal pivoting, blocked.
    BunchKaufman,
    /// ?sytrf_aa_2stage / ?hetrf_aa_2stage: Aasen's in two stages (T banded, then ?gbtrf).
    AasenTwoStage,
}

/// The LAPACK factorisation `which` of the lower triangle of a whole symmetric (complex: Hermitian)
/// matrix on OpenBLAS's own threads (`par`), with the workspace it asks for; the first column whose
/// pivot is exactly zero (info > 0), if any.
fn library_ldlt<T: Scalar>(
    a: MatMut<'_, T>,
    which: Indefinite,
    par: Par,
) -> Result<Option<usize>, KernelError> {
    let n = int(a.nrows())?;
    if n == 0 {
        return Ok(None);
    }
    let mut ipiv = vec![0 as c_int; n as usize];
    let mut ipiv2 = vec![0 as c_int; n as usize];
    let (ip, ip2) = (ipiv.as_mut_ptr(), ipiv2.as_mut_ptr());
    let uplo = b'L' as c_char;
    with_library_threads(par, || {
        with_col_major(a, |ptr, lda| {
            // (work, lwork, tb, ltb): tb only for Aasen's; -1 sizes are the workspace query.
            let call = |work: *mut T, lwork: c_int, tb: *mut T, ltb: c_int| {
                let mut info: c_int = 0;
                // LAPACK's arguments in its order: uplo, n, A, lda, (Aasen's: TB, ltb,) ipiv,
                // (Aasen's: ipiv2,) work, lwork, info.
                let (u, m, a, l, q) = (&uplo, &n, ptr, &lda, &mut info);
                let (t, lt, w, lw) = (tb, &ltb, work, &lwork);
                macro_rules! lapack {
                    (bk $f:path) => {
                        $f(u, m, a.cast(), l, ip, w.cast(), lw, q)
                    };
                    (aa $f:path) => {
                        $f(u, m, a.cast(), l, t.cast(), lt, ip, ip2, w.cast(), lw, q)
                    };
                }
                // SAFETY: ptr addresses an n x n column-major matrix of T with leading dimension
                // lda, valid and exclusively borrowed for the call; ipiv and ipiv2 hold n ints,
                // work lwork scalars and tb ltb (or one each, for the query); the routine is T's
                // precision's.
                unsafe {
                    use Indefinite::{AasenTwoStage, BunchKaufman};
                    match (which, T::PRECISION) {
                        (BunchKaufman, Precision::S) => lapack!(bk lapack_sys::ssytrf_),
                        (BunchKaufman, Precision::D) => lapack!(bk lapack_sys::dsytrf_),
                        (BunchKaufman, Precision::C) => lapack!(bk lapack_sys::chetrf_),
                        (BunchKaufman, Precision::Z) => lapack!(bk lapack_sys::zhetrf_),
                        (AasenTwoStage, Precision::S) => lapack!(aa lapack_sys::ssytrf_aa_2stage_),
                        (AasenTwoStage, Precision::D) => lapack!(aa lapack_sys::dsytrf_aa_2stage_),
                        (AasenTwoStage, Precision::C) => lapack!(aa lapack_sys::chetrf_aa_2stage_),
                        (AasenTwoStage, Precision::Z) => lapack!(aa lapack_sys::zhetrf_aa_2stage_),
                    }
                };
                info
            };
            let (mut work, mut tb) = ([T::from_f64(0.0)], [T::from_f64(0.0)]);
            call(work.as_mut_ptr(), -1, tb.as_mut_ptr(), -1);
            let lwork = (work[0].re_f64() as usize).max(n as usize).max(1);
            let ltb = (tb[0].re_f64() as usize).max(4 * n as usize).max(1);
            let mut work = vec![T::from_f64(0.0); lwork];
            let mut tb = vec![T::from_f64(0.0); ltb];
            match call(work.as_mut_ptr(), int(lwork)?, tb.as_mut_ptr(), int(ltb)?) {
                0 => Ok(None),
                i if i > 0 => Ok(Some(i as usize - 1)),
                i => Err(KernelError::Operands {
                    op: Op::LuPanel,
                    reason: format!("{}sytrf ({which:?}) rejected argument {}", T::PRECISION, -i),
                }),
            }
        })
    })
}

/// ?gels ('N') of a whole m x n matrix, m >= n, and its right-hand sides on OpenBLAS's threads: the
/// least-squares solution in the first n rows of `b`. Returns the first zero diagonal entry of R
/// (info > 0), if any.
pub(crate) fn library_lstsq<T: Scalar>(
    a: MatMut<'_, T>,
    b: MatMut<'_, T>,
    par: Par,
) -> Result<Option<usize>, KernelError> {
    let (m, n, k) = (int(a.nrows())?, int(a.ncols())?, int(b.ncols())?);
    if m == 0 || n == 0 || k == 0 {
        return Ok(None);
    }
    with_library_threads(par, || {
        with_col_major(a, |pa, lda| {
            with_col_major(b, |pb, ldb| {
                let call = |work: *mut T, lwork: c_int| {
                    let mut info: c_int = 0;
                    let trans = b'N' as std::ffi::c_char;
                    // SAFETY: pa and pb address column-major m x n and m x k matrices of T with
                    // leading dimensions lda and ldb, valid and exclusively borrowed for the
                    // call; work holds lwork scalars (or one, for the query); the routine is
                    // T's precision's; dgels_ alone is declared with TRANS's length (1).
                    unsafe {
                        match T::PRECISION {
                            Precision::S => lapack_sys::sgels_(
                                &trans,
                                &m,
                                &n,
                                &k,
                                pa.cast(),
                                &lda,
                                pb.cast(),
                                &ldb,
                                work.cast(),
                                &lwork,
                                &mut info,
                            ),
                            Precision::D => lapack_sys::dgels_(
                                &trans,
                                &m,
                                &n,
                                &k,
                                pa.cast(),
                                &lda,
                                pb.cast(),
                                &ldb,
                                work.cast(),
                                &lwork,
                                &mut info,
                                1,
                            ),
                            Precision::C => lapack_sys::cgels_(
                                &trans,
                                &m,
                                &n,
                                &k,
                                pa.cast(),
                                &lda,
                                pb.cast(),
                                &ldb,
                                work.cast(),
                                &lwork,
                                &mut info,
                            ),
                            Precision::Z => lapack_sys::zgels_(
                                &trans,
                                &m,
                                &n,
                                &k,
                                pa.cast(),
                                &lda,
                                pb.cast(),
                                &ldb,
                                work.cast(),
                                &lwork,
                                &mut info,
                            ),
                        }
                    };
                    info
                };
                let mut query = [T::from_f64(0.0)];
                call(query.as_mut_ptr(), -1);
                let lwork = (query[0].re_f64() as usize).max(1);
                let mut work = vec![T::from_f64(0.0); lwork];
                match call(work.as_mut_ptr(), int(lwork)?) {
                    0 => Ok(None),
                    i if i > 0 => Ok(Some(i as usize - 1)),
                    i => Err(KernelError::Operands {
                        op: Op::Geqrt,
                        reason: format!("{}gels rejected argument {}", T::PRECISION, -i),
                    }),
                }
            })
        })
    })
}

fn with_library_threads<R>(par: Par, f: impl FnOnce() -> R) -> R {
    set_threads(par);
    let out = f();
    set_threads(Par::Seq);
    out
}

/// The inverse's tile operations (see `crate::potri`), each one sequential call.
pub(crate) fn potri<T: Scalar>(
    op: Op,
    reads: &[MatRef<'_, T>],
    write: MatMut<'_, T>,
) -> Result<(), KernelError> {
    match op {
        Op::Trtri | Op::Lauum => lapack_triangle_op(op, write),
        Op::SolveRight => triangular_solve(reads[0], CblasRight, false, -1.0, write),
        Op::TrmmAdjoint => triangular_product(
            reads[0],
            (CblasLeft, CblasLower, adjoint::<T>(), CblasNonUnit),
            write,
        ),
        Op::SyrkAdjoint => syrk_adjoint(reads[0], write),
        other => unreachable!("{other} is not an operation of the inverse"),
    }
}

/// C <- C + A^H A on the lower triangle of C (?syrk/?herk with the adjoint, A stored k x n).
fn syrk_adjoint<T: Scalar>(a: MatRef<'_, T>, c: MatMut<'_, T>) -> Result<(), KernelError> {
    let (n, k) = (int(a.ncols())?, int(a.nrows())?);
    if n == 0 || k == 0 {
        return Ok(());
    }
    // A must be column-major for the adjoint flag to mean A^H A.
    let a = match blas_ref(a, Conj::No)? {
        r if matches!(r.trans, CblasNoTrans) => r,
        _ => blas_ref(a.to_owned().as_ref(), Conj::No)?,
    };
    set_threads(Par::Seq);
    with_col_major(c, |ptr, ldc| {
        let (ap, lda, tr) = (a.ptr, a.ld, adjoint::<T>());
        let (o, l) = (CblasColMajor, CblasLower);
        // SAFETY: a.ptr/a.ld describe the valid column-major k x n operand, ptr/ldc the exclusive
        // n x n output; both outlive the call, and the routine is T's precision's.
        unsafe {
            match T::PRECISION {
                Precision::S => {
                    cblas_ssyrk(o, l, tr, n, k, 1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
                Precision::D => {
                    cblas_dsyrk(o, l, tr, n, k, 1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
                Precision::C => {
                    cblas_cherk(o, l, tr, n, k, 1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
                Precision::Z => {
                    cblas_zherk(o, l, tr, n, k, 1.0, ap.cast(), lda, 1.0, ptr.cast(), ldc)
                }
            }
        };
        Ok(())
    })
}

/// The LAPACK routines of the inverse that work on one lower triangle in place.
#[derive(Clone, Copy)]
enum Triangle {
    /// ?trtri ('L', 'N'): L <- L^-1.
    Trtri,
    /// ?lauum ('L'): L <- L^H L.
    Lauum,
    /// ?potri ('L'): the factor L <- the lower triangle of (L L^H)^-1.
    Potri,
}

/// LAPACK ?trtri ('L', 'N') or ?lauum ('L') on the lower triangle of `a`, one thread.
fn lapack_triangle_op<T: Scalar>(op: Op, a: MatMut<'_, T>) -> Result<(), KernelError> {
    set_threads(Par::Seq);
    let routine = if op == Op::Trtri {
        Triangle::Trtri
    } else {
        Triangle::Lauum
    };
    lapack_triangle(routine, a)
}

/// `routine` on the lower triangle of `a`, on OpenBLAS's current threads.
fn lapack_triangle<T: Scalar>(routine: Triangle, a: MatMut<'_, T>) -> Result<(), KernelError> {
    let n = int(a.nrows())?;
    if n == 0 {
        return Ok(());
    }
    with_col_major(a, |ptr, lda| {
        let mut info: c_int = 0;
        let (uplo, diag) = (b'L' as c_char, b'N' as c_char);
        // SAFETY: ptr addresses an n x n column-major matrix of T with leading dimension lda,
        // valid and exclusively borrowed for the call; the routine is the one of T's precision;
        // the scalars live on this stack.
        unsafe {
            let info = &mut info;
            use Precision::{C, D, S, Z};
            match (routine, T::PRECISION) {
                (Triangle::Trtri, S) => {
                    lapack_sys::strtri_(&uplo, &diag, &n, ptr.cast(), &lda, info)
                }
                (Triangle::Trtri, D) => {
                    lapack_sys::dtrtri_(&uplo, &diag, &n, ptr.cast(), &lda, info)
                }
                (Triangle::Trtri, C) => {
                    lapack_sys::ctrtri_(&uplo, &diag, &n, ptr.cast(), &lda, info)
                }
                (Triangle::Trtri, Z) => {
                    lapack_sys::ztrtri_(&uplo, &diag, &n, ptr.cast(), &lda, info)
                }
                (Triangle::Lauum, S) => lapack_sys::slauum_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Lauum, D) => lapack_sys::dlauum_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Lauum, C) => lapack_sys::clauum_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Lauum, Z) => lapack_sys::zlauum_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Potri, S) => lapack_sys::spotri_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Potri, D) => lapack_sys::dpotri_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Potri, C) => lapack_sys::cpotri_(&uplo, &n, ptr.cast(), &lda, info),
                (Triangle::Potri, Z) => lapack_sys::zpotri_(&uplo, &n, ptr.cast(), &lda, info),
            }
        };
        let (name, op) = match routine {
            Triangle::Trtri => ("trtri", Op::Trtri),
            Triangle::Lauum => ("lauum", Op::Lauum),
            Triangle::Potri => ("potri", Op::Trtri),
        };
        match info {
            0 => Ok(()),
            i if i > 0 => Err(KernelError::Singular {
                index: i as usize - 1,
            }),
            i => Err(KernelError::Operands {
                op,
                reason: format!("{}{name} rejected argument {}", T::PRECISION, -i),
            }),
        }
    })
}
