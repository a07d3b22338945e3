//! The Bunch-Kaufman factorisation with its factors made explicit (scipy's `ldl`): P A P^T = L D
//! L^* for a Hermitian (L^* = L^H) or complex symmetric (L^* = L^T) A given by its lower triangle,
//! D block diagonal with 1 x 1 and 2 x 2 blocks, L unit lower triangular with every interchange
//! applied to it (as an LU's L), P a permutation.
//!
//! LAPACK's unblocked ?sytf2/?hetf2 in lower form, in its own words: at column k, with alpha = (1 +
//! sqrt 17) / 8 (the growth-minimising constant), |a_kk| against the column's largest off-diagonal
//! entry |a_rk| (row r) picks a 1 x 1 pivot a_kk; else row r's largest off-diagonal entry in the
//! trailing matrix decides between a_kk still, a_rr alone (rows and columns k and r swapped) or the
//! 2 x 2 block of k and r (r swapped into k + 1). Magnitudes are LAPACK's |re| + |im| (a Hermitian
//! diagonal's real part). An all-zero column is a zero 1 x 1 block (LAPACK's info), the
//! factorisation going on. The upper form (scipy's `lower=False`) is the lower form of A with its
//! rows and columns reversed; the Python package reverses.
//!
//! n^3/3 flops in rank-one and rank-two updates on the calling thread: the explicit form for small
//! and moderate matrices. [`crate::Ldlt`] is the fast factorisation of large ones, and
//! [`crate::Ldlt::solve_batch`] solves stacks of small systems.

use faer::{Mat, MatRef};
use hetla_kernels::Scalar;

use crate::Result;
use crate::check::{check_finite_triangle, check_square};

/// A = P^T L D L^* P by Bunch-Kaufman's diagonal pivoting (LAPACK's ?sytf2/?hetf2 in lower form,
/// unblocked: for small and moderate matrices; the upper form is the lower one of A with its rows
/// and columns reversed): scipy's `ldl`. D is block diagonal with 1 x 1 and 2 x 2 blocks, L unit
/// lower triangular with every interchange applied to it.
///
/// ```
/// use faer::Mat;
/// // Symmetric, indefinite, with a zero (0, 0) entry: the first pivot is a 2 x 2 block.
/// let a = Mat::from_fn(4, 4, |i, j| [[0.0, 2.0, 1.0, 0.5], [2.0, 1.0, 0.0, 3.0], [1.0, 0.0, -2.0, 1.0], [0.5, 3.0, 1.0, 4.0]][i.max(j)][i.min(j)]);
/// let f = hetla::Ldl::factor(a.as_ref(), true)?;
/// let pa = Mat::from_fn(4, 4, |i, j| a[(f.perm()[i], f.perm()[j])]);
/// assert!((f.l() * f.d() * f.l().transpose() - pa).norm_max() < 1e-12);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Ldl<T: Scalar> {
    l: Mat<T>,
    d: Mat<T>,
    perm: Vec<usize>,
    hermitian: bool,
}

