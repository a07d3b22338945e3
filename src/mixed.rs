//! Mixed-precision solves: factor in single precision, refine in double (LAPACK's dsposv
//! and zcposv, MAGMA's and SLATE's `posv_mixed`).
//!
//! The matrix is rounded to single precision ([`Refinable::Low`]: `f32` for `f64`, `c32`
//! for `c64`) and factored there by the tiled Cholesky, at single precision's rate. The
//! solution of the low factor is then refined in double: each step computes the residual
//! R = B - A X on the original matrix in double (its lower triangle, as the factorisation
//! reads it), solves A D = R with the low factor, and adds D to X. Once every column's
//! residual satisfies ||r||_max <= ||x||_max ||A||_inf sqrt(n) eps (dsposv's test, eps of
//! double), it goes on while a step at least halves the largest residual, so that the
//! backward error reaches that of a solve in double rather than stopping at the test's
//! bound; it returns the solution with the smallest residual, and gives up when the test
//! is not met after [`MAX_ITERATIONS`] steps.
//!
//! It falls back to a factorisation in double, and says so in [`Refinement::path`], when:
//! an entry of A does not fit the low precision (overflow), the low factorisation meets a
//! non-positive pivot (the matrix is too ill-conditioned for single precision), or the
//! refinement does not converge (condition number beyond about 1/eps of single).

use faer::{Mat, MatRef};
use hetla_kernels::{Op, Precision, Scalar, c32, c64};

use crate::cholesky::{check_finite, check_finite_lower, direct};
use crate::{Cholesky, Error, Result};

/// The most refinement steps before falling back to double (dsposv's ITERMAX).
pub const MAX_ITERATIONS: usize = 30;

/// A double precision with a single precision to factor in: `f64` (with `f32`) and `c64`
/// (with `c32`).
pub trait Refinable: Scalar {
    /// The single precision of the same kind.
    type Low: Scalar;
    /// `self` rounded to the low precision (infinite when it overflows).
    fn lower(self) -> Self::Low;
    /// The low value, widened exactly.
    fn widen(low: Self::Low) -> Self;
}

impl Refinable for f64 {
    type Low = f32;
    fn lower(self) -> f32 {
        self as f32
    }
    fn widen(low: f32) -> f64 {
        f64::from(low)
    }
}

impl Refinable for c64 {
    type Low = c32;
    fn lower(self) -> c32 {
        c32::new(self.re as f32, self.im as f32)
    }
    fn widen(low: c32) -> c64 {
        c64::new(f64::from(low.re), f64::from(low.im))
    }
}

/// Which way a mixed-precision solve went.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "path", rename_all = "snake_case")]
pub enum RefinementPath {
    /// Factored in single precision, refined to double accuracy.
    Mixed,
    /// Factored in double after the mixed path failed, for this reason.
    Fallback {
        /// Why single precision was not enough.
        reason: String,
    },
}

/// What a mixed-precision solve did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Refinement {
    /// The path taken.
    #[serde(flatten)]
    pub path: RefinementPath,
    /// Refinement steps done in the mixed path (before a fallback, when there was one).
    pub iterations: usize,
    /// The precision the matrix was factored in last.
    pub factored_in: Precision,
}

