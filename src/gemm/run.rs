//! The product run on a platform: its machine from the platform's calibrated models, the plan, the
//! run over the caller's matrices, the report.

use faer::{MatMut, MatRef};
use hetla_clusters::ClusterSpec;
use hetla_runtime::{HOST, KernelKey, MemoryNode, Platform, RunOptions, Trace};

use super::cost::{Machine, known_gemm_tiles};
use super::options::Gemm;
use super::report::GemmReport;
use crate::tiles::{Matrices, TiledMatrix};
use crate::{Backend, Result, Scalar};

impl Gemm {
    /// Computes C <- alpha op(A) op(B) + beta C on the process-wide platform that `solve_spd` and
    /// `Cholesky::new()` use ([`Platform::shared`]: `auto` clusters, faer kernels), built on first
    /// use.
    pub fn run_shared<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
    ) -> Result<GemmReport> {
        let platform = Platform::shared(&ClusterSpec::default(), Backend::default())?;
        self.run(&platform, a, b, c)
    }

    /// Computes C <- alpha op(A) op(B) + beta C on `platform`, in any precision (for a complex type
    /// a transposed operand is its adjoint, see [`crate::Scalar`]).
    pub fn run<T: Scalar>(
        &self,
        platform: &Platform,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        c: MatMut<'_, T>,
    ) -> Result<GemmReport> {
        self.run_traced(platform, a, b, c).map(|(report, _)| report)
    }

    /// As [`Gemm::run`], with the trace of the run (empty when there was nothing to multiply).
    pub fn run_traced<T: Scalar>(
        &self,
        platform: &Platform,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        mut c: MatMut<'_, T>,
    ) -> Result<(GemmReport, Trace)> {
        self.check(platform.devices().len())?;
        let precision = T::PRECISION;
        let (m, n, k) = self.dimensions(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            (c.nrows(), c.ncols()),
        )?;
        if k == 0 || m == 0 || n == 0 {
            // Nothing to multiply: C <- beta C (BLAS's quick return).
            platform.backend().matmul(
                faer::Mat::<T>::zeros(m, 0).as_ref(),
                faer::Mat::<T>::zeros(0, n).as_ref(),
                c.as_mut(),
                self.alpha,
                self.beta,
                faer::Par::Seq,
            )?;
            let empty = Trace::new(platform.workers().to_vec(), Vec::new(), 0.0);
            return Ok((self.empty_report(precision, (m, n, k)), empty));
        }
        let models = platform.models();
        let workers = platform.workers();
        let tile_seconds = |w: usize, tile: usize| {
            models
                .get(
                    &KernelKey::square(hetla_kernels::Op::GemmNt, tile).in_precision(precision),
                    &workers[w].class,
                )
                .and_then(|s| s.calibrated_mean())
        };
        let links = platform.links();
        let copy_seconds =
            |node: MemoryNode, bytes: usize| hetla_runtime::copy_seconds(&links, HOST, node, bytes);
        let mut capacities = vec![None];
        capacities.extend(platform.devices().iter().map(|d| Some(d.device.budget())));
        let known_tiles = known_gemm_tiles(&models, workers, precision);
        let machine = Machine {
            workers,
            capacities,
            tile_seconds: &tile_seconds,
            copy_seconds: &copy_seconds,
            known_tiles,
            precision,
        };
        let planned = self.plan_on(&machine, (m, n, k))?;
        let tiling = &planned.tiling;
        let ta = TiledMatrix::read_only(a, tiling.a.tile(), "A")?;
        let tb = TiledMatrix::read_only(b, tiling.b.tile(), "B")?;
        let tc = TiledMatrix::new(c, tiling.c.tile(), "C")?;
        let store = Matrices(&[&ta, &tb, &tc]);
        let options = RunOptions {
            host_memory: self.host_memory,
            write_back: self.write_back(),
            ..RunOptions::default()
        };
        let trace = planned.plan().execute(platform, &store, &options)?;
        Ok((self.report(&machine, &planned, &trace), trace))
    }
}