impl<T: Scalar> Ldl<T> {
    /// Factors the matrix whose lower triangle is `a`'s (the rest is not read): Hermitian when
    /// `hermitian` (its diagonal's imaginary parts taken as zero; real matrices are both), else
    /// complex symmetric. A non-square or non-finite `a` is an error, before any work.
    pub fn factor(a: MatRef<'_, T>, hermitian: bool) -> Result<Self> {
        check_square("A", a.nrows(), a.ncols())?;
        check_finite_triangle("A", a, true)?;
        let n = a.nrows();
        let form = Form { hermitian };
        // The trailing matrix, lower triangle; L's columns are written into it as they are made.
        let mut w = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => a[(i, j)],
            std::cmp::Ordering::Equal => form.diagonal_entry(a[(i, i)]),
            std::cmp::Ordering::Less => T::from_f64(0.0),
        });
        let mut d = Mat::<T>::zeros(n, n);
        let mut perm: Vec<usize> = (0..n).collect();
        let mut k = 0;
        while k < n {
            let (pivot, step) = form.pivot(&w, k);
            let kk = k + step - 1;
            if pivot != kk {
                form.swap(&mut w, kk, pivot);
                perm.swap(kk, pivot);
            }
            if step == 1 {
                form.eliminate_one(&mut w, &mut d, k);
            } else {
                form.eliminate_two(&mut w, &mut d, k);
            }
            // A Hermitian trailing matrix's diagonal is real: the updates' round-off is not
            // (LAPACK's ?hetf2 drops it too).
            for j in k + step..n {
                w[(j, j)] = form.diagonal_entry(w[(j, j)]);
            }
            k += step;
        }
        let l = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => w[(i, j)],
            std::cmp::Ordering::Equal => T::from_f64(1.0),
            std::cmp::Ordering::Less => T::from_f64(0.0),
        });
        Ok(Self {
            l,
            d,
            perm,
            hermitian,
        })
    }

    /// L: unit lower triangular, every interchange applied (P A P^T = L D L^*).
    pub fn l(&self) -> MatRef<'_, T> {
        self.l.as_ref()
    }

    /// D: block diagonal, 1 x 1 and 2 x 2 blocks (Hermitian or symmetric as A).
    pub fn d(&self) -> MatRef<'_, T> {
        self.d.as_ref()
    }

    /// P as indices: row i of P A P^T is row `perm()[i]` of A (and scipy's `perm`: row `perm()[i]`
    /// of P^T L is row i of L).
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }

    /// Whether L^* is L^H (a Hermitian A) or L^T (a complex symmetric one).
    pub fn hermitian(&self) -> bool {
        self.hermitian
    }
}

/// Hermitian (L^* = L^H) or complex symmetric (L^T): what conjugation and magnitudes mean.
#[derive(Clone, Copy)]
struct Form {
    hermitian: bool,
}

/// Bunch-Kaufman's growth-minimising constant, (1 + sqrt 17) / 8.
fn alpha() -> f64 {
    (1.0 + 17f64.sqrt()) / 8.0
}

/// LAPACK's magnitude of an entry for pivoting: |re| + |im|.
fn abs1<T: Scalar>(x: T) -> f64 {
    let z = x.to_c64();
    z.re.abs() + z.im.abs()
}

impl Form {
    /// x^* (conjugate when Hermitian).
    fn star<T: Scalar>(self, x: T) -> T {
        let z = x.to_c64();
        if self.hermitian {
            T::from_parts(z.re, -z.im)
        } else {
            x
        }
    }

    /// A diagonal entry as the form keeps it: real when Hermitian.
    fn diagonal_entry<T: Scalar>(self, x: T) -> T {
        if self.hermitian {
            T::from_f64(x.to_c64().re)
        } else {
            x
        }
    }

    /// A diagonal entry's magnitude for pivoting.
    fn diagonal_size<T: Scalar>(self, x: T) -> f64 {
        if self.hermitian {
            x.to_c64().re.abs()
        } else {
            abs1(x)
        }
    }

    /// Entry (i, j) of the trailing matrix from its lower triangle.
    fn at<T: Scalar>(self, w: &Mat<T>, i: usize, j: usize) -> T {
        if i >= j {
            w[(i, j)]
        } else {
            self.star(w[(j, i)])
        }
    }

    /// Column k's pivot (its row) and step (1 or 2), Bunch-Kaufman's partial pivoting; a zero
    /// column is a zero 1 x 1 block, nothing to eliminate.
    fn pivot<T: Scalar>(self, w: &Mat<T>, k: usize) -> (usize, usize) {
        let n = w.nrows();
        let absakk = self.diagonal_size(w[(k, k)]);
        let (r, colmax) = ((k + 1)..n)
            .map(|i| (i, abs1(w[(i, k)])))
            .fold((k, 0.0), |best, c| if c.1 > best.1 { c } else { best });
        if absakk.max(colmax) == 0.0 || absakk >= alpha() * colmax {
            return (k, 1);
        }
        let rowmax = (k..n)
            .filter(|&j| j != r)
            .map(|j| abs1(self.at(w, r, j)))
            .fold(0.0, f64::max);
        if absakk >= alpha() * colmax * (colmax / rowmax) {
            (k, 1)
        } else if self.diagonal_size(w[(r, r)]) >= alpha() * rowmax {
            (r, 1)
        } else {
            (r, 2)
        }
    }

