//! The 1-norm estimates behind [`Factor::rcond`](crate::Factor::rcond),
//! [`Factor::norm1`](crate::Factor::norm1) and [`LuFactor::rcond`](crate::LuFactor::rcond): Hager's
//! method as refined by Higham (Higham, "FORTRAN codes for estimating the one-norm of a real or
//! complex matrix", ACM TOMS 14, 1988), step for step as LAPACK's ?lacn2, so that hetla's rcond
//! equals ?pocon's on the same factor.
//!
//! The estimator sees the matrix B only through products x <- B x and x <- B^H x (the second
//! argument of `apply` says which); for a Hermitian B (A^-1 or A = L L^H of Cholesky) both are the
//! same call, for LU's A^-1 the second solves with A^H. Real types follow dlacn2 (sign vectors,
//! with its test for a repeated sign vector), complex ones zlacn2 (x_i / |x_i|).

use faer::{Mat, MatMut, MatRef, Par};
use hetla_kernels::Scalar;

use crate::Result;

/// ?lacn2's ITMAX: at most this many steps of the power-like iteration.
const MAX_STEPS: usize = 5;

/// An estimate of ||B||_1 for the B of order `n >= 1` that `apply(x, false)` multiplies a column by
/// in place, and `apply(x, true)` multiplies by B^H.
pub(crate) fn estimate_norm1<T: Scalar>(
    n: usize,
    mut apply: impl FnMut(MatMut<'_, T>, bool) -> Result<()>,
) -> Result<f64> {
    if n == 0 {
        return Ok(0.0);
    }
    let complex = T::PRECISION.is_complex();
    let mut x = Mat::<T>::from_fn(n, 1, |_, _| T::from_f64(1.0 / n as f64));
    let abs = |v: T| v.abs_f64();
    let sum = |x: &Mat<T>| x.col(0).iter().map(|&v| abs(v)).sum::<f64>();
    // The first index of the largest |x_i| (BLAS i?amax; LAPACK's izmax1 for complex x).
    let argmax = |x: &Mat<T>| {
        let mut best = (0, f64::NEG_INFINITY);
        for (i, &v) in x.col(0).iter().enumerate() {
            if abs(v) > best.1 {
                best = (i, abs(v));
            }
        }
        best.0
    };
    // The signs of x: +-1 for a real x (>= 0 counts as +), x_i / |x_i| for a complex one.
    let signs = |x: &Mat<T>| -> Mat<T> {
        Mat::from_fn(n, 1, |i, _| {
            let v = x[(i, 0)];
            if complex {
                let a = abs(v);
                if a > f64::MIN_POSITIVE {
                    v * T::from_f64(1.0 / a)
                } else {
                    T::from_f64(1.0)
                }
            } else {
                T::from_f64(if v.re_f64() >= 0.0 { 1.0 } else { -1.0 })
            }
        })
    };
    apply(x.as_mut(), false)?;
    if n == 1 {
        return Ok(abs(x[(0, 0)]));
    }
    let mut estimate = sum(&x);
    let mut sign = signs(&x);
    x.copy_from(&sign);
    apply(x.as_mut(), true)?;
    let mut j = argmax(&x);
    let mut steps = 2;
    loop {
        x.fill(T::from_f64(0.0));
        x[(j, 0)] = T::from_f64(1.0);
        apply(x.as_mut(), false)?;
        let previous = estimate;
        estimate = sum(&x);
        let new_sign = signs(&x);
        // dlacn2: a repeated sign vector means convergence.
        if !complex && new_sign == sign {
            break;
        }
        if estimate <= previous {
            break;
        }
        sign = new_sign;
        x.copy_from(&sign);
        apply(x.as_mut(), true)?;
        let last = j;
        j = argmax(&x);
        let moved = if complex {
            abs(x[(last, 0)]) != abs(x[(j, 0)])
        } else {
            x[(last, 0)].re_f64() != abs(x[(j, 0)])
        };
        if !(moved && steps < MAX_STEPS) {
            break;
        }
        steps += 1;
    }
    // Higham's alternating vector guards against the iteration's worst cases.
    let mut alternating = 1.0;
    for i in 0..n {
        x[(i, 0)] = T::from_f64(alternating * (1.0 + i as f64 / (n - 1) as f64));
        alternating = -alternating;
    }
    apply(x.as_mut(), false)?;
    let guard = 2.0 * (sum(&x) / (3 * n) as f64);
    Ok(estimate.max(guard))
}

/// x <- L (L^H x) for the lower triangle of `l`: a product with A = L L^H in O(n^2).
pub(crate) fn apply_product<T: Scalar>(l: MatRef<'_, T>, mut x: MatMut<'_, T>) {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul_with_conj};
    let rect = BlockStructure::Rectangular;
    let conj = if T::PRECISION.is_complex() {
        faer::Conj::Yes
    } else {
        faer::Conj::No
    };
    let mut y = Mat::<T>::zeros(x.nrows(), x.ncols());
    let one = T::from_f64(1.0);
    matmul_with_conj(
        y.as_mut(),
        rect,
        faer::Accum::Replace,
        l.transpose(),
        BlockStructure::TriangularUpper,
        conj,
        x.as_ref(),
        rect,
        faer::Conj::No,
        one,
        Par::Seq,
    );
    matmul_with_conj(
        x.as_mut(),
        rect,
        faer::Accum::Replace,
        l,
        BlockStructure::TriangularLower,
        faer::Conj::No,
        y.as_ref(),
        rect,
        faer::Conj::No,
        one,
        Par::Seq,
    );
}

