//! GMRES for one right-hand side, left-preconditioned: the inner solver of GMRES-IR (Carson and
//! Higham, "Accelerating the solution of linear systems by iterative refinement in three
//! precisions", SISC 2018), which the mixed-precision solves try where classical refinement with a
//! low-precision factor stalls ([`crate::mixed`]).
//!
//! It solves M^-1 A d = M^-1 r by Arnoldi on the preconditioned operator (modified Gram-Schmidt,
//! applied twice: the basis stays orthogonal to working precision), the least-squares problem of
//! the Hessenberg matrix by Givens rotations as the basis grows, and stops when the preconditioned
//! residual has fallen by `tolerance`, at `most` iterations, or when the Krylov space is invariant.
//! M is the low factor widened to the working precision, so M^-1 A is applied in the working
//! precision: with a factor of single precision the preconditioned matrix is well conditioned where
//! A's condition number is up to about the inverse of single's eps squared, and GMRES converges in
//! a few iterations where classical refinement diverges.
//!
//! The small dense work (basis, Hessenberg matrix, rotations) is in `c64` whatever the scalar: a
//! real problem stays real in it (every quantity it forms from real data has a zero imaginary
//! part), and one code serves the four precisions.

use faer::{Mat, MatMut, MatRef};
use hetla_kernels::{Scalar, c64};

use crate::Result;

/// What one GMRES solve did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Solved {
    /// Arnoldi steps (products with A) taken.
    pub iterations: usize,
    /// The preconditioned residual's norm at the end over its norm at the start.
    pub reduction: f64,
}

