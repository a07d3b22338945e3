//! GPU tile kernels: POTRF through cuSOLVER, the others through cuBLAS, on one device,
//! with cudarc (cargo feature `cuda`, on by default).
//!
//! The CUDA libraries are loaded when first used, never linked, so this module builds on
//! any machine; [`crate::cuda_libs`] finds them without `LD_LIBRARY_PATH`. cudarc panics when a library it needs cannot be loaded; every entry point
//! here checks first ([`driver_present`], and the cuBLAS and cuSOLVER libraries in
//! [`GpuContext::new`]), so a machine without a driver simply has no GPU and a missing
//! library is an error that says which one.
//!
//! A [`GpuContext`] owns one device's context and three streams: kernels run on the
//! compute stream, uploads on the host-to-device stream, downloads on the device-to-host
//! stream. cudarc records an event on each use of a device buffer and makes the next
//! stream that uses it wait for that event, so an upload followed by a kernel on the other
//! stream is ordered without a host-side wait.
//!
//! Host memory: the tiles live in the caller's matrix, which is pageable and strided (a
//! tile of a column-major matrix with a larger leading dimension). Transfers therefore go
//! through page-locked **staging buffers** owned by the context, a few per tile size,
//! reused round-robin. An upload packs the tile into a staging buffer and queues the copy:
//! it returns before the copy ends, and the buffer is reused only once that copy is done.
//! A download queues the copy into a staging buffer, waits for it, and unpacks it into the
//! tile. The caller's matrix is never page-locked.
//!
//! Device tiles ([`GpuTile`]) are contiguous, column-major, with leading dimension = rows.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::cublas::{CudaBlas, sys as blas};
use cudarc::cusolver::{DnHandle, sys as solver};
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
};
use faer::{MatMut, MatRef};

use crate::{KernelError, Op};

/// Staging buffers kept per tile size: enough for copies of several tiles to be in flight.
const STAGING_PER_SIZE: usize = 4;

fn gpu_error(what: &str, error: impl std::fmt::Debug) -> KernelError {
    KernelError::Gpu {
        message: format!("{what} failed: {error:?}"),
    }
}

