//! Cholesky on matrices that live in a GPU's memory: [`Cholesky::factor_device`] and
//! [`Cholesky::solve_device`] (see [`DeviceMatrix`] for how the tiles meet the device).
//!
//! Both are resident runs ([`Cholesky::resident`]) whose matrices have no host copy at all: every
//! tile is imported into a device replica (a copy within the device) before the run's clock starts,
//! the tasks run on that GPU only, and the written tiles are exported back into the caller's buffer
//! after the clock stops. The trace's makespan is the time of the work on the device, as cuSOLVER's
//! on a resident matrix is.

use hetla_factorizations::{MatrixId, Mode};
use hetla_kernels::Scalar;
use hetla_runtime::{MemoryNode, ResourceKind, RunOptions, Trace, WriteBack};

use super::{Cholesky, resident_placement};
use crate::Result;
use crate::check::check_square;
use crate::plan::Plan;
use crate::tiles::device::{DeviceMatrix, DeviceTiles};

impl Cholesky {
    /// Factors `a`, an SPD (Hermitian positive definite) matrix in the memory of GPU `g` (the one
    /// [`Cholesky::resident`] names, else the platform's first), where it lies: L overwrites its
    /// lower triangle and its strict upper triangle is left as it was, with no copy through host
    /// memory. Returns the trace of the run (its makespan: the factorisation on the device, the
    /// copies within the device before and after it left out, as for [`Cholesky::resident`]).
    ///
    /// The matrix never comes to the host, so it is not checked before the run as a host matrix is
    /// (finite entries, a real diagonal): a NaN gives a NaN factor or
    /// [`crate::Error::NotPositiveDefinite`], and the imaginary parts of a complex diagonal must be
    /// zero. Errors before any work: a platform without GPU `g`, a matrix not in that GPU's memory,
    /// or one whose tiles exceed the GPU's memory budget.
    ///
    /// ```
    /// use hetla::{Backend, Cholesky, DeviceMatrix, GpuSelection, ModelStore, Platform};
    /// // An emulated device, whose memory is host memory; a GPU's buffer is taken by
    /// // `DeviceMatrix::cuda`, and `GpuSelection::All` opens the GPUs.
    /// let devices = GpuSelection::Emulated(1).open(None)?;
    /// let spec = "none".parse()?;
    /// let platform = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices)?;
    /// let mut a = hetla::matgen::random_spd(300, 7);
    /// let a0 = a.clone();
    /// let mut on_device = DeviceMatrix::emulated(a.as_mut())?;
    /// Cholesky::new().tile(100).platform(platform.into()).factor_device(&mut on_device)?;
    /// // L is in `a`'s lower triangle.
    /// let residual = hetla::check::cholesky_residual(a0.as_ref(), a.as_ref(), faer::Par::Seq);
    /// assert!(residual < 30.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn factor_device<T: Scalar>(&self, a: &mut DeviceMatrix<'_, T>) -> Result<Trace> {
        check_square("A", a.nrows(), a.ncols())?;
        let platform = self.resolve_platform()?;
        let n = a.nrows();
        let (tile, choice) = self.tile_and_choice(&platform, n, T::PRECISION)?;
        let mut plan = Plan::new(crate::Algorithm::Cholesky { n }, tile, T::PRECISION)?;
        plan.choice = choice;
        self.run_on_device(&platform, &plan, &[("A", a, Mode::ReadWrite)])
    }

    /// Solves A X = B in place for B, with `l` the factor of A from [`Cholesky::factor_device`]
    /// (its lower triangle is read), both in the memory of GPU `g` (as for `factor_device`), with
    /// no copy through host memory: X overwrites B. Returns the trace of the run.
    pub fn solve_device<T: Scalar>(
        &self,
        l: &DeviceMatrix<'_, T>,
        b: &mut DeviceMatrix<'_, T>,
    ) -> Result<Trace> {
        let n = l.nrows();
        crate::check::check_system("L", (l.nrows(), l.ncols()), b.nrows())?;
        let platform = self.resolve_platform()?;
        let (tile, _) = self.tile_and_choice(&platform, n, T::PRECISION)?;
        let plan = Plan::new(
            crate::Algorithm::CholeskySolve { n, rhs: b.ncols() },
            tile,
            T::PRECISION,
        )?;
        self.run_on_device(
            &platform,
            &plan,
            &[("L", l, Mode::Read), ("B", b, Mode::ReadWrite)],
        )
    }

    /// Runs `plan` on GPU `g` over `matrices` (in the plan's matrix order, each named and with how
    /// the plan uses it) in that GPU's memory: every tile placed there, the tasks on the GPU only,
    /// the written tiles exported back after the clock stops.
    fn run_on_device<T: Scalar>(
        &self,
        platform: &hetla_runtime::Platform,
        plan: &Plan,
        matrices: &[(&'static str, &DeviceMatrix<'_, T>, Mode)],
    ) -> Result<Trace> {
        let gpu = self.resident.unwrap_or(0);
        let mut placement = resident_placement(platform, plan, gpu)?;
        let device = &platform.devices()[gpu].device;
        for &(what, m, _) in matrices {
            m.check_on(device.as_ref(), what)?;
        }
        // Read-only matrices stay valid in their homes: placed as shared copies, never exported.
        for (tile, _, mode) in &mut placement {
            if let Some(&(_, _, Mode::Read)) = matrices.get(tile.matrix.0 as usize) {
                *mode = Mode::Read;
            }
        }
        // The matrices are in the plan's order: matrix i is `MatrixId(i)`.
        let tilings = matrices
            .iter()
            .enumerate()
            .map(|(i, &(_, m, _))| {
                let tiling = plan
                    .tiling(MatrixId(i as u8))
                    .expect("the plan tiles each of its matrices");
                (m, *tiling)
            })
            .collect();
        let store = DeviceTiles::new(MemoryNode(gpu + 1), tilings);
        let options = RunOptions {
            scheduler: self.run.scheduler,
            write_back: WriteBack::Resident,
            tensor_math: self.run.tensor_math,
            placement,
            // The tiles have no host view: no CPU cluster may run a task.
            restrictions: plan
                .ops()
                .into_iter()
                .map(|op| (op, vec![ResourceKind::Gpu]))
                .collect(),
            ..RunOptions::default()
        };
        super::work::execute(plan, platform, &store, &options)
    }
}
