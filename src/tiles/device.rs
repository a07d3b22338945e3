//! Matrices that live in a GPU's memory ([`DeviceMatrix`]) and the tile store over them
//! ([`DeviceTiles`]): the runtime takes each tile into a device replica by a copy within the device
//! and puts it back the same way, so that a factorisation of a caller's device buffer makes no copy
//! through host memory.
//!
//! The design rides on what the runtime has: the store gives every tile a home in the device's
//! memory ([`hetla_runtime::DeviceHome`]), which the data registry's host node stands for; the run
//! places every tile on the device before its clock starts (its imports), runs with
//! [`hetla_runtime::WriteBack::Resident`] (no tile leaves the device while the run goes on), and
//! its flush exports the written tiles back into the buffer. The store has no host view of any
//! tile, so such a run is restricted to the device (a CPU cluster could not read a tile).

use std::marker::PhantomData;

use std::sync::Arc;

use faer::{Mat, MatMut, MatRef};
use hetla_factorizations::{TileRef, Tiling};
use hetla_kernels::elementwise::{FactorKind, SpanKernel, SpanOutput, Watched};
use hetla_kernels::{DeviceSpan, Scalar};
use hetla_runtime::{Device, DeviceHome, DeviceMemory, MemoryNode};

use super::TileStore;
use crate::{Error, Result};

