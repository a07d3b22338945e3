//! QR of a matrix in a GPU's memory, where it lies ([`Qr::factor_device`]), as
//! [`Lu::factor_device`](crate::Lu::factor_device) runs LU's: LAPACK's blocked QR in block columns
//! ([`Algorithm::QrColumns`](crate::Algorithm::QrColumns)) over the device matrix
//! ([`DeviceTiles::in_columns`]), each block column copied within the GPU into the run's replica
//! before the clock starts and back after it stops, every task on that GPU: the panels by
//! cuSOLVER's ?geqrf, their T's made on the host from the Gram matrices and heads they copy back
//! ([`hetla_kernels::reflector_ts`]), the applications by cuBLAS's ?larfb calls with those T's as
//! their arguments. Only the T's and what they are made of cross to the host.
//! [`Qr::factor_from_block_columns`] makes a factor (solves, Q, Q^H B on the host) from the matrix
//! copied back and the T's.

use faer::Mat;
use hetla_factorizations::FACTOR;
use hetla_kernels::Scalar;
use hetla_runtime::{MemoryNode, RunOptions, Trace};

use super::work::{ReflectorWork, execute_columns_on};
use super::{Qr, QrFactor};
use crate::plan::Plan;
use crate::tiles::device::{DeviceMatrix, DeviceTiles};
use crate::{Error, Result};

