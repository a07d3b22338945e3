//! Helpers shared by the integration tests (each test file that uses them declares `mod common;`).
#![allow(dead_code)] // Each test file uses some of them.

/// LAPACK's condition estimates, from the LAPACK that OpenBLAS bundles: the reference a factor's
/// `rcond` is held to.
#[cfg(feature = "openblas")]
pub mod lapack {
    use faer::MatRef;

    /// Declares LAPACK's ?xxcon routines of one signature: (norm or triangle, n, the factor, its
    /// leading dimension, ||A||_1, the estimate out, work, integer work, info).
    macro_rules! condition_estimates {
        ($($name:ident),*) => {
            unsafe extern "C" {
                $(fn $name(which: *const u8, n: *const i32, a: *const f64, lda: *const i32,
                    anorm: *const f64, rcond: *mut f64, work: *mut f64, iwork: *mut i32,
                    info: *mut i32);)*
            }
        };
    }
    condition_estimates!(dgecon_, dpocon_);

    type Con = unsafe extern "C" fn(
        *const u8,
        *const i32,
        *const f64,
        *const i32,
        *const f64,
        *mut f64,
        *mut f64,
        *mut i32,
        *mut i32,
    );

    /// dgecon's estimate of 1 / cond_1(A) from the LU factors `lu` (as dgetrf leaves them).
    pub fn dgecon(lu: MatRef<'_, f64>, anorm: f64) -> f64 {
        con(dgecon_, b'1', lu, anorm)
    }

    /// dpocon's estimate of 1 / cond_1(A) from the lower Cholesky factor `l`.
    pub fn dpocon(l: MatRef<'_, f64>, anorm: f64) -> f64 {
        con(dpocon_, b'L', l, anorm)
    }

    fn con(routine: Con, which: u8, factor: MatRef<'_, f64>, anorm: f64) -> f64 {
        let n = factor.nrows();
        assert_eq!((factor.ncols(), factor.row_stride()), (n, 1));
        let (mut rcond, mut info) = (0.0, 0);
        // dgecon needs 4n reals, dpocon 3n; both n integers.
        let mut work = vec![0.0; 4 * n];
        let mut iwork = vec![0; n];
        let (n32, lda) = (n as i32, factor.col_stride().max(1) as i32);
        // SAFETY: factor is a column-major n x n matrix with unit row stride and column stride
        // lda >= n (checked above and by faer's layout), work and iwork have the sizes the routine
        // needs, and every pointer outlives the call.
        unsafe {
            routine(
                &which,
                &n32,
                factor.as_ptr(),
                &lda,
                &anorm,
                &mut rcond,
                work.as_mut_ptr(),
                iwork.as_mut_ptr(),
                &mut info,
            );
        }
        assert_eq!(info, 0);
        rcond
    }
}

/// Asserts that `builder` refuses `a` as not positive definite at `column` (`context` names the
/// case in the failure).
pub fn assert_not_positive_definite_at(
    builder: hetla::Cholesky,
    a: &faer::Mat<f64>,
    column: usize,
    context: &str,
) {
    let err = builder.factor(a.as_ref()).unwrap_err();
    assert_eq!(
        err,
        hetla::Error::NotPositiveDefinite { column },
        "{context}"
    );
}