/// A column-major matrix in a GPU's memory, borrowed for `'a`: what
/// [`Cholesky::factor_device`](crate::Cholesky::factor_device) and
/// [`Cholesky::solve_device`](crate::Cholesky::solve_device) factor and solve where it lies.
///
/// Made from a cudarc buffer ([`DeviceMatrix::cuda`], feature `cuda`), from a raw device address
/// ([`DeviceMatrix::from_raw_parts`]), or from host memory, which is the memory of an emulated
/// device ([`DeviceMatrix::emulated`], for tests and for machines without a GPU). Which GPU holds
/// it is checked when a run starts: memory of another GPU, host memory given as a GPU's or a matrix
/// running past its allocation is an error before any work.
#[derive(Debug)]
pub struct DeviceMatrix<'a, T: Scalar> {
    span: DeviceSpan,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T: Scalar> DeviceMatrix<'a, T> {
    /// The `rows x cols` matrix at the start of `buffer`, columns `ld` elements apart
    /// (`ld >= rows`, LAPACK's leading dimension), its elements of type `T` whatever the buffer's
    /// element type `E` (a complex matrix can sit in a buffer of `f64` pairs or of bytes). The
    /// buffer must hold `ld * (cols - 1) + rows` elements of `T`. Work queued on the buffer's
    /// stream is waited for first; every copy a run makes into the buffer is done when the run
    /// returns.
    #[cfg(feature = "cuda")]
    pub fn cuda<E: hetla_kernels::cudarc::driver::DeviceRepr>(
        buffer: &'a mut hetla_kernels::cudarc::driver::CudaSlice<E>,
        rows: usize,
        cols: usize,
        ld: usize,
    ) -> Result<Self> {
        use hetla_kernels::cudarc::driver::DevicePtrMut;
        let bytes = buffer.num_bytes();
        let stream = buffer.stream().clone();
        stream.synchronize().map_err(|e| {
            Error::Kernel(hetla_kernels::KernelError::Gpu {
                message: format!("waiting for the work queued on the matrix's buffer: {e:?}"),
            })
        })?;
        let (addr, written) = buffer.device_ptr_mut(&stream);
        drop(written);
        // SAFETY: the address is the start of `buffer`, a device allocation of `bytes` bytes
        // borrowed mutably for 'a; the span is checked to fit below.
        let matrix = unsafe { Self::from_raw_parts(addr, rows, cols, ld) }?;
        if matrix.span.extent() > bytes {
            return Err(Error::Layout {
                what: "A",
                reason: format!(
                    "the buffer has {bytes} bytes, too few for a {rows}x{cols} matrix of {} with \
                     leading dimension {ld} ({} bytes)",
                    T::PRECISION,
                    matrix.span.extent()
                ),
            });
        }
        Ok(matrix)
    }

    /// The `rows x cols` matrix at device address `addr`, columns `ld` elements apart
    /// (`ld >= rows`; any `ld >= 1` for an empty matrix).
    ///
    /// # Safety
    /// `addr` must be the address of `ld * (cols - 1) + rows` elements of `T` in a device's memory
    /// (a GPU's, or host memory for an emulated device), which nothing else reads or writes while
    /// the matrix lives.
    pub unsafe fn from_raw_parts(addr: u64, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        if ld < rows.max(1) {
            return Err(Error::Layout {
                what: "A",
                reason: format!(
                    "leading dimension {ld} is less than the {rows} rows (expected ld >= max(1, \
                     rows))"
                ),
            });
        }
        Ok(Self {
            span: DeviceSpan {
                addr,
                rows,
                cols,
                ld,
                precision: T::PRECISION,
            },
            _borrow: PhantomData,
        })
    }

    /// A column-major matrix in host memory, which is the memory of an emulated device
    /// ([`hetla_runtime::EmulatedDevice`]): a run on an emulated device takes its tiles from it and
    /// puts them back as it would with a GPU's buffer. A real GPU refuses it (host memory is not
    /// its memory).
    pub fn emulated(a: MatMut<'a, T>) -> Result<Self> {
        let (rows, cols) = (a.nrows(), a.ncols());
        let ld = super::column_major_ld("A", a.row_stride(), a.col_stride(), rows, cols)?;
        // SAFETY: `a` is `rows x cols` elements of T with columns `ld` apart, borrowed mutably for
        // 'a, and host memory is an emulated device's memory.
        unsafe { Self::from_raw_parts(a.as_ptr_mut() as u64, rows, cols, ld) }
    }

    /// Rows.
    pub fn nrows(&self) -> usize {
        self.span.rows
    }

    /// Columns.
    pub fn ncols(&self) -> usize {
        self.span.cols
    }

    /// The leading dimension: elements between the starts of two columns.
    pub fn ld(&self) -> usize {
        self.span.ld
    }

    /// The memory it spans, as a device addresses it ([`Device::import`] and [`Device::export`]
    /// copy tiles between it and a run's replicas).
    pub fn span(&self) -> &DeviceSpan {
        &self.span
    }

    /// The first of `platform`'s GPUs whose memory holds it (the GPU a factorisation of it runs
    /// on); an error naming what is wrong otherwise.
    pub(crate) fn holding_gpu(&self, platform: &hetla_runtime::Platform) -> Result<usize> {
        let devices = platform.devices();
        if let Some(gpu) =
            (devices.iter()).position(|d| self.check_on(d.device.as_ref(), "A").is_ok())
        {
            return Ok(gpu);
        }
        match devices.first() {
            // The first GPU's reason (another GPU's memory, host memory given as a GPU's, ...).
            Some(first) => self.check_on(first.device.as_ref(), "A").map(|()| 0),
            None => Err(Error::InvalidOption {
                option: "platform",
                reason: "a factorisation of a matrix in a GPU's memory needs a platform with that \
                         GPU (GpuSelection::All, or emulated devices for a matrix in host \
                         memory); this one has none"
                    .into(),
            }),
        }
    }

    /// Whether `device`'s memory holds it (see [`hetla_runtime::Device::check_span`]), else the
    /// layout error of the argument `what`.
    pub(crate) fn check_on(&self, device: &dyn Device, what: &'static str) -> Result<()> {
        device.check_span(&self.span).map_err(|e| Error::Layout {
            what,
            reason: e.to_string(),
        })
    }
}

/// A matrix in a device's own memory that hetla allocates and holds across runs (a mixed solve's A
/// and single factor, [`crate::Cholesky::solve_refined`] on a GPU): written from and read into host
/// matrices, lent to runs as a [`DeviceMatrix`]. Freed when dropped.
pub(crate) struct DeviceBuffer<T: Scalar> {
    memory: DeviceMemory,
    device: Arc<dyn Device>,
    _elements: PhantomData<T>,
}