/// Whether the CUDA driver library (libcuda) can be loaded on this machine.
pub fn driver_present() -> bool {
    // SAFETY: only opens the library by name to see whether it loads; no symbol is used.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Number of CUDA devices: 0 without a driver, or when the driver reports none (or fails).
/// (Names and memory sizes: `hetla_clusters::gpus`.)
pub fn device_count() -> usize {
    if !driver_present() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// A tile in device memory: contiguous, column-major, leading dimension = rows.
pub struct GpuTile {
    data: CudaSlice<f64>,
    rows: usize,
    cols: usize,
}

impl GpuTile {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of device memory it holds.
    pub fn bytes(&self) -> usize {
        self.rows * self.cols * size_of::<f64>()
    }
}

/// POTRF's device-side scratch: its workspace and its `devInfo`.
struct PotrfScratch {
    work: CudaSlice<f64>,
    info: CudaSlice<i32>,
}

/// One device: its context, compute and copy streams, cuBLAS and cuSOLVER handles, and
/// page-locked staging buffers.
pub struct GpuContext {
    index: usize,
    name: String,
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    h2d: Arc<CudaStream>,
    d2h: Arc<CudaStream>,
    blas: CudaBlas,
    solver: DnHandle,
    potrf: Mutex<PotrfScratch>,
    /// Staging buffers by length in elements, least recently used first.
    staging: Mutex<HashMap<usize, VecDeque<PinnedHostSlice<f64>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values are replaced whole or not at all: a panic cannot corrupt them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn int(value: usize) -> Result<i32, KernelError> {
    crate::error::blas_int(value, "cuda")
}

impl GpuContext {
    /// Opens device `index`: a context, three streams, and the cuBLAS and cuSOLVER handles.
    /// Errors name the library that cannot be loaded or the device that does not exist.
    pub fn new(index: usize) -> Result<Self, KernelError> {
        if !driver_present() {
            return Err(KernelError::Gpu {
                message: format!(
                    "the CUDA driver cannot be loaded: {}",
                    crate::cuda_libs::driver().error.unwrap_or_default()
                ),
            });
        }
        // Open cuBLAS, cuSOLVER and what they need by absolute path first, so that cudarc
        // finds them by name (see `cuda_libs`).
        if let Some(lib) = crate::cuda_libs::libraries().iter().find(|l| !l.loaded()) {
            return Err(KernelError::Gpu {
                message: format!(
                    "the {} library cannot be loaded: {}",
                    lib.name,
                    lib.error.as_deref().unwrap_or("unknown error")
                ),
            });
        }
        // SAFETY: only open the libraries by name to see whether they load.
        if !unsafe { blas::is_culib_present() } || !unsafe { solver::is_culib_present() } {
            return Err(KernelError::Gpu {
                message:
                    "cuBLAS and cuSOLVER were loaded by path but cudarc cannot open them by name"
                        .into(),
            });
        }
        let count = device_count();
        if index >= count {
            return Err(KernelError::Gpu {
                message: format!("there is no GPU {index}: this machine has {count}"),
            });
        }
        let ctx = CudaContext::new(index).map_err(|e| gpu_error("opening the device", e))?;
        let name = ctx.name().map_err(|e| gpu_error("reading its name", e))?;
        let stream = || {
            ctx.new_stream()
                .map_err(|e| gpu_error("creating a stream", e))
        };
        let (compute, h2d, d2h) = (stream()?, stream()?, stream()?);
        let blas = CudaBlas::new(compute.clone()).map_err(|e| gpu_error("cublasCreate", e))?;
        let solver =
            DnHandle::new(compute.clone()).map_err(|e| gpu_error("cusolverDnCreate", e))?;
        let alloc = |what, e| gpu_error(what, e);
        let potrf = PotrfScratch {
            work: compute
                .alloc_zeros(1)
                .map_err(|e| alloc("allocating POTRF's workspace", e))?,
            info: compute
                .alloc_zeros(1)
                .map_err(|e| alloc("allocating POTRF's devInfo", e))?,
        };
        Ok(Self {
            index,
            name,
            ctx,
            compute,
            h2d,
            d2h,
            blas,
            solver,
            potrf: Mutex::new(potrf),
            staging: Mutex::new(HashMap::new()),
        })
    }

    /// The device's index (CUDA ordinal).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The device's name ("NVIDIA H100 80GB HBM3").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// (free, total) device memory in bytes now.
    pub fn memory(&self) -> Result<(usize, usize), KernelError> {
        self.ctx
            .mem_get_info()
            .map_err(|e| gpu_error("cuMemGetInfo", e))
    }

    fn bind(&self) -> Result<(), KernelError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| gpu_error("binding the context", e))
    }

    /// A `rows x cols` tile of device memory, contents unset (an upload or a kernel
    /// writes it before it is read).
    pub fn alloc(&self, rows: usize, cols: usize) -> Result<GpuTile, KernelError> {
        self.bind()?;
        // SAFETY: f64 has no invalid bit pattern, so reading unset memory cannot produce
        // an invalid value; every caller uploads into the tile before a kernel uses it.
        let data = unsafe { self.h2d.alloc::<f64>((rows * cols).max(1)) }
            .map_err(|e| gpu_error("allocating device memory for a tile", e))?;
        Ok(GpuTile { data, rows, cols })
    }

    /// A `rows x cols` tile of device memory set to zeros (for a tile a kernel overwrites
    /// unread: no stale contents can leak into it).
    pub fn alloc_zeroed(&self, rows: usize, cols: usize) -> Result<GpuTile, KernelError> {
        self.bind()?;
        let data = self
            .h2d
            .alloc_zeros::<f64>((rows * cols).max(1))
            .map_err(|e| gpu_error("allocating device memory for a tile", e))?;
        Ok(GpuTile { data, rows, cols })
    }

    /// A staging buffer of `len` elements whose previous copy, if any, is done.
    fn take_staging(&self, len: usize) -> Result<PinnedHostSlice<f64>, KernelError> {
        let reuse = {
            let mut pool = lock(&self.staging);
            let queue = pool.entry(len).or_default();
            if queue.len() >= STAGING_PER_SIZE {
                queue.pop_front()
            } else {
                None
            }
        };
        match reuse {
            Some(buffer) => Ok(buffer),
            // Flags 0: plain page-locked memory (not write-combined, which is slow for the
            // host to read back after a download).
            // SAFETY: the buffer's contents are unset; every use writes it before reading.
            None => unsafe { self.ctx.alloc_pinned_with_flags::<f64>(len, 0) }
                .map_err(|e| gpu_error("allocating page-locked staging memory", e)),
        }
    }

    fn give_back_staging(&self, buffer: PinnedHostSlice<f64>) {
        lock(&self.staging)
            .entry(buffer.len())
            .or_default()
            .push_back(buffer);
    }

    fn check_same_shape(tile: &GpuTile, rows: usize, cols: usize) -> Result<(), KernelError> {
        if (tile.rows, tile.cols) == (rows, cols) {
            Ok(())
        } else {
            Err(KernelError::Gpu {
                message: format!(
                    "a copy between a {rows}x{cols} host tile and a {}x{} device tile",
                    tile.rows, tile.cols
                ),
            })
        }
    }

    /// A staging buffer for a copy between `tile` and a `rows x cols` host tile, with the
    /// context bound; `None` for an empty tile (nothing to copy). Shapes are checked.
    fn staging_for(
        &self,
        tile: &GpuTile,
        rows: usize,
        cols: usize,
    ) -> Result<Option<PinnedHostSlice<f64>>, KernelError> {
        Self::check_same_shape(tile, rows, cols)?;
        if rows * cols == 0 {
            return Ok(None);
        }
        self.bind()?;
        self.take_staging(rows * cols).map(Some)
    }

    /// Queues the copy of a host tile into `dst` on the host-to-device stream; returns once
    /// the tile is packed into a staging buffer, before the copy ends. Kernels that use
    /// `dst` later wait for the copy.
    pub fn upload(&self, src: MatRef<'_, f64>, dst: &mut GpuTile) -> Result<(), KernelError> {
        let (rows, cols) = (src.nrows(), src.ncols());
        let Some(mut buffer) = self.staging_for(dst, rows, cols)? else {
            return Ok(());
        };
        let packed = buffer
            .as_mut_slice()
            .map(|packed| MatMut::from_column_major_slice_mut(packed, rows, cols).copy_from(src))
            .map_err(|e| gpu_error("waiting for a staging buffer", e));
        let result = packed.and_then(|()| {
            self.h2d
                .memcpy_htod(&buffer, &mut dst.data)
                .map_err(|e| gpu_error("cuMemcpyHtoDAsync", e))
        });
        self.give_back_staging(buffer);
        result
    }

    /// Waits until every queued upload has arrived.
    pub fn wait_uploads(&self) -> Result<(), KernelError> {
        self.h2d
            .synchronize()
            .map_err(|e| gpu_error("waiting for the uploads", e))
    }

    /// Copies `src` into a host tile; returns when the data is there.
    pub fn download(&self, src: &GpuTile, mut dst: MatMut<'_, f64>) -> Result<(), KernelError> {
        let (rows, cols) = (dst.nrows(), dst.ncols());
        let Some(mut buffer) = self.staging_for(src, rows, cols)? else {
            return Ok(());
        };
        let result = self
            .d2h
            .memcpy_dtoh(&src.data, &mut buffer)
            .map_err(|e| gpu_error("cuMemcpyDtoHAsync", e))
            .and_then(|()| {
                let host = buffer
                    .as_slice()
                    .map_err(|e| gpu_error("waiting for a download", e))?;
                dst.copy_from(MatRef::from_column_major_slice(host, rows, cols));
                Ok(())
            });
        self.give_back_staging(buffer);
        result
    }

    /// Runs `op` on device tiles (reads in [`Op`]'s order, then the written tile) on the
    /// compute stream, and returns when the kernel has finished. Shapes are checked first.
    pub fn run(&self, op: Op, reads: &[&GpuTile], write: &mut GpuTile) -> Result<(), KernelError> {
        let mut shapes: Vec<_> = reads.iter().map(|t| (t.rows, t.cols)).collect();
        shapes.push((write.rows, write.cols));
        op.check_shapes(&shapes)
            .map_err(|reason| KernelError::Operands { op, reason })?;
        if write.rows == 0 || write.cols == 0 {
            return Ok(());
        }
        self.bind()?;
        if op == Op::Potrf {
            return self.potrf(write);
        }
        use blas::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT as NON_UNIT;
        use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
        use blas::cublasOperation_t::{CUBLAS_OP_N as N, CUBLAS_OP_T as T};
        use blas::cublasSideMode_t::{CUBLAS_SIDE_LEFT as LEFT, CUBLAS_SIDE_RIGHT as RIGHT};
        let s = &self.compute;
        let h = *self.blas.handle();
        let (one, minus_one) = (1.0f64, -1.0f64);
        let ld = |t: &GpuTile| int(t.rows.max(1));
        let (m, n) = (int(write.rows)?, int(write.cols)?);
        let ldc = ld(write)?;
        let a = reads[0];
        let (lda, a_rows, a_cols) = (ld(a)?, int(a.rows)?, int(a.cols)?);
        let (pa, _read_a) = a.data.device_ptr(s);
        let b = reads.get(1).copied();
        let (pb, _read_b) = match b {
            Some(b) => {
                let (p, guard) = b.data.device_ptr(s);
                (p, Some(guard))
            }
            None => (0, None),
        };
        let ldb = b.map_or(Ok(1), ld)?;
        let (pc, _write_c) = write.data.device_ptr_mut(s);
        let (pa, pb, pc) = (pa as *const f64, pb as *const f64, pc as *mut f64);
        // SAFETY: the pointers are live device buffers of the shapes checked above, with
        // their leading dimensions; cudarc's guards order the compute stream after earlier
        // copies into them and record this use for later ones; scalars are host pointers
        // (cuBLAS's default pointer mode) that outlive the call, which only queues work.
        let status = unsafe {
            match op {
                Op::Trsm => {
                    blas::cublasDtrsm_v2(h, RIGHT, LOWER, T, NON_UNIT, m, n, &one, pa, lda, pc, ldc)
                }
                Op::Syrk => {
                    blas::cublasDsyrk_v2(h, LOWER, N, m, a_cols, &minus_one, pa, lda, &one, pc, ldc)
                }
                Op::GemmNt => blas::cublasDgemm_v2(
                    h, N, T, m, n, a_cols, &minus_one, pa, lda, pb, ldb, &one, pc, ldc,
                ),
                Op::SolveLower | Op::SolveLowerTrans => blas::cublasDtrsm_v2(
                    h,
                    LEFT,
                    LOWER,
                    if op == Op::SolveLower { N } else { T },
                    NON_UNIT,
                    m,
                    n,
                    &one,
                    pa,
                    lda,
                    pc,
                    ldc,
                ),
                Op::Update => blas::cublasDgemm_v2(
                    h, N, N, m, n, a_cols, &minus_one, pa, lda, pb, ldb, &one, pc, ldc,
                ),
                Op::UpdateTrans => blas::cublasDgemm_v2(
                    h, T, N, m, n, a_rows, &minus_one, pa, lda, pb, ldb, &one, pc, ldc,
                ),
                Op::MatMul(p) => {
                    let (alpha, beta) = (p.alpha(), p.beta());
                    let trans = |t: bool| if t { T } else { N };
                    let k = if p.trans_a { a_rows } else { a_cols };
                    blas::cublasDgemm_v2(
                        h,
                        trans(p.trans_a),
                        trans(p.trans_b),
                        m,
                        n,
                        k,
                        &alpha,
                        pa,
                        lda,
                        pb,
                        ldb,
                        &beta,
                        pc,
                        ldc,
                    )
                }
                Op::Potrf => unreachable!("handled above"),
            }
        };
        status
            .result()
            .map_err(|e| gpu_error(&format!("cuBLAS {op}"), e))?;
        s.synchronize()
            .map_err(|e| gpu_error(&format!("waiting for {op}"), e))
    }

    /// The reference rate of the device: copies the whole matrix `a` to device memory
    /// (untimed), factors it there with one cusolverDnDpotrf call, and returns the seconds
    /// of that call alone, waited for. The factor stays on the device (discarded).
    pub fn time_resident_potrf(&self, a: MatRef<'_, f64>) -> Result<f64, KernelError> {
        let n = a.nrows();
        if a.ncols() != n {
            return Err(KernelError::Operands {
                op: Op::Potrf,
                reason: format!("the matrix is {}x{}, not square", n, a.ncols()),
            });
        }
        self.bind()?;
        // Contiguous, column-major: one plain copy (pageable memory, synchronous).
        let packed: Vec<f64> = (0..n)
            .flat_map(|j| a.col(j).iter().copied().collect::<Vec<_>>())
            .collect();
        let mut tile = self.alloc(n, n)?;
        self.h2d
            .memcpy_htod(&packed, &mut tile.data)
            .map_err(|e| gpu_error("copying the matrix to the device", e))?;
        self.wait_uploads()?;
        let start = std::time::Instant::now();
        self.potrf(&mut tile)?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// cusolverDnDpotrf on the lower triangle; a positive devInfo is
    /// [`KernelError::NotPositiveDefinite`] at that column of the tile.
    fn potrf(&self, a: &mut GpuTile) -> Result<(), KernelError> {
        use solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
        let s = &self.compute;
        let h = self.solver.cu();
        let (n, lda) = (int(a.rows)?, int(a.rows.max(1))?);
        let mut scratch = lock(&self.potrf);
        let mut lwork = 0i32;
        {
            let (pa, _use_a) = a.data.device_ptr_mut(s);
            // SAFETY: pa is a live n x n device buffer with leading dimension lda; lwork is
            // a host integer that outlives the call.
            unsafe { solver::cusolverDnDpotrf_bufferSize(h, LOWER, n, pa as _, lda, &mut lwork) }
                .result()
                .map_err(|e| gpu_error("cusolverDnDpotrf_bufferSize", e))?;
        }
        let needed = usize::try_from(lwork).unwrap_or(0).max(1);
        if scratch.work.len() < needed {
            scratch.work = s
                .alloc_zeros(needed)
                .map_err(|e| gpu_error("allocating POTRF's workspace", e))?;
        }
        {
            let PotrfScratch { work, info } = &mut *scratch;
            let (pa, _use_a) = a.data.device_ptr_mut(s);
            let (pw, _use_w) = work.device_ptr_mut(s);
            let (pi, _use_i) = info.device_ptr_mut(s);
            // SAFETY: live device buffers: A (n x n, lda), a workspace of at least lwork
            // elements, one int for devInfo; the call only queues work on the stream.
            unsafe { solver::cusolverDnDpotrf(h, LOWER, n, pa as _, lda, pw as _, lwork, pi as _) }
                .result()
                .map_err(|e| gpu_error("cusolverDnDpotrf", e))?;
        }
        let info = s
            .clone_dtoh(&scratch.info)
            .map_err(|e| gpu_error("reading POTRF's devInfo", e))?;
        // The copy is only queued on the compute stream: wait for it before reading the
        // word (a copy to pageable memory happens to return when done; CUDA does not
        // promise it).
        s.synchronize()
            .map_err(|e| gpu_error("waiting for POTRF's devInfo", e))?;
        match info.first().copied().unwrap_or(0) {
            0 => Ok(()),
            i if i > 0 => Err(KernelError::NotPositiveDefinite {
                index: (i - 1) as usize,
            }),
            i => Err(KernelError::Gpu {
                message: format!("cusolverDnDpotrf rejected its argument {}", -i),
            }),
        }
    }
}