impl Cholesky {
    /// Solves A X = B (A Hermitian positive definite, its lower triangle read) to double
    /// accuracy, factoring in single precision when that suffices (see [`crate::mixed`]):
    /// the solution and what was done.
    ///
    /// ```
    /// use faer::Mat;
    /// let n = 300;
    /// let a = Mat::from_fn(n, n, |i, j| if i == j { 4.0 } else { 1.0 / (1.0 + (i + j) as f64) });
    /// let b = Mat::<f64>::ones(n, 2);
    /// let (x, how) = hetla::Cholesky::new().solve_refined(a.as_ref(), b.as_ref())?;
    /// assert_eq!(how.path, hetla::RefinementPath::Mixed);
    /// assert!(how.iterations <= 3);
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn solve_refined<T: Refinable>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
    ) -> Result<(Mat<T>, Refinement)> {
        let n = a.nrows();
        if a.ncols() != n {
            return Err(Error::NotSquare {
                what: "A",
                rows: n,
                cols: a.ncols(),
            });
        }
        if b.nrows() != n {
            return Err(Error::DimensionMismatch { n, rows: b.nrows() });
        }
        check_finite_lower("A", a)?;
        check_finite("B", b)?;
        let platform = self.resolve_platform()?;
        let cluster = self.clone().platform(platform.clone());
        let (low, overflow) = lowered(a);
        let mut iterations = 0;
        let reason = match overflow {
            Some((i, j)) => format!(
                "A({i}, {j}) = {:e} overflows {}",
                a[(i, j)].abs_f64(),
                T::Low::PRECISION
            ),
            None => match cluster.factor_owned(low) {
                Err(Error::NotPositiveDefinite { column }) => format!(
                    "the {} factorisation met a non-positive pivot at column {column}",
                    T::Low::PRECISION
                ),
                Err(other) => return Err(other),
                Ok(factor) => {
                    let bound = a_norm(a) * (n as f64).sqrt() * T::PRECISION.epsilon();
                    let mut x = Mat::<T>::zeros(n, b.ncols());
                    let mut r = b.to_owned();
                    // The solution with the smallest residual so far, and that residual.
                    let mut best: Option<(Mat<T>, f64)> = None;
                    let mut met = false;
                    loop {
                        let d = factor.solve(lowered(r.as_ref()).0.as_ref())?;
                        faer::zip!(x.as_mut(), d.as_ref())
                            .for_each(|faer::unzip!(x, d)| *x = *x + T::widen(*d));
                        r = residual(&platform, a, x.as_ref(), b)?;
                        let norm = max_abs(r.as_ref());
                        let halved = best.as_ref().is_none_or(|(_, b)| norm <= b / 2.0);
                        if best.as_ref().is_none_or(|(_, b)| norm < *b) {
                            best = Some((x.clone(), norm));
                        }
                        met |= converged(r.as_ref(), x.as_ref(), bound);
                        if met && (!halved || iterations == MAX_ITERATIONS) {
                            let how = Refinement {
                                path: RefinementPath::Mixed,
                                iterations,
                                factored_in: T::Low::PRECISION,
                            };
                            let (x, _) = best.expect("set by the first step");
                            return Ok((x, how));
                        }
                        if iterations == MAX_ITERATIONS {
                            break format!(
                                "the refinement did not converge in {MAX_ITERATIONS} steps"
                            );
                        }
                        iterations += 1;
                    }
                }
            },
        };
        let x = cluster.factor(a)?.solve(b)?;
        let how = Refinement {
            path: RefinementPath::Fallback { reason },
            iterations,
            factored_in: T::PRECISION,
        };
        Ok((x, how))
    }
}

/// Solves the SPD (Hermitian positive definite) system A X = B to double accuracy with
/// default options, factoring in single precision when that suffices
/// ([`Cholesky::solve_refined`]).
pub fn solve_spd_mixed<T: Refinable>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<(Mat<T>, Refinement)> {
    Cholesky::new().solve_refined(a, b)
}

/// `m` rounded to the low precision, and the first entry (column by column, lower triangle
/// for a square matrix) that overflowed, if any.
fn lowered<T: Refinable>(m: MatRef<'_, T>) -> (Mat<T::Low>, Option<(usize, usize)>) {
    let mut overflow = None;
    let low = Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
        let x = m[(i, j)].lower();
        if overflow.is_none() && !x.finite() && (m.nrows() != m.ncols() || i >= j) {
            overflow = Some((i, j));
        }
        x
    });
    (low, overflow)
}

/// ||A||_inf of the Hermitian A whose lower triangle is given (the largest row sum of
/// absolute values).
fn a_norm<T: Scalar>(a: MatRef<'_, T>) -> f64 {
    let n = a.nrows();
    let mut rows = vec![0.0_f64; n];
    for j in 0..n {
        for i in j..n {
            let v = a[(i, j)].abs_f64();
            rows[i] += v;
            if i != j {
                rows[j] += v;
            }
        }
    }
    rows.into_iter().fold(0.0, f64::max)
}

