//! LU on the GPU for matrices in its memory, and LU's mixed solve refined on a GPU.
//!
//! [`Lu::factor_device`] factors a matrix in a GPU's memory where it lies, as
//! [`Cholesky::factor_device`](crate::Cholesky::factor_device) does: LU's graph in block columns
//! over the device matrix ([`DeviceTiles::in_columns`]), each block column copied within the GPU
//! into the run's replica before the clock starts and back after it stops, every task on that GPU
//! (the panels by cuSOLVER's ?getrf, their interchanges copied back to the host for the updates'
//! arguments; the updates and interchanges by ?laswp, ?trsm and ?gemm). Only the interchanges cross
//! to the host.
//!
//! [`Lu::solve_refined`] on a platform with a GPU whose budget holds A in the working precision and
//! the single factor refines there: A is written into the GPU's memory once, A rounded is written
//! beside it and factored there by [`Lu::factor_device`] (with the run's tensor math), the factor
//! kept where it was made; each refinement step runs there: the residual B - A X by one cuBLAS
//! ?gemm on the resident A, the correction by two ?trsm with the resident factor
//! ([`SpanKernel::Solve`](hetla_kernels::elementwise::SpanKernel)) after the row interchanges
//! (`SpanKernel::Interchange`), only the vectors crossing (their precision changes on the host).
//! GMRES-IR's preconditioner is the factor read back, widened on the host and written once, when it
//! first runs. A fallback frees the GPU's copies and factors in double on the platform's workers.
//! [`Lu::solve_refined_device`] does the same for A and B already in the GPU's memory, A copied
//! within it and prepared there (its row sums and its rounding, hetla's elementwise kernels), the
//! fallback in double on the GPU.

use std::rc::Rc;

use faer::{Mat, MatMut, MatRef};
use hetla_kernels::elementwise::{FactorKind, SpanKernel};

use hetla_factorizations::FACTOR;
use hetla_kernels::{DeviceSpan, Scalar};
use hetla_runtime::{MemoryNode, Platform, RunOptions, Trace};

use super::{Lu, Norms};
use crate::check::check_square;
use crate::mixed::device::{Prepared, Structure, check_budget, over_b};
use crate::mixed::{LowFactor, Refinable, Refinement, System, mixed_solve, widened};
use crate::plan::Plan;
use crate::tiles::device::{DeviceBuffer, DeviceMatrix, DeviceTiles};
use crate::{Error, Result};