    /// A 1 x 1 pivot at k: D(k, k), L's column k, A_22 -= l d l^* on the lower triangle.
    fn eliminate_one<T: Scalar>(self, w: &mut Mat<T>, d: &mut Mat<T>, k: usize) {
        let n = w.nrows();
        let pivot = w[(k, k)];
        d[(k, k)] = pivot;
        if pivot == T::from_f64(0.0) {
            return;
        }
        let inverse = T::from_f64(1.0) / pivot;
        for i in k + 1..n {
            w[(i, k)] *= inverse;
        }
        for j in k + 1..n {
            let s = pivot * self.star(w[(j, k)]);
            for i in j..n {
                let l = w[(i, k)];
                w[(i, j)] -= l * s;
            }
        }
    }

    /// A 2 x 2 pivot at k, k + 1: D's block, each row i below [l_ik, l_ik1] = [w_ik, w_ik1] D^-1,
    /// then A_22 -= W D^-1 W^*.
    fn eliminate_two<T: Scalar>(self, w: &mut Mat<T>, d: &mut Mat<T>, k: usize) {
        let n = w.nrows();
        let (d11, d21, d22) = (w[(k, k)], w[(k + 1, k)], w[(k + 1, k + 1)]);
        let d12 = self.star(d21);
        d[(k, k)] = d11;
        d[(k + 1, k)] = d21;
        d[(k, k + 1)] = d12;
        d[(k + 1, k + 1)] = d22;
        let det = d11 * d22 - d21 * d12;
        let mut rows = Vec::with_capacity(n - k - 2);
        for i in k + 2..n {
            let (x, y) = (w[(i, k)], w[(i, k + 1)]);
            rows.push((self.star(x), self.star(y)));
            w[(i, k)] = (x * d22 - y * d21) / det;
            w[(i, k + 1)] = (y * d11 - x * d12) / det;
        }
        for j in k + 2..n {
            let (xj, yj) = rows[j - k - 2];
            for i in j..n {
                let (li, li1) = (w[(i, k)], w[(i, k + 1)]);
                w[(i, j)] -= li * xj + li1 * yj;
            }
        }
        w[(k + 1, k)] = T::from_f64(0.0);
    }

    /// Swaps rows and columns `kk` and `p` (`kk` < `p`) of the symmetric matrix in `w`'s lower
    /// triangle from column `kk` on, and rows `kk` and `p` of the columns before `kk` (L's, and for
    /// a 2 x 2 step, `kk` = k + 1, column k's).
    fn swap<T: Scalar>(self, w: &mut Mat<T>, kk: usize, p: usize) {
        let n = w.nrows();
        let conj = |x: T| self.star(x);
        // L's finished columns and, for a 2 x 2 step, column k (rows kk and p).
        for j in 0..kk {
            let (x, y) = (w[(kk, j)], w[(p, j)]);
            w[(kk, j)] = y;
            w[(p, j)] = x;
        }
        // Below p: columns kk and p.
        for i in p + 1..n {
            let (x, y) = (w[(i, kk)], w[(i, p)]);
            w[(i, kk)] = y;
            w[(i, p)] = x;
        }
        // Between: (i, kk) for kk < i < p with (p, i), conjugated.
        for i in kk + 1..p {
            let (x, y) = (w[(i, kk)], w[(p, i)]);
            w[(i, kk)] = conj(y);
            w[(p, i)] = conj(x);
        }
        w[(p, kk)] = conj(w[(p, kk)]);
        let (x, y) = (w[(kk, kk)], w[(p, p)]);
        w[(kk, kk)] = y;
        w[(p, p)] = x;
    }
}
