//! The inverse of a lower triangular matrix (LAPACK's ?trtri with uplo = 'L', diag = 'N') in tiles:
//! the first half of the Cholesky inverse's graph (TRTRI of the diagonal tiles, the solves and
//! products below them), as a family of its own.
//!
//! It entered by docs/architecture.md's "adding a factorisation" (issue 71's proof): this folder
//! (the builder, its plan, its [`Room`](crate::family::Room)), a line in the list of families, and
//! the few lines the closed [`Algorithm`] enum still asks for. Its kernels, rates and models are
//! those the inverse already had; `hetla simulate`, `bound`, `sweep`, `tune` and `calibrate` serve
//! it without naming it.

use faer::{Mat, MatMut};
use hetla_kernels::{Precision, Scalar};
use hetla_runtime::{RunOptions, Trace};

use crate::check::{check_finite_triangle, check_square};
use crate::interop::Matrix;
use crate::plan::default_tile_size;
use crate::run::RunConfig;
use crate::tiles::{Matrices, TiledMatrix};
use crate::{Algorithm, Error, Plan, Result};

pub(crate) mod plan;
pub(crate) mod room;

/// Configures and runs tiled inverses of lower triangular matrices: the run options every builder
/// has (backend, clusters, threads, scheduler, platform) and the tile.
///
/// ```
/// use faer::Mat;
/// let l = Mat::from_fn(3, 3, |i, j| if i == j { 2.0 } else if i > j { 1.0 } else { 0.0 });
/// let x = hetla::TriangularInverse::new().tile(2).invert(l.as_ref())?;
/// let product = &l * &x;
/// assert!((product - Mat::<f64>::identity(3, 3)).norm_max() < 1e-15);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct TriangularInverse {
    run: RunConfig,
    tile: Option<usize>,
}

impl TriangularInverse {
    /// Default options: faer, Cholesky's default tile for the order, `auto` clusters, MCT.
    pub fn new() -> Self {
        Self::default()
    }

    crate::run::run_options!();
    crate::run::tuned_for!(crate::Family::Trtri);

    /// The tile size. 0 is an error at run time.
    pub fn tile(mut self, tile: usize) -> Self {
        self.tile = Some(tile);
        self
    }

    /// The tile for order `n` in `precision`: the one given (at most n), else Cholesky's default
    /// for the backend (its graph has the same shape of steps).
    pub fn tile_size_for(&self, n: usize, precision: Precision) -> usize {
        let default = || default_tile_size(n, self.run.backend, precision);
        self.tile.unwrap_or_else(default).min(n.max(1))
    }

    /// The plan of the inverse of a lower triangle of order `n` in `precision` (in the tile tuned
    /// on this machine when this builder's user set nothing, as every call takes): what `simulate`
    /// and `bound` take, and [`TriangularInverse::invert_planned`] runs.
    pub fn plan(&self, n: usize, precision: Precision) -> Result<Plan> {
        let tile = self.tuned_for(n, precision).tile_size_for(n, precision);
        Plan::new(Algorithm::TriangularInverse { n }, tile, precision)
    }

    /// L^-1 of the lower triangle of `l` (what is above its diagonal is not read; L^-1's upper
    /// triangle is zero): any precision, any [`Matrix`]. A non-finite entry or an exactly zero
    /// diagonal entry is refused before any work.
    pub fn invert<A: Matrix>(&self, l: A) -> Result<Mat<A::Elem>> {
        let l = l.view();
        check_square("L", l.nrows(), l.ncols())?;
        let n = l.nrows();
        let tuned = self.tuned_for(n, <A::Elem as Scalar>::PRECISION);
        let plan = tuned.plan(n, <A::Elem as Scalar>::PRECISION)?;
        let mut x = Mat::from_fn(n, n, |i, j| {
            if i >= j {
                l[(i, j)]
            } else {
                <A::Elem as Scalar>::from_f64(0.0)
            }
        });
        tuned.invert_planned(&plan, x.as_mut())?;
        Ok(x)
    }

