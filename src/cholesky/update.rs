//! Rank-k changes of a factored matrix: A + W W^H ([`Factor::update`]) and A - W W^H
//! ([`Factor::downdate`]), each in O(n^2 k) on the factor instead of O(n^3) for a new one.
//!
//! - **Update**, one column w at a time: [L w] times a unitary matrix that rotates w into L column
//!   by column (a Givens rotation in the plane of column j and w zeroes w_j), which keeps L L^H + w
//!   w^H. Always defined: L_jj grows.
//! - **Downdate**, LINPACK's ?chdd (Saunders' method): p = L^-1 w first; A - w w^H = L (I - p p^H)
//!   L^H is positive definite exactly when ||p||_2 < 1, so definiteness is decided before the
//!   factor is touched. Then rotations built from p (bottom up) carry [L; 0] into [L'; w^H]. Unlike
//!   hyperbolic rotations, these are unitary, so the downdate is stable.
//!
//! Each pass walks the lower triangle column by column (contiguous in a column-major factor): the
//! cost of a rank-1 change is that of reading and writing L once, on the calling thread.

use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Mat, MatRef, Par};
use hetla_kernels::Scalar;

use super::Factor;
use crate::check::check_finite;
use crate::interop::Matrix;
use crate::{Error, Result};

fn conj<T: Scalar>(x: T) -> T {
    T::conj_impl(&x)
}

impl<T: Scalar> Factor<T> {
    /// Turns this factor of A into the factor of A + W W^H (W^T for a real type), where W is n x k:
    /// k rank-1 updates, each one pass over L (O(n^2)), on the calling thread. ||A||_1 is estimated
    /// from then on (see [`Factor::norm1`]).
    ///
    /// Errors (the factor unchanged): W with another number of rows than n, or a non-finite entry.
    pub fn update<W: Matrix<Elem = T>>(&mut self, w: W) -> Result<()> {
        let w = w.view();
        self.check_change("W", w)?;
        let n = self.n();
        let mut work = vec![T::from_f64(0.0); n];
        for column in 0..w.ncols() {
            work.iter_mut()
                .zip(w.col(column).iter())
                .for_each(|(x, &v)| *x = v);
            update_rank_one(&mut self.l, &mut work);
        }
        if w.ncols() > 0 {
            self.norm = None;
        }
        Ok(())
    }

    /// Turns this factor of A into the factor of A - W W^H (W^T for a real type), where W is n x k:
    /// k rank-1 downdates, each a triangular solve and one pass over L (O(n^2)). For k > 1 the
    /// factor is copied first (n^2 entries), so that it can be restored.
    ///
    /// Errors, each with the factor unchanged: [`Error::DowndateNotPositiveDefinite`] when A - W
    /// W^H is not numerically positive definite (the column of W at which it fails); W with another
    /// number of rows than n, or a non-finite entry.
    pub fn downdate<W: Matrix<Elem = T>>(&mut self, w: W) -> Result<()> {
        let w = w.view();
        self.check_change("W", w)?;
        let backup = (w.ncols() > 1).then(|| self.l.clone());
        for column in 0..w.ncols() {
            if let Err(error) = downdate_rank_one(&mut self.l, w.col(column).as_mat(), column) {
                if let Some(backup) = backup {
                    self.l = backup;
                }
                return Err(error);
            }
        }
        if w.ncols() > 0 {
            self.norm = None;
        }
        Ok(())
    }

    fn check_change(&self, what: &'static str, w: MatRef<'_, T>) -> Result<()> {
        crate::check::check_rows(self.n(), w.nrows())?;
        check_finite(what, w)
    }
}

/// L <- the factor of L L^H + w w^H (w is overwritten).
fn update_rank_one<T: Scalar>(l: &mut Mat<T>, w: &mut [T]) {
    let n = l.nrows();
    for k in 0..n {
        let column = &mut l.col_as_slice_mut(k)[k..];
        let a = column[0].re_f64();
        let b = w[k];
        let r = a.hypot(b.abs_f64());
        // The rotation [c -s; conj(s) c] on (column k, w), c real: column k's head becomes r,
        // w_k becomes 0.
        let c = T::from_f64(a / r);
        let s = b * T::from_f64(1.0 / r);
        let sc = conj(s);
        column[0] = T::from_f64(r);
        for (x, y) in column[1..].iter_mut().zip(&mut w[k + 1..]) {
            let (lx, wy) = (*x, *y);
            *x = c * lx + sc * wy;
            *y = c * wy - s * lx;
        }
    }
}

/// L <- the factor of L L^H - w w^H (w is column `column` of the caller's W, for the error), or the
/// error with L unchanged.
fn downdate_rank_one<T: Scalar>(l: &mut Mat<T>, w: MatRef<'_, T>, column: usize) -> Result<()> {
    let n = l.nrows();
    let mut p = w.to_owned();
    solve_lower_triangular_in_place(l.as_ref(), p.as_mut(), Par::Seq);
    let p: Vec<T> = p.col(0).iter().copied().collect();
    let squared: f64 = p.iter().map(|v| v.abs_f64().powi(2)).sum();
    if squared.is_nan() || squared >= 1.0 {
        return Err(Error::DowndateNotPositiveDefinite {
            column,
            norm: squared.sqrt(),
        });
    }
    // The rotations that carry (p, alpha) into (0, 1), from the bottom up (?chdd).
    let mut alpha = (1.0 - squared).sqrt();
    let mut cosines = vec![0.0_f64; n];
    let mut sines = vec![T::from_f64(0.0); n];
    for i in (0..n).rev() {
        let scale = alpha + p[i].abs_f64();
        let a = alpha / scale;
        let b = p[i] * T::from_f64(1.0 / scale);
        let norm = a.hypot(b.abs_f64());
        cosines[i] = a / norm;
        sines[i] = conj(b) * T::from_f64(1.0 / norm);
        alpha = scale * norm;
    }
    // Applied to the columns of L from the last, carrying y (row j's part of the new last row).
    let mut y = vec![T::from_f64(0.0); n];
    for i in (0..n).rev() {
        let c = T::from_f64(cosines[i]);
        let s = sines[i];
        let sc = conj(s);
        let column = &mut l.col_as_slice_mut(i)[i..];
        for (x, carried) in column.iter_mut().zip(&mut y[i..]) {
            let (lx, yy) = (*x, *carried);
            *x = c * lx - s * yy;
            *carried = c * yy + sc * lx;
        }
    }
    Ok(())
}