impl<T: Scalar> DeviceBuffer<T> {
    /// A `rows x cols` matrix of zeros in `device`'s memory (outside its budget of tiles).
    pub fn new(device: &Arc<dyn Device>, rows: usize, cols: usize) -> Result<Self> {
        let memory = device.allocate_span((T::PRECISION, rows, cols))?;
        Ok(Self {
            memory,
            device: device.clone(),
            _elements: PhantomData,
        })
    }

    /// The device whose memory holds it.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// A copy of the host matrix `m` in `device`'s memory.
    pub fn from_host(device: &Arc<dyn Device>, m: MatRef<'_, T>) -> Result<Self> {
        let buffer = Self::new(device, m.nrows(), m.ncols())?;
        buffer.write(0, 0, m)?;
        Ok(buffer)
    }

    /// Copies the host matrix `m` into the block whose first element is (`row`, `col`).
    pub fn write(&self, row: usize, col: usize, m: MatRef<'_, T>) -> Result<()> {
        let span = self.block(row, col, m.nrows(), m.ncols())?;
        // A copy with contiguous columns when `m` has none (a view of a row block, say).
        let owned;
        let m = if m.row_stride() == 1 {
            m
        } else {
            owned = m.to_owned();
            owned.as_ref()
        };
        // SAFETY: the block lies in this buffer's memory of `device`, which it alone uses (runs
        // borrow it through `matrix`/`matrix_mut`, which borrow the buffer).
        unsafe { self.device.write_span(&span, T::any_ref(m)) }?;
        Ok(())
    }

    /// The whole matrix, copied into host memory.
    pub fn read(&self) -> Result<Mat<T>> {
        let span = self.memory.span();
        self.read_block(0, 0, span.rows, span.cols)
    }

    /// The `rows x cols` block whose first element is (`row`, `col`), copied into host memory.
    pub fn read_block(&self, row: usize, col: usize, rows: usize, cols: usize) -> Result<Mat<T>> {
        let span = self.block(row, col, rows, cols)?;
        let mut m = Mat::<T>::zeros(rows, cols);
        // SAFETY: as in `write`.
        unsafe { self.device.read_span(&span, T::any_mut(m.as_mut())) }?;
        Ok(m)
    }

    /// Copies `m`, a matrix of its shape in its device's memory, into it (within the device).
    pub fn copy_from(&mut self, m: &DeviceMatrix<'_, T>) -> Result<()> {
        m.check_on(self.device.as_ref(), "A")?;
        let (from, to) = (m.span(), self.memory.span());
        // SAFETY: `m`'s span is memory of this device (checked above) that its borrow keeps
        // unwritten, and this buffer's is borrowed mutably.
        unsafe { self.run(SpanKernel::Copy { from, to }) }?;
        Ok(())
    }

    /// `r` <- `r` - self `x`, on the device (one cuBLAS ?gemm on a GPU): a refinement step's
    /// residual on the resident A.
    pub fn subtract_product(&self, x: &DeviceBuffer<T>, r: &mut DeviceBuffer<T>) -> Result<()> {
        device_of_both(self, x)?;
        device_of_both(self, r)?;
        let (a, x, r) = (self.memory.span(), x.memory.span(), r.memory.span());
        // SAFETY: the three spans are the buffers' memory of one device (checked), `r` borrowed
        // mutably, the others unwritten while borrowed.
        unsafe { self.run(SpanKernel::Product { a, x, r }) }?;
        Ok(())
    }

    /// `b` <- the solution of this factor's system (`kind`: Cholesky's L, or LU's L and U with the
    /// interchanges applied to `b` before), on the device (two cuBLAS ?trsm on a GPU): a refinement
    /// step's correction with the resident factor.
    pub fn solve(&self, kind: FactorKind, b: &mut DeviceBuffer<T>) -> Result<()> {
        device_of_both(self, b)?;
        let (factor, b) = (self.memory.span(), b.memory.span());
        // SAFETY: as in `subtract_product`.
        unsafe { self.run(SpanKernel::Solve { factor, kind, b }) }?;
        Ok(())
    }