impl Qr {
    /// Factors `a`, an m x n matrix (m >= n) in the memory of one of the platform's GPUs (the first
    /// whose memory holds it), where it lies, in block columns of the builder's tile: R on and
    /// above the diagonal, the reflectors' vectors below it (their unit first entries implied), as
    /// LAPACK's ?geqrf leaves them, with no copy of it through host memory. Returns the trace of
    /// the run (its makespan: the factorisation on the device, the copies within the device before
    /// and after it left out, as cuSOLVER's ?geqrf on a resident matrix is timed) and each block
    /// column's T's (the inner block's rows, or the block column's width if less, by its width:
    /// LAPACK's ?geqrt layout), which [`Qr::factor_from_block_columns`] takes with the matrix.
    ///
    /// The matrix never comes to the host, so it is not checked for NaN or infinities first. Errors
    /// before any work: a matrix wider than tall, a platform without a GPU whose memory holds the
    /// matrix, or block columns beyond that GPU's memory budget.
    ///
    /// ```
    /// use hetla::{Backend, DeviceMatrix, GpuSelection, ModelStore, Platform, Qr};
    /// // An emulated device, whose memory is host memory (a GPU's buffer: `DeviceMatrix::cuda`).
    /// let devices = GpuSelection::Emulated(1).open(None)?;
    /// let spec = "none".parse()?;
    /// let platform = Platform::with_devices(&spec, Backend::Faer, ModelStore::None, devices)?;
    /// let a = hetla::matgen::random_in::<f64>(300, 120, 7);
    /// let mut factored = a.clone();
    /// let qr = Qr::new().tile(40).platform(platform.into());
    /// let (_, ts) = qr.factor_device(&mut DeviceMatrix::emulated(factored.as_mut())?)?;
    /// // A factor on the host from what the device left: Q R = A.
    /// let f = qr.factor_from_block_columns(factored, ts)?;
    /// let q = f.thin_q()?;
    /// assert!((&q * f.r() - &a).norm_max() < 1e-12);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn factor_device<T: Scalar>(
        &self,
        a: &mut DeviceMatrix<'_, T>,
    ) -> Result<(Trace, Vec<Mat<T>>)> {
        let platform = self.resolve_platform()?;
        let gpu = a.holding_gpu(&platform)?;
        if a.ncols() == 0 {
            let trace = Trace::new(platform.workers().to_vec(), Vec::new(), 0.0);
            return Ok((trace, Vec::new()));
        }
        let plan = self.columns_plan(a.nrows(), a.ncols(), T::PRECISION)?;
        let base = RunOptions {
            scheduler: self.run.scheduler,
            ..RunOptions::default()
        };
        let options = plan.on_device_only(&platform, gpu, base)?;
        let tiling = *plan.blocks(FACTOR).expect("a QR plan tiles its matrix");
        let store = DeviceTiles::in_columns(MemoryNode(gpu + 1), vec![(&*a, tiling)]);
        let (trace, mut ts) = execute_columns_on(&plan, &platform, &store, &options)?;
        let ts = (0..tiling.col_tiles())
            .map(|k| {
                let slot = ReflectorWork::<T>::slot(&tiling, tiling_column(k), false);
                ts[slot].take().ok_or_else(|| Error::InvalidOption {
                    option: "plan",
                    reason: format!("the run ended without block column {k}'s T's"),
                })
            })
            .collect::<Result<_>>()?;
        Ok((trace, ts))
    }

    /// A factor of the m x n matrix `factored` that [`Qr::factor_device`] left (copied to the host)
    /// with its block columns' T's `ts`, as [`Qr::factor`] would have made it with this builder:
    /// its solves, Q and Q^H B run on the platform's cores. Errors: a matrix wider than tall, or
    /// T's that are not one per block column of this builder's tile, each of the inner block's rows
    /// (the block column's width if less) by its width.
    pub fn factor_from_block_columns<T: Scalar>(
        &self,
        factored: Mat<T>,
        ts: Vec<Mat<T>>,
    ) -> Result<QrFactor<T>> {
        let plan = self.columns_plan(factored.nrows(), factored.ncols(), T::PRECISION)?;
        let tiling = *plan.blocks(FACTOR).expect("a QR plan tiles its matrix");
        let shape = |k: usize| {
            let width = tiling.tile_cols(k);
            (self.inner.min(width).max(1), width)
        };
        let wrong = (0..tiling.col_tiles())
            .find(|&k| ts.get(k).is_none_or(|t| (t.nrows(), t.ncols()) != shape(k)));
        if ts.len() != tiling.col_tiles() || wrong.is_some() {
            return Err(Error::InvalidOption {
                option: "ts",
                reason: format!(
                    "{} T's for {} block columns of {} columns{}: expected one per block column, \
                     as Qr::factor_device returns them",
                    ts.len(),
                    tiling.col_tiles(),
                    tiling.tile_cols(0),
                    wrong.map_or(String::new(), |k| format!(
                        ", block column {k}'s not {}x{}",
                        shape(k).0,
                        shape(k).1
                    ))
                ),
            });
        }
        let mut slots: Vec<Option<Mat<T>>> = vec![None; ReflectorWork::<T>::slots(&tiling)];
        for (k, t) in ts.into_iter().enumerate() {
            slots[ReflectorWork::<T>::slot(&tiling, tiling_column(k), false)] = Some(t);
        }
        let platform = self.resolve_platform()?;
        Ok(QrFactor::new(self, factored, slots, &plan, platform))
    }

    /// The plan of LAPACK's blocked QR of an m x n matrix in block columns of this builder's tile,
    /// without right-hand sides; a clear error for a matrix wider than tall or a tile of 0.
    fn columns_plan(
        &self,
        m: usize,
        n: usize,
        precision: hetla_kernels::Precision,
    ) -> Result<Plan> {
        if m < n {
            return Err(Error::InvalidOption {
                option: "A",
                reason: format!(
                    "{m}x{n}: the QR of a matrix in a GPU's memory runs in block columns, which \
                     need at least as many rows as columns"
                ),
            });
        }
        let algorithm = crate::Algorithm::QrColumns {
            m,
            n,
            rhs: 0,
            inner: self.inner,
        };
        Plan::new(algorithm, self.tile_size_for(m, n), precision)
    }
}

/// Block column `k` of a block-column layout: its tile reference (row 0).
fn tiling_column(k: usize) -> hetla_factorizations::TileRef {
    hetla_factorizations::TileRef::new(FACTOR, 0, k)
}