/// The largest modulus of an entry.
fn max_abs<T: Scalar>(m: MatRef<'_, T>) -> f64 {
    let mut max = 0.0_f64;
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            max = max.max(m[(i, j)].abs_f64());
        }
    }
    max
}

/// Whether every column's residual is small: ||r_j||_max <= ||x_j||_max * bound.
fn converged<T: Scalar>(r: MatRef<'_, T>, x: MatRef<'_, T>, bound: f64) -> bool {
    let col_max = |m: MatRef<'_, T>, j: usize| {
        (0..m.nrows())
            .map(|i| m[(i, j)].abs_f64())
            .fold(0.0, f64::max)
    };
    (0..r.ncols()).all(|j| col_max(r, j) <= col_max(x, j) * bound)
}

/// Columns of A per block of the residual's products.
const RESIDUAL_BLOCK: usize = 512;

/// R = B - A X for the Hermitian A whose lower triangle is given, in A's precision, by
/// blocks of columns: each diagonal block made whole (it is small), the blocks below it
/// applied as themselves and as their adjoints. On the platform's first CPU cluster.
pub(crate) fn residual<T: Scalar>(
    platform: &crate::Platform,
    a: MatRef<'_, T>,
    x: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<Mat<T>> {
    let n = a.nrows();
    let mut r = b.to_owned();
    let flops = 2.0 * (n * n * x.ncols()) as f64 * T::PRECISION.flop_factor();
    let products = |backend: hetla_kernels::Backend, par: hetla_kernels::Par, r: &mut Mat<T>| {
        for j0 in (0..n).step_by(RESIDUAL_BLOCK) {
            let w = RESIDUAL_BLOCK.min(n - j0);
            let diag = Mat::from_fn(w, w, |i, j| {
                if i >= j {
                    a[(j0 + i, j0 + j)]
                } else {
                    let v = a[(j0 + j, j0 + i)].to_c64().conj();
                    T::from_parts(v.re, v.im)
                }
            });
            let xj = x.subrows(j0, w);
            backend.run(
                Op::Update,
                &[diag.as_ref(), xj],
                r.as_mut().subrows_mut(j0, w),
                par,
            )?;
            let rest = n - j0 - w;
            if rest > 0 {
                let below = a.submatrix(j0 + w, j0, rest, w);
                let r_rest = r.as_mut().subrows_mut(j0 + w, rest);
                backend.run(Op::Update, &[below, xj], r_rest, par)?;
                let x_rest = x.subrows(j0 + w, rest);
                let r_j = r.as_mut().subrows_mut(j0, w);
                backend.run(Op::UpdateTrans, &[below, x_rest], r_j, par)?;
            }
        }
        Ok::<_, hetla_kernels::KernelError>(())
    };
    match direct(platform, flops, |backend, par| {
        products(backend, par, &mut r)
    }) {
        Some(result) => result?,
        // No CPU cluster: the products run on the calling thread.
        None => products(platform.backend(), hetla_kernels::Par::Seq, &mut r)?,
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_residual_uses_the_hermitian_matrix_of_the_lower_triangle() {
        let n = 700;
        let full = Mat::from_fn(n, n, |i, j| {
            let (lo, hi) = (i.min(j), i.max(j));
            let re = 1.0 / (1.0 + (lo + 2 * hi) as f64);
            let im = if i > j {
                0.25 / (1.0 + hi as f64)
            } else if i < j {
                -0.25 / (1.0 + hi as f64)
            } else {
                0.0
            };
            c64::new(re, im)
        });
        // Junk in the strict upper triangle of what the residual is given.
        let lower = Mat::from_fn(n, n, |i, j| {
            if i >= j {
                full[(i, j)]
            } else {
                c64::new(9.0, 9.0)
            }
        });
        let x = Mat::from_fn(n, 2, |i, j| c64::new((i + j) as f64 * 0.01, 1.0));
        let b = Mat::from_fn(n, 2, |i, _| c64::new(i as f64, -1.0));
        let platform = Cholesky::new().threads(1).resolve_platform().unwrap();
        let r = residual(&platform, lower.as_ref(), x.as_ref(), b.as_ref()).unwrap();
        let want = &b - &full * &x;
        let err = (&r - &want).norm_max();
        assert!(err < 1e-10, "{err}");
    }
}
