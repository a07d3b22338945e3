//! The Bunch-Kaufman factorisation of A in double precision (faer's L B L^H: B block diagonal with
//! 1 x 1 and 2 x 2 blocks, LAPACK's ?sytrf) that an [`LdltFactor`](super::LdltFactor) falls back on
//! where its block Aasen factor is too far from A: A's inertia when the factor is not certified
//! near A, and the solves whose refinement with it stalls above LAPACK's backward error (a KKT
//! matrix of order 4000 in f32 or c32: cond(A) times the factor's backward error is beyond 1, so
//! refinement with it cannot converge). Bunch-Kaufman's B does not grow as the block Aasen's T
//! does, and a double-precision factor solves a single-precision A to single precision's rounding.
//!
//! Made once per factor, when first needed: n^3/3 flops in double and a copy of A in double.

use faer::linalg::solvers::{Lblt, Solve};
use faer::reborrow::*;
use faer::{Mat, MatMut, MatRef};
use hetla_kernels::{Precision, Scalar, c64};

use super::band::Inertia;

/// A's Bunch-Kaufman factor in double precision: f64 for a real type, c64 for a complex one.
#[derive(Debug, Clone)]
pub(crate) enum Pivoted {
    Real(Lblt<f64>),
    Complex(Lblt<c64>),
}

impl Pivoted {
    /// The factor of the Hermitian matrix whose lower triangle is `a`'s (its diagonal's imaginary
    /// parts taken as zero), on the global parallelism.
    pub fn of<T: Scalar>(a: MatRef<'_, T>) -> Self {
        let n = a.nrows();
        let entry = |i: usize, j: usize| {
            let z = a[(i, j)].to_c64();
            if i == j { c64::new(z.re, 0.0) } else { z }
        };
        if T::PRECISION.is_complex() {
            Pivoted::Complex(hetla_kernels::bunch_kaufman_complex(Mat::from_fn(
                n, n, entry,
            )))
        } else {
            Pivoted::Real(hetla_kernels::bunch_kaufman_real(Mat::from_fn(
                n,
                n,
                |i, j| entry(i, j).re,
            )))
        }
    }

    /// The precision the factor is in: f64 or c64.
    pub fn precision(&self) -> Precision {
        match self {
            Pivoted::Real(_) => Precision::D,
            Pivoted::Complex(_) => Precision::Z,
        }
    }

    /// A's inertia from B's blocks (Sylvester's law: L B L^H is a congruence): a 1 x 1 block's
    /// sign; a 2 x 2 block [d s^*; s e] one of each sign when its determinant is negative, else
    /// twice its trace's sign (a zero eigenvalue where the determinant is zero).
    pub fn inertia(&self) -> Inertia {
        let (diag, subdiag): (Vec<f64>, Vec<c64>) = match self {
            Pivoted::Real(f) => (
                f.B_diag().column_vector().iter().copied().collect(),
                f.B_subdiag()
                    .column_vector()
                    .iter()
                    .map(|&s| c64::new(s, 0.0))
                    .collect(),
            ),
            Pivoted::Complex(f) => (
                f.B_diag().column_vector().iter().map(|d| d.re).collect(),
                f.B_subdiag().column_vector().iter().copied().collect(),
            ),
        };
        let mut counts = Inertia {
            positive: 0,
            negative: 0,
            zero: 0,
        };
        let mut sign = |x: f64| match x.partial_cmp(&0.0) {
            Some(std::cmp::Ordering::Greater) => counts.positive += 1,
            Some(std::cmp::Ordering::Less) => counts.negative += 1,
            _ => counts.zero += 1,
        };
        let n = diag.len();
        let mut i = 0;
        while i < n {
            let (d, s) = (diag[i], subdiag[i]);
            if i + 1 < n && s.norm() != 0.0 {
                let e = diag[i + 1];
                let det = d * e - s.norm_sqr();
                if det < 0.0 {
                    sign(1.0);
                    sign(-1.0);
                } else {
                    sign(d + e);
                    sign(if det > 0.0 { d + e } else { 0.0 });
                }
                i += 2;
            } else {
                sign(d);
                i += 1;
            }
        }
        counts
    }

    /// B <- A^-1 B: B widened to double, solved there, rounded back to T.
    pub fn solve<T: Scalar>(&self, mut b: MatMut<'_, T>) {
        let (n, k) = (b.nrows(), b.ncols());
        match self {
            Pivoted::Real(f) => {
                let mut x = Mat::<f64>::from_fn(n, k, |i, j| b[(i, j)].to_c64().re);
                f.solve_in_place(x.as_mut());
                faer::zip!(b.rb_mut(), x.as_ref())
                    .for_each(|faer::unzip!(b, x)| *b = T::from_f64(*x));
            }
            Pivoted::Complex(f) => {
                let mut x = Mat::<c64>::from_fn(n, k, |i, j| b[(i, j)].to_c64());
                f.solve_in_place(x.as_mut());
                faer::zip!(b.rb_mut(), x.as_ref())
                    .for_each(|faer::unzip!(b, x)| *b = T::from_parts(x.re, x.im));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On Q diag(d) Q^H of order 40 (14 negative eigenvalues, 26 positive): the inertia exact, and
    /// a solve through the double-precision factor at the working precision's rounding (a single
    /// precision A solved to single precision), in every precision.
    fn known_spectrum<T: Scalar>() {
        let n = 40;
        let d: Vec<f64> = (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    -1.0 - i as f64
                } else {
                    0.5 + i as f64
                }
            })
            .collect();
        let g: Mat<T> = crate::matgen::random_in(n, n, 3);
        let q = g.qr().compute_Q();
        let scaled = Mat::from_fn(n, n, |i, j| q[(i, j)] * T::from_f64(d[j]));
        let a = &scaled * q.adjoint();
        let factor = Pivoted::of(a.as_ref());
        let inertia = factor.inertia();
        let negative = d.iter().filter(|x| **x < 0.0).count();
        assert_eq!(
            (inertia.positive, inertia.negative, inertia.zero),
            (n - negative, negative, 0),
            "{}",
            T::PRECISION
        );
        let b: Mat<T> = crate::matgen::random_in(n, 2, 6);
        let mut x = b.clone();
        factor.solve(x.as_mut());
        let error = crate::check::backward_error(a.as_ref(), x.as_ref(), b.as_ref());
        assert!(error < 1.0, "{}: {error}", T::PRECISION);
    }

    #[test]
    fn bunch_kaufman_gives_the_inertia_and_solves_in_every_precision() {
        for precision in Precision::ALL {
            hetla_kernels::with_scalar!(precision, T => known_spectrum::<T>());
        }
    }
}