    /// Inverts the lower triangle of `l` in place by `plan` (from [`TriangularInverse::plan`])
    /// through the runtime (the strict upper triangle is left as it was); the trace. `l` is checked
    /// first as by [`TriangularInverse::invert`].
    pub fn invert_planned<T: Scalar>(&self, plan: &Plan, l: MatMut<'_, T>) -> Result<Trace> {
        check_square("L", l.nrows(), l.ncols())?;
        check_finite_triangle("L", l.as_ref(), true)?;
        if let Some(j) = (0..l.nrows()).find(|&j| l[(j, j)] == T::from_f64(0.0)) {
            return Err(Error::InvalidOption {
                option: "L",
                reason: format!(
                    "its diagonal entry ({j}, {j}) is exactly zero: a singular triangle has no inverse (LAPACK ?trtri's info = {})",
                    j + 1
                ),
            });
        }
        let n = l.nrows();
        if plan.algorithm() != (Algorithm::TriangularInverse { n }) {
            return Err(Error::InvalidOption {
                option: "plan",
                reason: format!(
                    "the plan is a {} ({:?}), the matrix {n}x{n}: give TriangularInverse::plan({n}, ..)'s",
                    plan.algorithm().name(),
                    plan.algorithm()
                ),
            });
        }
        let this = self.tuned_for(n, T::PRECISION);
        let platform = this.run.resolve_platform()?;
        let matrix = TiledMatrix::new(l, plan.tile(), "L")?;
        let options = RunOptions {
            scheduler: this.run.scheduler,
            ..RunOptions::default()
        };
        plan.execute(&platform, &Matrices(&[&matrix]), &options)
    }
}

/// A random lower triangular matrix of order `n`: [`crate::matgen::random_in`]'s entries below the
/// diagonal, `n` on it (diagonally dominant by rows, so well conditioned), zeros above.
pub(crate) fn random_lower<T: Scalar>(n: usize, seed: u64) -> Mat<T> {
    let r: Mat<T> = crate::matgen::random_in(n, n, seed);
    Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => r[(i, j)],
        std::cmp::Ordering::Equal => T::from_f64(n as f64),
        std::cmp::Ordering::Less => T::from_f64(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClusterSpec, Family, c32, c64};
    use faer::Par;

    fn ratio<T: Scalar>(n: usize, tile: usize) -> f64 {
        let l = random_lower::<T>(n, 7);
        let two = TriangularInverse::new().clusters(ClusterSpec::Grid { count: 2, size: 1 });
        let x = two.tile(tile).invert(l.as_ref()).unwrap();
        let plan = Plan::new(Algorithm::TriangularInverse { n }, tile, T::PRECISION).unwrap();
        plan.residual(l.as_ref(), x.as_ref(), Par::Seq).unwrap()
    }

    /// LAPACK's dtrt01 ratio below 30 in every precision, on one tile, ragged tiles and many.
    #[test]
    fn inverts_in_every_precision_and_tiling_within_lapack_s_ratio() {
        for (n, tile) in [(1, 1), (5, 8), (97, 16), (130, 64)] {
            for r in [ratio::<f32>(n, tile), ratio::<f64>(n, tile)] {
                assert!(r < 30.0, "n {n} tile {tile}: {r}");
            }
            for r in [ratio::<c32>(n, tile), ratio::<c64>(n, tile)] {
                assert!(r < 30.0, "n {n} tile {tile}: {r}");
            }
        }
        let empty = TriangularInverse::new().invert(Mat::<f64>::zeros(0, 0).as_ref());
        assert_eq!(empty.unwrap().nrows(), 0);
    }

    #[test]
    fn refuses_a_zero_diagonal_a_non_finite_entry_and_a_non_square_matrix() {
        let mut l = random_lower::<f64>(40, 3);
        l[(17, 17)] = 0.0;
        let e = TriangularInverse::new().invert(l.as_ref()).unwrap_err();
        assert!(e.to_string().contains("(17, 17) is exactly zero"), "{e}");
        l[(17, 17)] = 1.0;
        l[(30, 2)] = f64::NAN;
        let e = TriangularInverse::new().invert(l.as_ref()).unwrap_err();
        assert!(matches!(e, Error::NonFinite { .. }), "{e}");
        // Above the diagonal is not read.
        l[(30, 2)] = 0.5;
        l[(2, 30)] = f64::NAN;
        assert!(TriangularInverse::new().invert(l.as_ref()).is_ok());
        let wide = Mat::<f64>::zeros(3, 4);
        assert!(TriangularInverse::new().invert(wide.as_ref()).is_err());
        assert!(TriangularInverse::new().tile(0).invert(l.as_ref()).is_err());
    }

    /// The family's commands see it: its plan is the one the builder runs, and its name parses.
    #[test]
    fn the_family_serves_it_by_its_name() {
        let family: Family = "trtri".parse().unwrap();
        let plans = family.plans(300, 300, 64, Precision::D, (2, 0)).unwrap();
        let builder = TriangularInverse::new().tile(64);
        assert_eq!(
            plans[0].graph().len(),
            builder.plan(300, Precision::D).unwrap().graph().len()
        );
        assert_eq!(plans[0].algorithm().family(), Some(family));
    }
}
