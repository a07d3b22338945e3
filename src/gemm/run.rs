//! The product run on a platform: its machine from the platform's calibrated models, the plan, the
//! run over the caller's matrices, the report.

use faer::{MatMut, MatRef};
use hetla_clusters::ClusterSpec;
use hetla_factorizations::MatMulTiling;
use hetla_kernels::Precision;
use hetla_runtime::{HOST, KernelKey, MemoryNode, Platform, RunOptions, Trace, WriteBack};

use super::cost::{Machine, known_gemm_tiles};
use super::options::{Gemm, Placement};
use super::report::GemmReport;
use crate::tiles::device::{DeviceMatrix, DeviceTiles};
use crate::tiles::{Matrices, TiledMatrix};
use crate::{Backend, Error, Result, Scalar};

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
        self.plan_and_execute(platform, precision, (m, n, k), None, |tiling| {
            let ta = TiledMatrix::read_only(a, tiling.a.tile(), "A")?;
            let tb = TiledMatrix::read_only(b, tiling.b.tile(), "B")?;
            let tc = TiledMatrix::new(c, tiling.c.tile(), "C")?;
            let options = RunOptions {
                host_memory: self.host_memory,
                write_back: self.write_back(),
                ..RunOptions::default()
            };
            Ok((Stored::Host([ta, tb, tc]), options))
        })
    }

    /// C <- alpha op(A) op(B) + beta C on matrices in the memory of GPU `g` of `platform` (the one
    /// [`Gemm::resident`] names, else the first), where they lie: every tile of A, B and C is
    /// imported into the GPU's replicas by copies within the device before the run's clock starts,
    /// every product runs on that GPU (the platform's other workers take none), and C is exported
    /// back into its buffer after the clock stops, with no copy through host memory. The report's
    /// seconds are the product's on the device (see [`Gemm::resident`]). A, B and C must fit the
    /// GPU's budget together; a product with k = 0 (C <- beta C alone) is refused unless beta is 1.
    pub fn run_device<T: Scalar>(
        &self,
        platform: &Platform,
        a: &DeviceMatrix<'_, T>,
        b: &DeviceMatrix<'_, T>,
        c: &mut DeviceMatrix<'_, T>,
    ) -> Result<(GemmReport, Trace)> {
        let gpu = match self.placement {
            [Placement::Device(g), ..] if self.resident => g,
            _ => 0,
        };
        let resident = (*self).resident(gpu);
        resident.check(platform.devices().len())?;
        let precision = T::PRECISION;
        let (m, n, k) = resident.dimensions(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            (c.nrows(), c.ncols()),
        )?;
        let Some(worker) = platform.devices().get(gpu) else {
            return Err(Error::InvalidOption {
                option: "resident",
                reason: format!(
                    "a product on device matrices of GPU {gpu} needs that GPU, but the platform \
                     has {} GPU(s)",
                    platform.devices().len()
                ),
            });
        };
        for (what, m) in [("A", a), ("B", b), ("C", &*c)] {
            m.check_on(worker.device.as_ref(), what)?;
        }
        if m == 0 || n == 0 || (k == 0 && resident.beta == 1.0) {
            let empty = Trace::new(platform.workers().to_vec(), Vec::new(), 0.0);
            return Ok((resident.empty_report(precision, (m, n, k)), empty));
        }
        if k == 0 {
            return Err(Error::InvalidOption {
                option: "k",
                reason: "a product on device matrices with k = 0 (C <- beta C alone, beta != 1) \
                         is not supported: scale C on the device"
                    .into(),
            });
        }
        let node = MemoryNode(gpu + 1);
        resident.plan_and_execute(platform, precision, (m, n, k), Some(node), |tiling| {
            let homes = vec![(a, tiling.a), (b, tiling.b), (&*c, tiling.c)];
            // The tiles have no host view: the plan (`only_on`) gives every product to the GPU.
            let options = RunOptions {
                write_back: WriteBack::Resident,
                ..RunOptions::default()
            };
            Ok((Stored::Device(DeviceTiles::new(node, homes)), options))
        })
    }

    /// The machine of `platform` from its calibrated models, the plan of the (m, n, k) product on
    /// it (every product on memory node `only` when given), and its run over the store and with the
    /// options `store` makes for the plan's tiling.
    fn plan_and_execute<'s, T: Scalar>(
        &self,
        platform: &Platform,
        precision: Precision,
        (m, n, k): (usize, usize, usize),
        only: Option<MemoryNode>,
        store: impl FnOnce(&MatMulTiling) -> Result<(Stored<'s, T>, RunOptions)>,
    ) -> Result<(GemmReport, Trace)> {
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
        let mut planned = self.plan_on(&machine, (m, n, k))?;
        if let Some(node) = only {
            planned.only_on(&machine, node);
        }
        let (stored, options) = store(&planned.tiling)?;
        let trace = match &stored {
            Stored::Host([ta, tb, tc]) => {
                planned
                    .plan()
                    .execute(platform, &Matrices(&[ta, tb, tc]), &options)?
            }
            Stored::Device(tiles) => planned.plan().execute(platform, tiles, &options)?,
        };
        Ok((self.report(&machine, &planned, &trace), trace))
    }
}

/// Where a product's A, B and C lie: host memory, or a device's.
enum Stored<'s, T: Scalar> {
    Host([TiledMatrix<'s, T>; 3]),
    Device(DeviceTiles<'s, 's, T>),
}
