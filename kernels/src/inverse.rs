//! The panel solves of Cholesky through the inverse of the diagonal tile, as MAGMA runs them on
//! GPUs: a triangular product in place of each triangular solve.
//!
//! With L = L1 D (L1 unit lower triangular, D the positive real diagonal of L), the solve B L^-H is
//! (B L1^-H) D^-1. Once the diagonal tile is factored, [`Backend::invert_unit_factor`] writes U =
//! L1^-H (unit upper triangular) into the tile's strict upper triangle (in a plan, the task
//! [`crate::Op::PanelInverse`], on the Cholesky work's copy of the tile); every solve of the panel
//! below it is then
//! [`Backend::trsm_by_inverse`]: a TRMM with U (its unit diagonal implied, so the tile's diagonal
//! keeps L's) and a scaling of each column by 1/d_j. The inversion costs b^3/3 flops once per
//! panel; each product costs the b^3 flops of the solve it replaces, at the rate of the library's
//! TRMM.
//!
//! Accuracy: a product with a computed inverse errs by about cond(L1) eps |B|, a solve by about eps
//! |B| times a modest constant, so the inverse is written only when cond_1(L1) = ||L1||_1
//! ||L1^-1||_1 <= [`MAX_CONDITION`] (computed exactly from the inverse, in O(b^2)); above it the
//! panel keeps the triangular solve. Measured on one AVX-512 core (`cargo bench -p hetla-kernels
//! --features openblas -- trsm-by-inverse`): OpenBLAS dtrsm 27-31 Gflop/s at b = 256-512 and its
//! dtrmm 58-66, faer's solve 60 and its triangular product 55-57: only OpenBLAS gains
//! ([`Backend::solves_by_inverse`]).

use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};

use crate::split::{bands, pieces, row_bands, run_pieces};
use crate::{Backend, KernelError, Scalar};

/// The largest 1-norm condition number of the unit factor L1 of a diagonal tile for which its panel
/// is solved through the inverse: the product's error, about cond(L1) eps |B|, then stays below
/// LAPACK's residual threshold at every tiled order.
pub const MAX_CONDITION: f64 = 1e3;

impl Backend {
    /// Whether this backend's panel solves are faster through the inverse of the diagonal tile (see
    /// the module documentation): OpenBLAS, whose TRMM runs at twice its TRSM on one core.
    pub fn solves_by_inverse(self) -> bool {
        matches!(self, Backend::OpenBlas)
    }

    /// The body of [`Self::invert_unit_factor`], compiled in this crate for each scalar (see
    /// `compiled`).
    pub(crate) fn invert_unit_factor_impl<T: Scalar>(
        self,
        mut a: MatMut<'_, T>,
        par: Par,
    ) -> Result<bool, KernelError> {
        self.ensure_available()?;
        let n = a.nrows();
        if n != a.ncols() {
            return Err(KernelError::Operands {
                op: crate::Op::Potrf,
                reason: format!("a {n} x {} tile has no unit factor to invert", a.ncols()),
            });
        }
        let d: Vec<f64> = (0..n).map(|j| a[(j, j)].re_f64()).collect();
        // L^-1, then L1^-1 = D L^-1 and U = L1^-H = L^-H D.
        let mut lower = Mat::<T>::zeros(n, n);
        for j in 0..n {
            lower
                .col_mut(j)
                .subrows_mut(j, n - j)
                .copy_from(a.rb().col(j).subrows(j, n - j));
        }
        // cond_1(L1) = max_j (1 + sum_{i>j} |l_ij| / d_j) * max_j sum_{i>=j} d_i |L^-1_ij|.
        let column_norm = |m: &Mat<T>, j: usize, weight: &dyn Fn(usize) -> f64| {
            m.col(j)
                .subrows(j, n - j)
                .iter()
                .enumerate()
                .map(|(k, x)| x.abs_f64() * weight(j + k))
                .sum::<f64>()
        };
        let l1_norm = (0..n)
            .map(|j| column_norm(&lower, j, &|_| 1.0 / d[j]))
            .fold(0.0, f64::max);
        let mut inverse = Mat::<T>::zeros(n, n);
        faer::linalg::triangular_inverse::invert_lower_triangular(
            inverse.as_mut(),
            lower.as_ref(),
            par,
        );
        let inverse_norm = (0..n)
            .map(|j| column_norm(&inverse, j, &|i| d[i]))
            .fold(0.0, f64::max);
        // A NaN condition (a non-finite factor) is not within the bound either.
        let condition = l1_norm * inverse_norm;
        if condition.is_nan() || condition > MAX_CONDITION {
            return Ok(false);
        }
        let adjoint = inverse.adjoint();
        for (j, &dj) in d.iter().enumerate().skip(1) {
            let mut column = a.rb_mut().col_mut(j).subrows_mut(0, j);
            column.copy_from(adjoint.col(j).subrows(0, j));
            let scale = T::from_f64(dj);
            column.iter_mut().for_each(|x| *x *= scale);
        }
        Ok(true)
    }

    /// The body of [`Self::trsm_by_inverse`], compiled in this crate for each scalar (see
    /// `compiled`).
    pub(crate) fn trsm_by_inverse_impl<T: Scalar>(
        self,
        lu: MatRef<'_, T>,
        b: MatMut<'_, T>,
        par: Par,
    ) -> Result<(), KernelError> {
        self.ensure_available()?;
        let (m, n) = (b.nrows(), b.ncols());
        if lu.nrows() != n || lu.ncols() != n {
            return Err(KernelError::Operands {
                op: crate::Op::Trsm,
                reason: format!(
                    "a {m} x {n} panel tile needs a {n} x {n} diagonal tile, got {} x {}",
                    lu.nrows(),
                    lu.ncols()
                ),
            });
        }
        let scale: Vec<T> = (0..n)
            .map(|j| T::from_f64(1.0 / lu[(j, j)].re_f64()))
            .collect();
        let sizes = bands(m, pieces(par, (m * n * n) as f64, m));
        run_pieces(row_bands(b, &sizes), |mut band| {
            self.unit_upper_product(lu, band.rb_mut())?;
            for (j, &s) in scale.iter().enumerate() {
                band.rb_mut().col_mut(j).iter_mut().for_each(|x| *x *= s);
            }
            Ok(())
        })
    }

    /// B <- B U with U the unit upper triangle of `u` (its diagonal and lower triangle not read),
    /// on one thread.
    fn unit_upper_product<T: Scalar>(
        self,
        u: MatRef<'_, T>,
        mut b: MatMut<'_, T>,
    ) -> Result<(), KernelError> {
        match self {
            #[cfg(feature = "openblas")]
            Backend::OpenBlas => crate::openblas_impl::unit_upper_product(u, b),
            _ => {
                let product = {
                    let mut out = Mat::<T>::zeros(b.nrows(), b.ncols());
                    matmul(
                        out.as_mut(),
                        BlockStructure::Rectangular,
                        Accum::Replace,
                        b.rb(),
                        BlockStructure::Rectangular,
                        u,
                        BlockStructure::UnitTriangularUpper,
                        T::from_f64(1.0),
                        Par::Seq,
                    );
                    out
                };
                b.copy_from(&product);
                Ok(())
            }
        }
    }
}
