//! Stacks of symmetric (complex: Hermitian) indefinite systems (issue 73's batches): each system
//! one task on one core, the platform's cores sharing the batch ([`crate::batch::on_every_core`]),
//! as LU's and Cholesky's batches.
//!
//! A small system is factored by Bunch-Kaufman (faer's L B L^H with partial pivoting, B block
//! diagonal with 1 x 1 and 2 x 2 blocks: LAPACK's ?sytrf, which scipy's `solve(assume_a="sym")`
//! calls through ?sysv) in the working precision on the calling core, not by the block Aasen of
//! [`Ldlt::factor`]: a matrix of a batch is one block, where Aasen's T grows with the block
//! (`mod.rs`) and needs the refinement and its copy of A, while Bunch-Kaufman's B does not grow and
//! its solve is backward stable as it is.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::lblt as bunch_kaufman;
use faer::{Col, Conj, Mat, MatMut, MatRef, Par};
use hetla_kernels::Scalar;

use super::Ldlt;
use crate::batch::on_every_core_beside;
use crate::check::{check_finite, check_hermitian_lower, check_system};
use crate::interop::column_major;
use crate::{Error, Result, condition};

impl Ldlt {
    /// Solves A_i X_i = B_i in place in `b[i]` for every i, each A_i Hermitian (real: symmetric)
    /// indefinite given by its lower triangle (the A_i are left unchanged; scipy's stacked
    /// `solve(assume_a="sym")`), by Bunch-Kaufman (LAPACK's ?sysv; see the module documentation):
    /// each system a single task on one core, the batch spread over all the platform's CPU
    /// clusters. The i-th result is A_i's reciprocal condition estimate in the 1-norm (?sycon's),
    /// or why system i has no solution: [`Error::Singular`] with the first exactly zero pivot's
    /// column of B (B_i untouched), a shape or a non-finite entry (checked before any work). The
    /// outer error is for the call (`a` and `b` of different lengths, a platform that cannot be
    /// built).
    ///
    /// ```
    /// use faer::Mat;
    /// // Symmetric, indefinite: diagonal entries of both signs.
    /// let a: Vec<Mat<f64>> = (0..10)
    ///     .map(|i| Mat::from_fn(6, 6, |r, c| if r == c { [4.0, -3.0][r % 2] } else { 0.1 * (r + c + i) as f64 }))
    ///     .collect();
    /// let mut x: Vec<Mat<f64>> = a.iter().map(|a| a * Mat::<f64>::ones(6, 1)).collect();
    /// let views: Vec<_> = a.iter().map(|a| a.as_ref()).collect();
    /// let mut rhs: Vec<_> = x.iter_mut().map(|x| x.as_mut()).collect();
    /// let rconds = hetla::Ldlt::new().solve_batch(&views, &mut rhs)?;
    /// assert!(rconds.iter().all(|r| matches!(r, Ok(r) if *r > 0.01)));
    /// assert!(x.iter().all(|x| (x - Mat::<f64>::ones(6, 1)).norm_max() < 1e-12));
    /// # Ok::<(), hetla::Error>(())
    /// ```
    pub fn solve_batch<T: Scalar>(
        &self,
        a: &[MatRef<'_, T>],
        b: &mut [MatMut<'_, T>],
    ) -> Result<Vec<Result<f64>>> {
        let platform = self.run.resolve_platform()?;
        on_every_core_beside(&platform, a, ("b", "right-hand sides", b), |_, a, mut b| {
            check_system("A", (a.nrows(), a.ncols()), b.nrows())?;
            let norm = check_hermitian_lower("A", a)?;
            check_finite("B", b.as_ref())?;
            let factor = BunchKaufman::of(a)?;
            column_major(b.as_mut(), |b| {
                factor.solve(b);
                Ok(())
            })?;
            let n = a.nrows();
            if n == 0 || norm == 0.0 {
                return Ok(if n == 0 { 1.0 } else { 0.0 });
            }
            // A^-1 is Hermitian: its adjoint's solve is its own.
            let inverse = condition::estimate_norm1(n, |x, _| {
                factor.solve(x);
                Ok(())
            })?;
            Ok(condition::reciprocal(inverse, norm))
        })
    }
}

/// A's Bunch-Kaufman factor in its own precision, made on the calling core: L (unit lower) below
/// the diagonal of `l`, B's diagonal on it and B's subdiagonal in `subdiagonal`, and the symmetric
/// permutation.
struct BunchKaufman<T: Scalar> {
    l: Mat<T>,
    subdiagonal: Col<T>,
    perm: Vec<usize>,
    perm_inv: Vec<usize>,
}

impl<T: Scalar> BunchKaufman<T> {
    /// The factor of the Hermitian matrix whose lower triangle is `a`'s (its diagonal's imaginary
    /// parts taken as zero); [`Error::Singular`] at B's first exactly zero 1 x 1 block (a zero
    /// column of the reduced matrix; a 2 x 2 block is taken only where it is invertible).
    fn of(a: MatRef<'_, T>) -> Result<Self> {
        let n = a.nrows();
        let mut l = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Greater => a[(i, j)],
            std::cmp::Ordering::Equal => T::from_f64(a[(i, i)].to_c64().re),
            std::cmp::Ordering::Less => T::from_f64(0.0),
        });
        let mut subdiagonal = Col::<T>::zeros(n);
        let (mut perm, mut perm_inv) = (vec![0usize; n], vec![0usize; n]);
        let params = Default::default();
        let mut buffer = MemBuffer::new(
            bunch_kaufman::factor::cholesky_in_place_scratch::<usize, T>(n, Par::Seq, params),
        );
        bunch_kaufman::factor::cholesky_in_place(
            l.as_mut(),
            subdiagonal.as_mut().as_diagonal_mut(),
            &mut perm,
            &mut perm_inv,
            Par::Seq,
            MemStack::new(&mut buffer),
            params,
        );
        let zero = T::from_f64(0.0);
        let mut j = 0;
        while j < n {
            if subdiagonal[j] != zero {
                j += 2;
            } else if l[(j, j)].abs_f64() == 0.0 {
                return Err(Error::Singular { column: j });
            } else {
                j += 1;
            }
        }
        Ok(Self {
            l,
            subdiagonal,
            perm,
            perm_inv,
        })
    }

    /// X = A^-1 X in place (`x` column-major, n rows).
    fn solve(&self, x: MatMut<'_, T>) {
        let n = self.l.nrows();
        let mut buffer = MemBuffer::new(bunch_kaufman::solve::solve_in_place_scratch::<usize, T>(
            n,
            x.ncols(),
            Par::Seq,
        ));
        let perm = faer::perm::PermRef::new_checked(&self.perm, &self.perm_inv, n);
        bunch_kaufman::solve::solve_in_place_with_conj(
            self.l.as_ref(),
            self.l.as_ref().diagonal(),
            self.subdiagonal.as_ref().as_diagonal(),
            Conj::No,
            perm,
            x,
            Par::Seq,
            MemStack::new(&mut buffer),
        );
    }
}
