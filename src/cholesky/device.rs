//! Cholesky on matrices that live in a GPU's memory: [`Cholesky::factor_device`] and
//! [`Cholesky::solve_device`] (see [`DeviceMatrix`] for how the tiles meet the device).
//!
//! Both are resident runs ([`Cholesky::resident`]) whose matrices have no host copy at all: every
//! tile is imported into a device replica (a copy within the device) before the run's clock starts,
//! the tasks run on that GPU only, and the written tiles are exported back into the caller's buffer
//! after the clock stops. The trace's makespan is the time of the work on the device, as cuSOLVER's
//! on a resident matrix is.

use std::sync::Arc;

use faer::{Mat, MatMut, MatRef};
use hetla_factorizations::{MatrixId, Mode};
use hetla_kernels::Scalar;
use hetla_kernels::elementwise::{FactorKind, Watched};
use hetla_runtime::{MemoryNode, RunOptions, Trace};

use super::Cholesky;
use crate::Result;
use crate::check::check_square;
use crate::mixed::device::{Prepared, Structure, check_budget, over_b};
use crate::mixed::{
    LowFactor, Refinable, Refinement, System, factor_or_shift, lowered_lower, mixed_solve,
    raise_factor, raised_lower, widened,
};
use crate::plan::Plan;
use crate::tiles::device::{DeviceBuffer, DeviceMatrix, DeviceTiles};

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
        let tile_and_choice = self.tile_and_choice(&platform, n, T::PRECISION)?;
        let plan = self.plan_of(&platform, n, tile_and_choice, T::PRECISION)?;
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
        let base = RunOptions {
            scheduler: self.run.scheduler,
            tensor_math: self.run.tensor_math,
            ..RunOptions::default()
        };
        let mut options = plan.on_device_only(platform, gpu, base)?;
        let device = &platform.devices()[gpu].device;
        for &(what, m, _) in matrices {
            m.check_on(device.as_ref(), what)?;
        }
        // Read-only matrices stay valid in their homes: placed as shared copies, never exported.
        for (tile, _, mode) in &mut options.placement {
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
        super::work::execute(plan, platform, &store, &options)
    }
}

/// Matrices of A's order in the working precision a mixed SPD solve on a GPU holds at once besides
/// the single factor: A, and a run's replicas of the factor or the factor widened with its own.
const COPIES: usize = 3;

/// Columns of A written into a GPU's memory at a time by [`write_hermitian`] (a panel of n x 256 in
/// host memory).
const PANEL: usize = 256;

impl Cholesky {
    /// The GPU a mixed solve of order `n` with `rhs` right-hand sides factors and refines on (the
    /// one [`Cholesky::resident`] names, else the platform's first): one whose budget holds A in
    /// the working precision, the single factor, a run's replicas of A's tiles or of the factor
    /// widened (GMRES-IR's preconditioner, with its own replicas) and the vectors; `None` when the
    /// platform has no such GPU (then the solve runs on the platform's workers and refines on the
    /// host).
    pub(crate) fn refinement_gpu<T: Refinable>(
        &self,
        platform: &hetla_runtime::Platform,
        n: usize,
        rhs: usize,
    ) -> Option<usize> {
        crate::mixed::gpu_holding::<T>(platform, self.resident.unwrap_or(0), (n, rhs), COPIES)
    }