/// The reciprocal condition number 1 / (||A||_1 ||A^-1||_1) from `norm` = ||A||_1 and `inverse`, an
/// estimate of ||A^-1||_1 ([`estimate_norm1`]); 0 when the estimate is 0 (LAPACK's ?gecon and
/// ?pocon).
pub(crate) fn reciprocal(inverse: f64, norm: f64) -> f64 {
    if inverse == 0.0 {
        0.0
    } else {
        (1.0 / inverse) / norm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact 1-norm of a small dense matrix.
    fn norm1<T: Scalar>(b: MatRef<'_, T>) -> f64 {
        (0..b.ncols())
            .map(|j| (0..b.nrows()).map(|i| b[(i, j)].abs_f64()).sum::<f64>())
            .fold(0.0, f64::max)
    }

    fn estimate_of<T: Scalar>(b: MatRef<'_, T>) -> f64 {
        estimate_norm1(b.nrows(), |mut x, adjoint| {
            let y = if adjoint {
                b.adjoint() * x.as_ref()
            } else {
                b * x.as_ref()
            };
            x.copy_from(&y);
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn the_estimate_of_a_general_matrix_uses_its_adjoint_and_stays_below_the_norm() {
        for seed in 0..5 {
            let a = crate::matgen::random_conditioned::<f64>(40, 1e3, seed);
            let (exact, estimate) = (norm1(a.as_ref()), estimate_of(a.as_ref()));
            assert!(estimate <= exact * (1.0 + 1e-12), "{estimate} > {exact}");
            assert!(estimate >= exact / 3.0, "{estimate} << {exact}");
        }
    }

    #[test]
    fn the_estimate_is_exact_on_a_diagonal_and_close_on_hermitian_matrices() {
        let d = Mat::<f64>::from_fn(7, 7, |i, j| if i == j { (i + 1) as f64 } else { 0.0 });
        assert_eq!(estimate_of(d.as_ref()), 7.0);
        for seed in 0..5 {
            let a = crate::matgen::random_spd(40, seed);
            let (exact, estimate) = (norm1(a.as_ref()), estimate_of(a.as_ref()));
            // Never above the norm (it is the norm of some B x with ||x||_1 = 1), rarely far below.
            assert!(estimate <= exact * (1.0 + 1e-12), "{estimate} > {exact}");
            assert!(estimate >= exact / 3.0, "{estimate} << {exact}");
            let z = crate::matgen::random_hpd::<hetla_kernels::c64>(30, seed);
            let (exact, estimate) = (norm1(z.as_ref()), estimate_of(z.as_ref()));
            assert!(estimate <= exact * (1.0 + 1e-12) && estimate >= exact / 3.0);
        }
        let one = Mat::<f32>::from_fn(1, 1, |_, _| -2.5);
        assert_eq!(estimate_of(one.as_ref()), 2.5);
    }

    #[test]
    fn the_product_with_the_factor_is_l_times_l_adjoint() {
        let l = Mat::<hetla_kernels::c64>::from_fn(5, 5, |i, j| {
            if i >= j {
                hetla_kernels::c64::new((i + j + 1) as f64, i as f64 - j as f64)
            } else {
                // Storage above the diagonal is never read.
                hetla_kernels::c64::new(f64::NAN, 0.0)
            }
        });
        let lower = Mat::from_fn(5, 5, |i, j| {
            if i >= j {
                l[(i, j)]
            } else {
                hetla_kernels::c64::new(0.0, 0.0)
            }
        });
        let x = Mat::from_fn(5, 2, |i, j| {
            hetla_kernels::c64::new(i as f64, j as f64 + 1.0)
        });
        let mut y = x.clone();
        apply_product(l.as_ref(), y.as_mut());
        let expected = &lower * (lower.adjoint() * &x);
        assert!((&y - &expected).norm_max() < 1e-12 * expected.norm_max());
    }
}