    /// `b` <- the solution of this LU factor's system with its interchanges `ipiv` (applied to
    /// `b`'s rows first), on the device (cuSOLVER's ?laswp and two cuBLAS ?trsm on a GPU).
    pub fn solve_lu(&self, ipiv: &[usize], b: &mut DeviceBuffer<T>) -> Result<()> {
        device_of_both(self, b)?;
        let span = b.memory.span();
        // SAFETY: `b`'s span is its memory of this device (checked), borrowed mutably.
        unsafe { self.run(SpanKernel::Interchange { b: span, ipiv }) }?;
        self.solve(FactorKind::Lu, b)
    }

    /// B - self X for the host matrices `x` and `b` (their copies written, the residual read back):
    /// a refinement step's residual on the resident A.
    pub fn residual(&self, x: MatRef<'_, T>, b: MatRef<'_, T>) -> Result<Mat<T>> {
        let x = DeviceBuffer::from_host(&self.device, x)?;
        let mut r = DeviceBuffer::from_host(&self.device, b)?;
        self.subtract_product(&x, &mut r)?;
        r.read()
    }

    /// The solution of this factor's system (`kind`) for the host matrix `b` (its copy written, the
    /// solution read back): a refinement step's correction with the resident factor.
    pub fn solve_host(&self, kind: FactorKind, b: MatRef<'_, T>) -> Result<Mat<T>> {
        let mut b = DeviceBuffer::from_host(&self.device, b)?;
        self.solve(kind, &mut b)?;
        b.read()
    }

    /// Runs `kernel` on its device.
    ///
    /// # Safety
    /// As [`Device::run_span_kernel`].
    unsafe fn run(&self, kernel: SpanKernel<'_>) -> Result<SpanOutput> {
        // SAFETY: the caller's contract.
        Ok(unsafe { self.device.run_span_kernel(kernel) }?)
    }

    /// The matrix as a run reads it (pass it by shared reference: a run writes only the matrices it
    /// is given mutably, which [`DeviceBuffer::matrix_mut`] lends).
    pub fn matrix(&self) -> DeviceMatrix<'_, T> {
        DeviceMatrix {
            span: *self.memory.span(),
            _borrow: PhantomData,
        }
    }

    /// The matrix as a run writes it.
    pub fn matrix_mut(&mut self) -> DeviceMatrix<'_, T> {
        self.matrix()
    }

    /// Whether its device runs hetla's elementwise kernels ([`Device::elementwise`]).
    pub fn elementwise(&self) -> bool {
        self.device.elementwise().is_ok()
    }

    /// Sets its strict upper triangle (square, d or z) to the adjoint of its strict lower one, on
    /// the device.
    pub fn mirror_lower(&mut self) -> Result<()> {
        // SAFETY: the span is this buffer's memory of `device`, borrowed mutably.
        unsafe { self.run(SpanKernel::Mirror(self.memory.span())) }?;
        Ok(())
    }

    /// The sums of the moduli of each of its columns (d or z), computed on the device.
    pub fn column_norms(&self) -> Result<Vec<f64>> {
        // SAFETY: the span is this buffer's memory of `device`, which nothing writes while it is
        // borrowed.
        Ok(unsafe { self.run(SpanKernel::ColumnNorms(self.memory.span())) }?.norms())
    }

    /// The sums of the moduli of each of its rows (d or z), computed on the device.
    pub fn row_norms(&self) -> Result<Vec<f64>> {
        // SAFETY: as in `column_norms`.
        Ok(unsafe { self.run(SpanKernel::RowNorms(self.memory.span())) }?.norms())
    }

    /// Writes it (d or z) rounded to single precision into `low` (s or c, of its shape, on the same
    /// device), the real part of each diagonal entry multiplied by `factor` first, on the device;
    /// the first entry where `watched` that overflowed, if any.
    pub fn lower_into<L: Scalar>(
        &self,
        low: &mut DeviceBuffer<L>,
        factor: f64,
        watched: Watched,
    ) -> Result<Option<(usize, usize)>> {
        // SAFETY: both spans are the buffers' memory of `device` (one device: the caller's
        // contract, checked by the device's span check), `low` borrowed mutably, `self` unwritten.
        device_of_both(self, low)?;
        let (from, to) = (self.memory.span(), low.memory.span());
        let kernel = SpanKernel::Lower {
            from,
            to,
            factor,
            watched,
        };
        Ok(unsafe { self.run(kernel) }?.overflow())
    }

    fn block(&self, row: usize, col: usize, rows: usize, cols: usize) -> Result<DeviceSpan> {
        let span = self.memory.span();
        span.block(row, col, rows, cols)
            .ok_or_else(|| Error::Layout {
                what: "a device matrix's block",
                reason: format!(
                    "{rows} x {cols} at ({row}, {col}) does not lie in the {} x {} matrix",
                    span.rows, span.cols
                ),
            })
    }
}