    /// Solves A X = B to double accuracy as [`Cholesky::solve_refined`] does, with A (Hermitian
    /// positive definite, its lower triangle read and left as it was) and B in the memory of GPU
    /// `g` (the one [`Cholesky::resident`] names, else the platform's first), where they lie: X
    /// overwrites B. Everything runs on that GPU: A is copied within it and made whole from its
    /// lower triangle, its norm taken and its rounding to single precision made there (hetla's
    /// elementwise kernels, compiled by NVRTC), the single factor made there (with the run's tensor
    /// math) and kept, and each refinement step's residual and solves made there, only the vectors
    /// crossing to the host; a fallback factors A in double on the GPU. Returns what the solve did
    /// ([`Refinement::device`] is the GPU).
    ///
    /// As for [`Cholesky::factor_device`], A is not checked before the run as a host matrix is.
    /// Errors before any work: a platform without GPU `g`, a matrix not in its memory, a budget
    /// that does not hold A in double, the single factor and a run's copies of either (about (3 x
    /// 8 + 4) n^2 bytes for f64), or a GPU without NVRTC (the error says where it was looked for).
    ///
    /// ```
    /// use hetla::{Backend, Cholesky, DeviceMatrix, GpuSelection, ModelStore, Platform};
    /// // An emulated device, whose memory is host memory (a GPU's buffer: `DeviceMatrix::cuda`).
    /// let devices = GpuSelection::Emulated(1).open(None)?;
    /// let spec = "none".parse()?;
    /// let platform = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices)?;
    /// let mut a = hetla::matgen::random_spd(300, 7);
    /// let mut b = faer::Mat::<f64>::ones(300, 1);
    /// let (a0, b0) = (a.clone(), b.clone());
    /// let how = Cholesky::new().tile(100).platform(platform.into()).solve_refined_device(
    ///     &DeviceMatrix::emulated(a.as_mut())?,
    ///     &mut DeviceMatrix::emulated(b.as_mut())?,
    /// )?;
    /// assert_eq!((how.path, how.device), (hetla::RefinementPath::Mixed, Some(0)));
    /// assert!(hetla::check::backward_error(a0.as_ref(), b.as_ref(), b0.as_ref()) < 30.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn solve_refined_device<T: Refinable>(
        &self,
        a: &DeviceMatrix<'_, T>,
        b: &mut DeviceMatrix<'_, T>,
    ) -> Result<Refinement> {
        check_square("A", a.nrows(), a.ncols())?;
        let n = a.nrows();
        crate::check::check_system("A", (n, n), b.nrows())?;
        let platform = self.resolve_platform()?;
        let gpu = self.resident.unwrap_or(0);
        let Some(worker) = platform.devices().get(gpu) else {
            return Err(crate::Error::InvalidOption {
                option: "resident",
                reason: format!(
                    "a solve of device matrices on GPU {gpu} needs that GPU, but the platform has \
                     {} GPU(s)",
                    platform.devices().len()
                ),
            });
        };
        let device = worker.device.clone();
        a.check_on(device.as_ref(), "A")?;
        b.check_on(device.as_ref(), "B")?;
        check_budget::<T>(&platform, (gpu, "resident"), (n, b.ncols()), COPIES)?;
        device.elementwise()?;
        let prepared = Prepared::from_device(&device, a, Structure::Hermitian)?;
        let on_gpu = self.clone().resident(gpu);
        over_b(&device, b, |rhs| {
            let solve_full = |mut whole: DeviceBuffer<T>| {
                let mut x = DeviceBuffer::from_host(&device, rhs)?;
                on_gpu.factor_device(&mut whole.matrix_mut())?;
                on_gpu.solve_device(&whole.matrix(), &mut x.matrix_mut())?;
                x.read()
            };
            self.refine_prepared(gpu, prepared, (None, rhs), solve_full)
        })
    }

    /// The mixed solve of A X = B (see [`crate::mixed`]) on GPU `gpu`, A and B in host memory: A is
    /// written into the GPU's memory once, in the working precision, and prepared there
    /// ([`Prepared::from_host`]), then refined there ([`Cholesky::refine_prepared`]); a fallback
    /// frees A's copy and factors in double on the platform's workers.
    pub(crate) fn refined_on_device<T: Refinable>(
        &self,
        gpu: usize,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
    ) -> Result<(Mat<T>, Refinement)> {
        let platform = self.resolve_platform()?;
        let device = platform.devices()[gpu].device.clone();
        let prepared = Prepared::from_host(&device, a)?;
        let solve_full = |whole: DeviceBuffer<T>| {
            // A's copy leaves the GPU's memory before the platform's run needs it.
            drop(whole);
            self.factor(a)?.solve(b)
        };
        self.refine_prepared(gpu, prepared, (Some(a), b), solve_full)
    }

    /// The refinement on GPU `gpu` from `prepared`: the rounded A factored there by
    /// [`Cholesky::factor_device`] (with the run's tensor math, its diagonal raised where it meets
    /// a non-positive pivot) and kept, and each step on the GPU straight on the resident buffers:
    /// the residual B - A X by one cuBLAS ?gemm on A, the correction by two ?trsm with the factor
    /// (in single precision), only the vectors crossing to the host, where their precision changes.
    /// GMRES-IR's preconditioner is the factor widened to the working precision (read back, widened
    /// on the host and written once, when it first runs). `host`: A in host memory, where the GPU
    /// cannot round it itself; `solve_full` is the fallback in double, given A's copy.
    fn refine_prepared<T: Refinable>(
        &self,
        gpu: usize,
        prepared: Prepared<T>,
        (host, b): (Option<MatRef<'_, T>>, MatRef<'_, T>),
        solve_full: impl FnOnce(DeviceBuffer<T>) -> Result<Mat<T>>,
    ) -> Result<(Mat<T>, Refinement)> {
        let device = prepared.whole.device().clone();
        let on_gpu = self.clone().resident(gpu);
        let Prepared {
            whole,
            low,
            norm,
            overflow,
        } = prepared;
        let system = System { b, norm, overflow };
        let a_copy = std::cell::RefCell::new(Some(whole));
        let mut first = Some(low);
        let factor_low = || {
            let attempt = |shift: f64| {
                let mut l = match first.take() {
                    Some(low) if shift == 0.0 => low,
                    _ => {
                        let a_copy = a_copy.borrow();
                        let whole = a_copy.as_ref().expect("taken only by the fallback");
                        Prepared::raised(whole, host, shift)?
                    }
                };
                on_gpu.factor_device(&mut l.matrix_mut())?;
                Ok(l)
            };
            let (l, shift) = match factor_or_shift::<T, _>(attempt)? {
                Ok(found) => found,
                Err(reason) => return Ok(Err(reason)),
            };
            let l = std::rc::Rc::new(l);
            let wide = std::cell::OnceCell::new();
            let l_low = l.clone();
            let solve_low = move |r: MatRef<'_, T::Low>| l_low.solve_host(FactorKind::Cholesky, r);
            let device = device.clone();
            let precondition = move |mut x: MatMut<'_, T>| {
                if wide.get().is_none() {
                    let widened = widened::<T>(l.read()?.as_ref());
                    let _ = wide.set(DeviceBuffer::from_host(&device, widened.as_ref())?);
                }
                let wide = wide.get().expect("set above");
                x.copy_from(wide.solve_host(FactorKind::Cholesky, x.as_ref())?);
                Ok(())
            };
            Ok(Ok(LowFactor {
                solve_low,
                precondition,
                shift,
            }))
        };
        let residual = |x: MatRef<'_, T>, b: MatRef<'_, T>| match &*a_copy.borrow() {
            Some(a) => a.residual(x, b),
            None => unreachable!("A's copy is taken only by the fallback"),
        };
        let fallback = || {
            let whole = a_copy.borrow_mut().take();
            solve_full(whole.expect("taken only here"))
        };
        let (x, mut how) = mixed_solve(system, factor_low, residual, fallback)?;
        how.device = Some(gpu);
        Ok((x, how))
    }
}