impl Lu {
    /// Factors `a`, a square matrix in the memory of one of the platform's GPUs (the first whose
    /// memory holds it), where it lies, as [`Lu::factor_in_place`] factors a host matrix: P A = L U
    /// overwrites it (L unit lower, below the diagonal; U on and above it), with no copy of it
    /// through host memory. Returns the trace of the run (its makespan: the factorisation on the
    /// device, the copies within the device before and after it left out, as cuSOLVER's ?getrf on a
    /// resident matrix is timed), the interchanges (0-based: row i was swapped with `ipiv[i]`) and
    /// the first column whose pivot is exactly zero (the factorisation is completed, as LAPACK's).
    ///
    /// The matrix never comes to the host, so it is not checked for NaN or infinities first: they
    /// give a factor with NaNs. Errors before any work: a platform without a GPU whose memory holds
    /// the matrix, or block columns beyond that GPU's memory budget.
    ///
    /// ```
    /// use hetla::{Backend, DeviceMatrix, GpuSelection, Lu, ModelStore, Platform};
    /// // An emulated device, whose memory is host memory; a GPU's buffer is taken by
    /// // `DeviceMatrix::cuda`, and `GpuSelection::All` opens the GPUs.
    /// let devices = GpuSelection::Emulated(1).open(None)?;
    /// let spec = "none".parse()?;
    /// let platform = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices)?;
    /// let mut a = hetla::matgen::random_block_in::<f64>(300, 7, 0..300, 0..300);
    /// let a0 = a.clone();
    /// let (_, ipiv, singular) = Lu::new()
    ///     .tile(100)
    ///     .platform(platform.into())
    ///     .factor_device(&mut DeviceMatrix::emulated(a.as_mut())?)?;
    /// assert_eq!(singular, None);
    /// // L and U are in `a`, as the same LU on the host leaves them.
    /// let on_host = Lu::new().tile(100).factor(a0.as_ref())?;
    /// assert_eq!(ipiv, on_host.pivots());
    /// assert!((a - on_host.storage()).norm_max() < 1e-12);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn factor_device<T: Scalar>(
        &self,
        a: &mut DeviceMatrix<'_, T>,
    ) -> Result<(Trace, Vec<usize>, Option<usize>)> {
        check_square("A", a.nrows(), a.ncols())?;
        let n = a.nrows();
        let this = self.tuned_for(n, T::PRECISION);
        let platform = this.resolve_platform()?;
        let gpu = a.holding_gpu(&platform)?;
        if n == 0 {
            return Ok((
                Trace::new(platform.workers().to_vec(), Vec::new(), 0.0),
                Vec::new(),
                None,
            ));
        }
        let tile = this.checked_tile(&platform, n)?;
        let plan = Plan::new(crate::Algorithm::Lu { n }, tile, T::PRECISION)?;
        let base = RunOptions {
            scheduler: this.run.scheduler,
            tensor_math: this.run.tensor_math,
            ..RunOptions::default()
        };
        let options = plan.on_device_only(&platform, gpu, base)?;
        let tiling = *plan
            .blocks(FACTOR)
            .expect("an LU plan has its block columns");
        let store = DeviceTiles::in_columns(MemoryNode(gpu + 1), vec![(&*a, tiling)]);
        super::work::execute_on(&plan, &platform, &store, &options)
    }

    /// Solves A X = B in place for B, with `lu` and `ipiv` the factor of A and its interchanges
    /// from [`Lu::factor_device`], both matrices in the memory of one GPU (the first whose memory
    /// holds `lu`), with no copy through host memory: X overwrites B (the interchanges applied to
    /// its rows by cuSOLVER's ?laswp, then two cuBLAS ?trsm with L and U, as LAPACK's ?getrs).
    /// Errors before any work: B's rows not the factor's order, interchanges that are not a
    /// factor's of that order, B in another device's memory, or an exactly zero pivot
    /// ([`Error::Singular`], found by reading U's diagonal, n elements).
    pub fn solve_device<T: Scalar>(
        &self,
        lu: &DeviceMatrix<'_, T>,
        ipiv: &[usize],
        b: &mut DeviceMatrix<'_, T>,
    ) -> Result<()> {
        let n = lu.nrows();
        crate::check::check_system("LU", (n, lu.ncols()), b.nrows())?;
        let outside = (ipiv.iter().enumerate()).find(|&(i, &p)| p < i || p >= n);
        if ipiv.len() != n || outside.is_some() {
            return Err(Error::InvalidOption {
                option: "ipiv",
                reason: format!(
                    "{} interchanges for a factor of order {n}{}: expected {n}, the i-th in i..{n}, \
                     as Lu::factor_device returns them",
                    ipiv.len(),
                    outside.map_or(String::new(), |(i, p)| format!(
                        ", interchange {i} with row {p}"
                    ))
                ),
            });
        }
        let platform = self.resolve_platform()?;
        let device = &platform.devices()[lu.holding_gpu(&platform)?].device;
        b.check_on(device.as_ref(), "B")?;
        if n == 0 || b.ncols() == 0 {
            return Ok(());
        }
        // U's diagonal: a row whose elements are ld + 1 apart.
        let diagonal = DeviceSpan {
            rows: 1,
            ld: lu.ld() + 1,
            ..*lu.span()
        };
        let mut pivots = Mat::<T>::zeros(1, n);
        // SAFETY: the diagonal lies in `lu`'s memory of `device` (checked by `holding_gpu`), which
        // its borrow keeps unwritten, and `pivots` is a host matrix of its shape.
        unsafe { device.read_span(&diagonal, T::any_mut(pivots.as_mut())) }?;
        if let Some(column) = (0..n).find(|&j| pivots[(0, j)] == T::from_f64(0.0)) {
            return Err(Error::Singular { column });
        }
        let (factor, b) = (lu.span(), b.span());
        // SAFETY: both spans are memory of `device` (checked), distinct borrows: `b` written, `lu`
        // unwritten while borrowed.
        unsafe {
            device.run_span_kernel(SpanKernel::Interchange { b, ipiv })?;
            device.run_span_kernel(SpanKernel::Solve {
                factor,
                kind: FactorKind::Lu,
                b,
            })?;
        }
        Ok(())
    }

    /// The GPU a mixed solve of order `n` with `rhs` right-hand sides of host matrices refines on:
    /// the platform's first where its budget holds A in the working precision, the single factor, a
    /// run's replicas of it or the factor widened, and the vectors; `None` otherwise (the solve
    /// runs on the platform's workers and refines on the host).
    pub(super) fn refinement_gpu<T: Refinable>(
        &self,
        platform: &Platform,
        n: usize,
        rhs: usize,
    ) -> Option<usize> {
        crate::mixed::gpu_holding::<T>(platform, 0, (n, rhs), COPIES)
    }

    /// Solves A X = B to double accuracy as [`Lu::solve_refined`] does, with A and B in the memory
    /// of one GPU (the first whose memory holds A), where they lie: X overwrites B, A is left as it
    /// was. Everything runs on that GPU: A is copied within it, its row sums (||A||_inf) and its
    /// rounding to single precision made there (hetla's elementwise kernels, compiled by NVRTC),
    /// the single LU made there by [`Lu::factor_device`] (with the run's tensor math) and kept, and
    /// each refinement step's residual and solves made there, only the vectors crossing to the
    /// host; a fallback factors A's copy in double on the GPU. Returns what the solve did
    /// ([`Refinement::device`] is the GPU).
    ///
    /// As for [`Lu::factor_device`], A is not checked before the run as a host matrix is. Errors
    /// before any work: a platform without a GPU whose memory holds A, B elsewhere, a budget that
    /// does not hold A in double, the single factor and a run's copies of either (about (2 x 8 + 4)
    /// n^2 bytes for f64), or a GPU without NVRTC (the error says where it was looked for).
    ///
    /// ```
    /// use hetla::{Backend, DeviceMatrix, GpuSelection, Lu, ModelStore, Platform};
    /// // An emulated device, whose memory is host memory (a GPU's buffer: `DeviceMatrix::cuda`).
    /// let devices = GpuSelection::Emulated(1).open(None)?;
    /// let spec = "none".parse()?;
    /// let platform = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices)?;
    /// let mut a = hetla::matgen::random_conditioned::<f64>(300, 1e3, 7);
    /// let mut b = faer::Mat::<f64>::ones(300, 1);
    /// let (a0, b0) = (a.clone(), b.clone());
    /// let how = Lu::new().tile(100).platform(platform.into()).solve_refined_device(
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
        crate::check::check_system("A", (a.nrows(), a.ncols()), b.nrows())?;
        let (n, platform) = (a.nrows(), self.resolve_platform()?);
        let gpu = a.holding_gpu(&platform)?;
        let device = platform.devices()[gpu].device.clone();
        b.check_on(device.as_ref(), "B")?;
        check_budget::<T>(&platform, (gpu, "platform"), (n, b.ncols()), COPIES)?;
        device.elementwise()?;
        let prepared = Prepared::from_device(&device, a, Structure::General)?;
        over_b(&device, b, |rhs| {
            let solve_full = |mut whole: DeviceBuffer<T>| {
                let mut x = DeviceBuffer::from_host(&device, rhs)?;
                let (_, ipiv, _) = self.factor_device(&mut whole.matrix_mut())?;
                self.solve_device(&whole.matrix(), &ipiv, &mut x.matrix_mut())?;
                x.read()
            };
            self.refine_prepared(gpu, prepared, rhs, solve_full)
        })
    }

    /// The mixed solve of `system` (A X = B, A in host memory) refined on GPU `gpu` (see the module
    /// documentation); `low` is A rounded, whose first overflow `system` names.
    pub(super) fn refined_on_device<T: Refinable>(
        &self,
        gpu: usize,
        (a, norms): (MatRef<'_, T>, Norms),
        system: System<'_, T>,
        low: Mat<T::Low>,
    ) -> Result<(Mat<T>, Refinement)> {
        let platform = self.resolve_platform()?;
        let device = platform.devices()[gpu].device.clone();
        let whole = DeviceBuffer::from_host(&device, a)?;
        let low = DeviceBuffer::from_host(&device, low.as_ref())?;
        let prepared = Prepared {
            whole,
            low,
            norm: system.norm,
            overflow: system.overflow,
        };
        let solve_full = |whole: DeviceBuffer<T>| {
            // A's copy leaves the GPU's memory before the platform's run needs it.
            drop(whole);
            self.factor_checked(a.to_owned(), norms)?.solve(system.b)
        };
        self.refine_prepared(gpu, prepared, system.b, solve_full)
    }

    /// The refinement on GPU `gpu` from `prepared`: the rounded A factored where it lies by
    /// [`Lu::factor_device`] (with the run's tensor math) and kept, and each step on the GPU: the
    /// residual B - A X by one cuBLAS ?gemm on A, the correction by the interchanges and two ?trsm
    /// with the factor (in single precision), only the vectors crossing to the host, where their
    /// precision changes. GMRES-IR's preconditioner is the factor widened to the working precision
    /// (read back, widened on the host and written once, when it first runs). `solve_full` is the
    /// fallback in double, given A's copy.
    fn refine_prepared<T: Refinable>(
        &self,
        gpu: usize,
        prepared: Prepared<T>,
        b: MatRef<'_, T>,
        solve_full: impl FnOnce(DeviceBuffer<T>) -> Result<Mat<T>>,
    ) -> Result<(Mat<T>, Refinement)> {
        let Prepared {
            whole,
            mut low,
            norm,
            overflow,
        } = prepared;
        let device = whole.device().clone();
        let system = System { b, norm, overflow };
        let a_copy = std::cell::RefCell::new(Some(whole));
        let factor_low = || {
            let (_, ipiv, singular) = self.factor_device(&mut low.matrix_mut())?;
            if let Some(column) = singular {
                return Ok(Err(super::zero_pivot::<T>(column)));
            }
            let (resident, ipiv) = (Rc::new(low), Rc::new(ipiv));
            let (factor, pivots) = (resident.clone(), ipiv.clone());
            let solve_low = move |r: MatRef<'_, T::Low>| {
                let mut r = DeviceBuffer::from_host(factor.device(), r)?;
                factor.solve_lu(&pivots, &mut r)?;
                r.read()
            };
            let wide = std::cell::OnceCell::new();
            let precondition = move |mut x: MatMut<'_, T>| {
                if wide.get().is_none() {
                    let widened = widened::<T>(resident.read()?.as_ref());
                    let _ = wide.set(DeviceBuffer::from_host(&device, widened.as_ref())?);
                }
                let wide: &DeviceBuffer<T> = wide.get().expect("set above");
                let mut on_device = DeviceBuffer::from_host(&device, x.as_ref())?;
                wide.solve_lu(&ipiv, &mut on_device)?;
                x.copy_from(on_device.read()?);
                Ok(())
            };
            Ok(Ok(LowFactor {
                solve_low,
                precondition,
                shift: 0.0,
            }))
        };
        let residual = |x: MatRef<'_, T>, b: MatRef<'_, T>| match &*a_copy.borrow() {
            Some(a) => a.residual(x, b),
            None => unreachable!("A's copy is taken only by the fallback"),
        };
        let fallback = || solve_full(a_copy.borrow_mut().take().expect("taken only here"));
        let (x, mut how) = mixed_solve(system, factor_low, residual, fallback)?;
        how.device = Some(gpu);
        Ok((x, how))
    }
}

/// Matrices of A's order in the working precision a mixed general solve on a GPU holds at once
/// besides the single factor: A, and a run's replicas of the factor or the factor widened.
const COPIES: usize = 2;