/// An error unless the two buffers lie on one device.
fn device_of_both<A: Scalar, B: Scalar>(a: &DeviceBuffer<A>, b: &DeviceBuffer<B>) -> Result<()> {
    if Arc::ptr_eq(&a.device, &b.device) {
        return Ok(());
    }
    Err(Error::Layout {
        what: "a device matrix",
        reason: "a kernel on matrices of two devices".into(),
    })
}

/// The matrices of a run that live in the memory of the device of memory node `node`, tiled by
/// their plan, indexed by `MatrixId` (`matrices[id.0]`): every tile's home is its block of the
/// device's memory, and none has a host view.
pub(crate) struct DeviceTiles<'s, 'a, T: Scalar> {
    node: MemoryNode,
    matrices: Vec<(&'s DeviceMatrix<'a, T>, Tiling)>,
    /// Whether tile (0, j) is block column j of the tiling, every row (LU's plans), rather than
    /// tile (i, j) of it.
    columns: bool,
}

impl<'s, 'a, T: Scalar> DeviceTiles<'s, 'a, T> {
    /// `matrices` on the device of `node`, each with its tiling (of its shape).
    pub fn new(node: MemoryNode, matrices: Vec<(&'s DeviceMatrix<'a, T>, Tiling)>) -> Self {
        debug_assert!(
            matrices
                .iter()
                .all(|(m, t)| (m.nrows(), m.ncols()) == (t.rows(), t.cols()))
        );
        Self {
            node,
            matrices,
            columns: false,
        }
    }

    /// `matrices` on the device of `node` in whole block columns of their tilings' width (as
    /// [`ColumnBlocks`](super::ColumnBlocks) holds a host matrix).
    pub fn in_columns(node: MemoryNode, matrices: Vec<(&'s DeviceMatrix<'a, T>, Tiling)>) -> Self {
        Self {
            columns: true,
            ..Self::new(node, matrices)
        }
    }
}

impl<T: Scalar> TileStore<T> for DeviceTiles<'_, '_, T> {
    fn tile(&self, _: TileRef) -> Option<MatRef<'_, T>> {
        None
    }

    unsafe fn tile_mut(&self, _: TileRef) -> Option<MatMut<'_, T>> {
        None
    }

    fn device_home(&self, tile: TileRef) -> Option<DeviceHome> {
        let (m, tiling) = self.matrices.get(tile.matrix.0 as usize)?;
        let rows = if self.columns { 1 } else { tiling.row_tiles() };
        if tile.row >= rows || tile.col >= tiling.col_tiles() {
            return None;
        }
        let ((row, rows), cols) = match self.columns {
            true => ((0, tiling.rows()), tiling.tile_cols(tile.col)),
            false => {
                let (rows, cols) = tiling.tile_shape(tile.row, tile.col);
                ((tiling.offset(tile.row), rows), cols)
            }
        };
        let span = m.span().block(row, tiling.offset(tile.col), rows, cols)?;
        // SAFETY: the block lies in the matrix's span, memory of the device of `node` that the
        // matrix borrows (the contract of its constructors) for longer than the run; tiles of one
        // tiling are disjoint blocks, and the matrices of a run are distinct borrows.
        Some(unsafe { DeviceHome::new(self.node, span) })
    }
}