/// The SPD solve's preparation from A in host memory: on the GPU where it runs hetla's elementwise
/// kernels (A written once as given, made whole, summed and rounded there), else on the host (A
/// made whole and rounded there, both written).
impl<T: Refinable> Prepared<T> {
    /// From A in host memory.
    fn from_host(device: &Arc<dyn hetla_runtime::Device>, a: MatRef<'_, T>) -> Result<Self> {
        let n = a.nrows();
        let whole = DeviceBuffer::new(device, n, n)?;
        if whole.elementwise() {
            whole.write(0, 0, a)?;
            return Self::on_device(whole, Structure::Hermitian);
        }
        write_hermitian(&whole, a)?;
        let (low, overflow, norm) = lowered_lower(a);
        Ok(Self {
            whole,
            low: DeviceBuffer::from_host(device, low.as_ref())?,
            norm,
            overflow: overflow.map(|(i, j)| (i, j, a[(i, j)].abs_f64())),
        })
    }

    /// A rounded with its diagonal raised by `shift` ([`crate::mixed::raise_factor`]), in the GPU's
    /// memory: from `whole` on the GPU where it runs the elementwise kernels, else from `host`.
    fn raised(
        whole: &DeviceBuffer<T>,
        host: Option<MatRef<'_, T>>,
        shift: f64,
    ) -> Result<DeviceBuffer<T::Low>> {
        let n = whole.matrix().nrows();
        match host {
            Some(a) if !whole.elementwise() => {
                DeviceBuffer::from_host(whole.device(), raised_lower(a, shift).as_ref())
            }
            _ => {
                let mut low = DeviceBuffer::new(whole.device(), n, n)?;
                whole.lower_into(&mut low, raise_factor::<T>(shift), Watched::LowerTriangle)?;
                Ok(low)
            }
        }
    }
}

/// Writes the Hermitian A whose lower triangle is given, whole, into `buffer` (n x n): written by
/// panels of [`PANEL`] columns, each made whole on the host (its rows above the diagonal block from
/// the adjoint of A's rows beside it).
fn write_hermitian<T: Scalar>(buffer: &DeviceBuffer<T>, a: MatRef<'_, T>) -> Result<()> {
    let n = a.nrows();
    for j0 in (0..n).step_by(PANEL) {
        let w = PANEL.min(n - j0);
        let mut panel = Mat::<T>::zeros(n, w);
        panel
            .as_mut()
            .subrows_mut(0, j0)
            .copy_from(a.submatrix(j0, 0, w, j0).adjoint());
        panel
            .as_mut()
            .subrows_mut(j0, n - j0)
            .copy_from(a.submatrix(j0, j0, n - j0, w));
        let diagonal = a.submatrix(j0, j0, w, w).adjoint().to_owned();
        for j in 0..w {
            for i in 0..j {
                panel[(j0 + i, j)] = diagonal[(i, j)];
            }
        }
        buffer.write(0, j0, panel.as_ref())?;
    }
    Ok(())
}