/// The correction d of A d = r (one column), by GMRES on M^-1 A d = M^-1 r from d = 0: `product(v)`
/// is A v, `precondition(v)` overwrites v with M^-1 v. Stops when the preconditioned residual has
/// fallen by `tolerance`, after `most` steps, or at an invariant Krylov space.
pub(crate) fn gmres<T: Scalar>(
    r: MatRef<'_, T>,
    product: &dyn Fn(MatRef<'_, T>) -> Result<Mat<T>>,
    precondition: &dyn Fn(MatMut<'_, T>) -> Result<()>,
    (tolerance, most): (f64, usize),
) -> Result<(Mat<T>, Solved)> {
    let n = r.nrows();
    let mut z = r.to_owned();
    precondition(z.as_mut())?;
    let z = wide(z.as_ref());
    let beta = norm(&z);
    let mut done = Solved {
        iterations: 0,
        reduction: 0.0,
    };
    if beta == 0.0 || !beta.is_finite() {
        return Ok((Mat::zeros(n, 1), done));
    }
    let mut basis = vec![scaled(&z, 1.0 / beta)];
    // Column j of the Hessenberg matrix, rotated: R's column j (j + 1 entries).
    let mut columns: Vec<Vec<c64>> = Vec::new();
    let mut rotations: Vec<(f64, c64)> = Vec::new();
    // The rotated right-hand side beta e_1.
    let mut g = vec![c64::new(beta, 0.0)];
    for j in 0..most.min(n) {
        let mut w = product(narrow::<T>(&basis[j]).as_ref())?;
        precondition(w.as_mut())?;
        let mut w = wide(w.as_ref());
        let mut h = vec![c64::new(0.0, 0.0); j + 2];
        for _ in 0..2 {
            for (i, v) in basis.iter().enumerate() {
                let dot = inner(v, &w);
                h[i] += dot;
                w.iter_mut().zip(v).for_each(|(w, v)| *w -= dot * v);
            }
        }
        let next = norm(&w);
        h[j + 1] = c64::new(next, 0.0);
        for (i, &(c, s)) in rotations.iter().enumerate() {
            let (a, b) = (h[i], h[i + 1]);
            h[i] = a * c + s * b;
            h[i + 1] = -s.conj() * a + b * c;
        }
        let (c, s) = rotation(h[j], h[j + 1]);
        h[j] = h[j] * c + s * h[j + 1];
        h.truncate(j + 1);
        rotations.push((c, s));
        g.push(-s.conj() * g[j]);
        g[j] *= c;
        columns.push(h);
        done = Solved {
            iterations: j + 1,
            reduction: g[j + 1].norm() / beta,
        };
        // An invariant space (`next` zero) solves the system exactly.
        if done.reduction <= tolerance || next <= f64::EPSILON * beta {
            break;
        }
        basis.push(scaled(&w, 1.0 / next));
    }
    // R y = g by back substitution, then d = V y.
    let k = columns.len();
    let mut y = vec![c64::new(0.0, 0.0); k];
    for i in (0..k).rev() {
        let above: c64 = (i + 1..k).map(|l| columns[l][i] * y[l]).sum();
        y[i] = (g[i] - above) / columns[i][i];
    }
    let mut d = vec![c64::new(0.0, 0.0); n];
    for (v, &y) in basis.iter().zip(&y) {
        d.iter_mut().zip(v).for_each(|(d, v)| *d += y * v);
    }
    Ok((narrow(&d), done))
}

/// The rotation (c, s), c real, with [c s; -conj(s) c] [a; b] = [r; 0].
fn rotation(a: c64, b: c64) -> (f64, c64) {
    let (abs_a, abs_b) = (a.norm(), b.norm());
    if abs_a == 0.0 {
        return (0.0, c64::new(1.0, 0.0));
    }
    let rho = abs_a.hypot(abs_b);
    (abs_a / rho, (a / abs_a) * b.conj() / rho)
}

/// sum conj(v_i) w_i.
fn inner(v: &[c64], w: &[c64]) -> c64 {
    v.iter().zip(w).map(|(v, w)| v.conj() * w).sum()
}

fn norm(v: &[c64]) -> f64 {
    v.iter().map(|x| x.norm_sqr()).sum::<f64>().sqrt()
}

fn scaled(v: &[c64], by: f64) -> Vec<c64> {
    v.iter().map(|x| x * by).collect()
}

/// A column in `c64`.
fn wide<T: Scalar>(m: MatRef<'_, T>) -> Vec<c64> {
    (0..m.nrows()).map(|i| m[(i, 0)].to_c64()).collect()
}

/// A `c64` vector as a column of `T` (the imaginary parts dropped for a real `T`).
fn narrow<T: Scalar>(v: &[c64]) -> Mat<T> {
    Mat::from_fn(v.len(), 1, |i, _| T::from_parts(v[i].re, v[i].im))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nonsymmetric complex system and a poor preconditioner (the diagonal): GMRES solves it to
    /// its tolerance within n steps, and the correction solves the system.
    #[test]
    fn gmres_solves_a_nonsymmetric_complex_system_with_a_diagonal_preconditioner() {
        let (a, r) = diagonally_dominant(40);
        let n = a.nrows();
        let product = |v: MatRef<'_, c64>| Ok(&a * v);
        let precondition = |mut v: MatMut<'_, c64>| {
            for i in 0..n {
                v[(i, 0)] /= a[(i, i)];
            }
            Ok(())
        };
        let (d, done) = gmres(r.as_ref(), &product, &precondition, (1e-12, n)).unwrap();
        assert!(done.reduction <= 1e-12 && done.iterations <= n, "{done:?}");
        let error = (&a * &d - &r).norm_max() / r.norm_max();
        assert!(error < 1e-10, "{error}");
    }

    /// With the exact inverse as preconditioner one step solves a real system, and a zero
    /// right-hand side gives a zero correction without a step.
    #[test]
    fn an_exact_preconditioner_solves_in_one_step_and_zero_needs_none() {
        let n = 12;
        let a = Mat::from_fn(n, n, |i, j| {
            if i == j {
                2.0
            } else {
                0.1 / (1.0 + (i + j) as f64)
            }
        });
        let lu = a.as_ref().partial_piv_lu();
        let product = |v: MatRef<'_, f64>| Ok(&a * v);
        let precondition = |mut v: MatMut<'_, f64>| {
            use faer::linalg::solvers::Solve;
            let x = lu.solve(v.as_ref());
            v.copy_from(&x);
            Ok(())
        };
        let r = Mat::from_fn(n, 1, |i, _| 1.0 + i as f64);
        let (d, done) = gmres(r.as_ref(), &product, &precondition, (1e-10, 5)).unwrap();
        assert_eq!(done.iterations, 1, "{done:?}");
        assert!((&a * &d - &r).norm_max() < 1e-12);
        let zero = Mat::<f64>::zeros(n, 1);
        let (d, done) = gmres(zero.as_ref(), &product, &precondition, (1e-10, 5)).unwrap();
        assert_eq!((done.iterations, d.norm_max()), (0, 0.0));
    }

    /// A nonsymmetric complex matrix with a dominant diagonal, and a right-hand side.
    fn diagonally_dominant(n: usize) -> (Mat<c64>, Mat<c64>) {
        let entry = |i: usize, j: usize| {
            let d = if i == j { 4.0 + i as f64 * 0.1 } else { 0.0 };
            let skew = 0.3 * (i as f64 - j as f64) / n as f64;
            c64::new(d + 1.0 / (1.0 + i as f64 + 2.0 * j as f64), skew)
        };
        let r = Mat::from_fn(n, 1, |i, _| c64::new(1.0, i as f64 * 0.05));
        (Mat::from_fn(n, n, entry), r)
    }
}
