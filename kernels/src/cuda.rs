//! GPU tile kernels: POTRF and TRTRI through cuSOLVER, the others through cuBLAS (LAUUM too, as a
//! triangular product), on one device, with cudarc (cargo feature `cuda`, on by default).
//!
//! The CUDA libraries are loaded when first used, never linked, so this module builds on any
//! machine; [`crate::cuda_libs`] finds them without `LD_LIBRARY_PATH`. cudarc panics when a library
//! it needs cannot be loaded; every entry point here checks first ([`driver_present`], and the
//! cuBLAS and cuSOLVER libraries in [`GpuContext::new`]), so a machine without a driver simply has
//! no GPU and a missing library is an error that says which one.
//!
//! A [`GpuContext`] owns one device's context and three streams: kernels run on the compute stream,
//! uploads on the host-to-device stream, downloads on the device-to-host stream. cudarc records an
//! event on each use of a device buffer and makes the next stream that uses it wait for that event,
//! so an upload followed by a kernel on the other stream is ordered without a host-side wait.
//!
//! Kernels are **launched**, not run: [`GpuContext::launch`] queues the kernel between two timing
//! events and returns a [`GpuKernel`], so a worker keeps several kernels in flight and waits only
//! for the oldest. The events give the kernel's own duration (the wait for its uploads comes before
//! the first event), which is what the performance models record. POTRF's `devInfo` is copied to
//! page-locked memory on the same stream and read once the end event has completed.
//!
//! Host memory: the tiles live in the caller's matrix, which is pageable and strided (a tile of a
//! column-major matrix with a larger leading dimension). Transfers therefore go through page-locked
//! **staging buffers** owned by the context, a few per tile size, reused round-robin. An upload
//! packs the tile into a staging buffer and queues the copy: it returns before the copy ends, and
//! the buffer is reused only once that copy is done. A download queues the copy into a staging
//! buffer, waits for it, and unpacks it into the tile. The caller's matrix is never page-locked.
//!
//! Device tiles ([`GpuTile`]) are contiguous, column-major, with leading dimension = rows, in any
//! of the four precisions: a tile holds its bytes and its [`Precision`], the host side comes as an
//! [`AnyRef`]/[`AnyMut`] of the same precision, and a kernel calls the S, D, C or Z routine of its
//! tiles' precision (cuBLAS ?trsm, ?syrk or ?herk for complex, ?gemm, ?geam, ?trmm; cuSOLVER ?potrf
//! and the 64-bit API's Xtrtri), with conjugate transposes for complex tiles as on the CPU
//! ([`crate::Scalar`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::cublas::{result as blas_result, sys as blas};
use cudarc::cusolver::{result as solver_result, sys as solver};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
    sys as driver_sys,
};
use faer::prelude::ReborrowMut;
use faer::{MatMut, MatRef};

use crate::aasen::{AasenCall, aasen_call};
use crate::any::each_precision;
use crate::op::{Blas, GpuCall, KernelArgs, PanelFound, PanelSlot, ReflectorSlot, Solve};
use crate::pinned::{HostRange, PinnedRanges};
use crate::with_scalar;
use crate::{AnyMut, AnyRef, DeviceSpan, KernelError, Op, Precision, Scalar, TensorMath, c32, c64};

mod elementwise;

/// Staging buffers kept per tile size: enough for copies of several tiles to be in flight.
const STAGING_PER_SIZE: usize = 4;

/// The most bytes of a host matrix packed into one staging buffer by [`GpuContext::write_span`]
/// (two such buffers, one packed while the other's copy runs).
const WRITE_PANEL_BYTES: usize = 64 << 20;

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

/// Number of CUDA devices: 0 without a driver, or when the driver reports none (or fails). (Names
/// and memory sizes: `hetla_clusters::gpus`.)
pub fn device_count() -> usize {
    if !driver_present() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// A tile in device memory: contiguous, column-major, leading dimension = rows, its elements in
/// `precision`.
pub struct GpuTile {
    data: CudaSlice<u8>,
    rows: usize,
    cols: usize,
    precision: Precision,
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

    /// The precision of its elements.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Bytes of device memory it holds.
    pub fn bytes(&self) -> usize {
        self.rows * self.cols * self.precision.bytes()
    }
}

/// The solvers' workspaces of a lane, shared by the kernels queued on its stream (they run one
/// after the other; a larger one replaces a buffer, and the old one is freed in stream order):
/// POTRF's and TRTRI's device workspace, TRTRI's host workspace, and LAUUM's copy of its tile's
/// lower triangle with the packed triangle it goes through.
struct PotrfScratch {
    work: CudaSlice<u8>,
    host: Vec<u8>,
    lauum: CudaSlice<u8>,
}

impl PotrfScratch {
    /// `buffer`, grown to at least `bytes` on `stream`.
    fn grow(
        stream: &Arc<CudaStream>,
        buffer: &mut CudaSlice<u8>,
        bytes: usize,
        what: &str,
    ) -> Result<(), KernelError> {
        if buffer.len() < bytes {
            *buffer = stream
                .alloc_zeros(bytes)
                .map_err(|e| gpu_error(&format!("allocating {what}"), e))?;
        }
        Ok(())
    }
}

/// A cuBLAS handle bound to a lane's stream. Its own type, not cudarc's `CudaBlas`, whose `Drop`
/// panics when the destroy call fails (after a device error, say): here a failed destroy is
/// ignored, as nothing can be done about it at that point.
struct BlasHandle(blas::cublasHandle_t);

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `cublasCreate` and is destroyed once.
        let _ = unsafe { blas_result::destroy_handle(self.0) };
    }
}

/// A cuSOLVER dense handle bound to the compute stream (see [`BlasHandle`] for why not cudarc's
/// `DnHandle`).
struct SolverHandle(solver::cusolverDnHandle_t);

impl Drop for SolverHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `cusolverDnCreate` and is destroyed once.
        let _ = unsafe { solver_result::dn_destroy(self.0) };
    }
}

// SAFETY: cuBLAS and cuSOLVER handles may be used from any thread, one call at a time; the
// context serialises the calls that use them (`GpuContext::launch` holds `queue`).
unsafe impl Send for BlasHandle {}
unsafe impl Sync for BlasHandle {}
unsafe impl Send for SolverHandle {}
unsafe impl Sync for SolverHandle {}

/// A kernel queued on the compute stream by [`GpuContext::launch`]: timing events around it and,
/// for POTRF, its `devInfo` word on its way to page-locked host memory.
#[must_use = "a launched kernel must be waited for to learn whether it succeeded"]
pub struct GpuKernel {
    op: Op,
    start: CudaEvent,
    end: CudaEvent,
    info: Option<PinnedHostSlice<i32>>,
    /// An LU panel's devInfo and interchanges, copied back (devInfo first), and the slot that
    /// [`GpuKernel::wait`] fills with them.
    found: Option<(PinnedHostSlice<i32>, PanelSlot)>,
    /// A QR panel's copies back, from which [`GpuKernel::wait`] makes the T's into their slot.
    reflectors: Option<ReflectorCopies>,
}

/// What a QR panel ([`GpuCall::QrPanel`]) copies back to make its T's on the host, and the slot
/// they go to.
struct ReflectorCopies {
    precision: Precision,
    /// The reflectors, and the inner block (the T's rows).
    k: usize,
    ib: usize,
    /// tau (k elements), then each inner block's Gram matrix below its diagonal block (ib x k).
    words: PinnedHostSlice<u8>,
    /// The panel's first k rows of its first k columns (k x k): the diagonal blocks.
    head: PinnedHostSlice<u8>,
    slot: ReflectorSlot,
}

impl ReflectorCopies {
    /// Makes the T's from the copies (done: the kernel's end event has completed) into the slot.
    fn fill(&self) -> Result<(), KernelError> {
        fn typed<T: Scalar>(c: &ReflectorCopies) -> Result<(), KernelError> {
            fn read(p: &PinnedHostSlice<u8>) -> Result<&[u8], KernelError> {
                p.as_slice()
                    .map_err(|e| gpu_error("reading the panel's reflectors", e))
            }
            let (k, ib) = (c.k, c.ib);
            let words = elements::<T>(read(&c.words)?);
            let (taus, grams) = words.split_at(k);
            let head =
                MatRef::from_column_major_slice(&elements::<T>(read(&c.head)?)[..k * k], k, k);
            let grams = MatRef::from_column_major_slice(&grams[..ib * k], ib, k);
            let t = crate::reflector_ts(head, grams, taus, ib)?;
            c.slot.fill(Arc::new(T::any_mat(t)));
            Ok(())
        }
        with_scalar!(self.precision, T => typed::<T>(self))
    }
}

/// What a cuSOLVER peer computes ([`GpuContext::time_resident_solver`],
/// [`GpuContext::time_host_solver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SolverPeer {
    /// The Cholesky factor, ?potrf.
    Potrf,
    /// The inverse of the SPD matrix, ?potrf then ?potri (its lower triangle).
    Inverse,
    /// The LU factorisation with partial pivoting, ?getrf (its interchanges left on the device).
    Getrf,
    /// The Bunch-Kaufman factorisation L D L^T of a real symmetric matrix (its lower triangle),
    /// ?sytrf (its interchanges left on the device): the symmetric indefinite peer. Real only:
    /// cuSOLVER's complex ?sytrf is complex symmetric, not Hermitian.
    Sytrf,
    /// The Householder QR factorisation of an m x n matrix, ?geqrf (its scalars tau left on the
    /// device).
    Geqrf,
    /// Least squares min ||A X - B|| of an m x n A (m >= n) as a cuSOLVER user solves them: ?geqrf
    /// on A, ?ormqr (?unmqr) for Q^H B, ?trsm with R; the matrix given is [A | B], A its first
    /// `columns` columns, and X is left in B's first `columns` rows (LAPACK ?gels's layout).
    Gels {
        /// A's columns.
        columns: usize,
    },
    /// A X = B (A n x n, general) to double accuracy by cuSOLVER's iterative-refinement solver (the
    /// IRS API's one-call form, `cusolverDn<t1><t2>gesv`): the LU in a lower precision, refined in
    /// f64 (c64), falling back to an LU in f64 where refinement does not converge. `math` is the
    /// lower precision: [`TensorMath::Off`] f32 (DSgesv, ZCgesv), [`TensorMath::Tf32`] TF32 tensor
    /// cores (DXgesv, ZYgesv), [`TensorMath::Bf16`] BF16 (DBgesv, ZEgesv). The matrix given is [A |
    /// B], A its first `columns` columns; f64 and c64 only. cuSOLVER has no SPD kind.
    Irs {
        /// A's columns (its order).
        columns: usize,
        /// The lower precision of its factor.
        math: TensorMath,
    },
}

impl SolverPeer {
    /// The operation that names its work in errors.
    fn op(self) -> Op {
        match self {
            SolverPeer::Potrf => Op::Potrf,
            SolverPeer::Inverse => Op::Trtri,
            SolverPeer::Getrf => Op::LuPanel,
            SolverPeer::Sytrf => Op::LdltPanel,
            SolverPeer::Geqrf | SolverPeer::Gels { .. } => Op::Geqrt,
            SolverPeer::Irs { .. } => Op::LuPanel,
        }
    }

    /// Whether it takes a matrix of `precision`: the refined solver f64 and c64 alone, ?sytrf real
    /// ones.
    pub fn check_precision(self, precision: Precision) -> Result<(), KernelError> {
        match (self, precision) {
            (SolverPeer::Irs { .. }, Precision::S | Precision::C) => Err(KernelError::Operands {
                op: self.op(),
                reason: format!(
                    "cuSOLVER's refined solvers refine to f64 or c64 accuracy: the matrix is in \
                     {precision}"
                ),
            }),
            (SolverPeer::Sytrf, Precision::C | Precision::Z) => Err(KernelError::Operands {
                op: self.op(),
                reason: format!(
                    "cuSOLVER's complex ?sytrf factors complex symmetric matrices, not Hermitian \
                     ones: the matrix is in {precision} (s or d)"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Whether it takes a matrix of `shape` (rows, columns): the factorisations of one square
    /// matrix a square one, ?geqrf any, least squares [A | B] with A at least as tall as wide.
    pub fn check_shape(self, (m, n): (usize, usize)) -> Result<(), KernelError> {
        let reason = match self {
            SolverPeer::Geqrf => return Ok(()),
            SolverPeer::Gels { columns } if columns > n => {
                format!("[A | B] is {m}x{n}: too few columns for the {columns} of A")
            }
            SolverPeer::Gels { columns } if columns > m => {
                format!("A is {m}x{columns}: least squares need at least as many rows as columns")
            }
            SolverPeer::Gels { .. } => return Ok(()),
            SolverPeer::Irs { columns, .. } if columns != m || columns > n => {
                format!("[A | B] is {m}x{n}: A must be its first {columns} columns, square")
            }
            SolverPeer::Irs { .. } => return Ok(()),
            _ if m != n => format!("the matrix is {m}x{n}, not square"),
            _ => return Ok(()),
        };
        Err(KernelError::Operands {
            op: self.op(),
            reason,
        })
    }
}

impl GpuKernel {
    /// Whether the kernel (and its `devInfo` copy) has finished; errors of the stream are reported
    /// by [`GpuKernel::wait`].
    pub fn is_done(&self) -> bool {
        self.end.try_is_complete().unwrap_or(true)
    }

    /// Waits for the kernel and returns its duration on the device in seconds (between events
    /// recorded just before and after it: the wait for its operands' uploads is not in it). A POTRF
    /// whose `devInfo` is positive is [`KernelError::NotPositiveDefinite`] at that column of the
    /// tile, a TRTRI's [`KernelError::Singular`]; an LU panel's interchanges and first zero pivot
    /// (no error: the factorisation goes on) are left in its slot ([`KernelArgs::Panel`]).
    pub fn wait(self) -> Result<f64, KernelError> {
        let op = self.op;
        self.end
            .synchronize()
            .map_err(|e| gpu_error(&format!("waiting for {op}"), e))?;
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(|e| gpu_error(&format!("timing {op}"), e))?;
        if let Some(info) = &self.info {
            // The copy was queued before the end event, which has completed.
            let word = info
                .as_slice()
                .map_err(|e| gpu_error("reading POTRF's devInfo", e))?
                .first()
                .copied()
                .unwrap_or(0);
            match word {
                0 => {}
                // TRTRI's and GETRF's info > 0: a zero on the diagonal (LAPACK's convention).
                i if i > 0 && matches!(op, Op::Trtri | Op::LuPanel) => {
                    return Err(KernelError::Singular {
                        index: (i - 1) as usize,
                    });
                }
                i if i > 0 => {
                    return Err(KernelError::NotPositiveDefinite {
                        index: (i - 1) as usize,
                    });
                }
                i => {
                    return Err(KernelError::Gpu {
                        message: format!("cuSOLVER's {op} rejected its argument {}", -i),
                    });
                }
            }
        }
        if let Some((words, slot)) = &self.found {
            // Copied before the end event, which has completed.
            let words = words
                .as_slice()
                .map_err(|e| gpu_error("reading the panel's interchanges", e))?;
            slot.fill(panel_found(op, words)?);
        }
        if let Some(copies) = &self.reflectors {
            copies.fill()?;
        }
        Ok(f64::from(ms) / 1e3)
    }
}

/// What an LU panel found from cuSOLVER's ?getrf: its devInfo then its 1-based interchanges.
fn panel_found(op: Op, words: &[i32]) -> Result<PanelFound, KernelError> {
    let Some((&info, ipiv)) = words.split_first() else {
        return Err(KernelError::Gpu {
            message: format!("{op} copied back no devInfo"),
        });
    };
    if info < 0 {
        return Err(KernelError::Gpu {
            message: format!("cuSOLVER's {op} rejected its argument {}", -info),
        });
    }
    let ipiv = ipiv
        .iter()
        .enumerate()
        .map(|(i, &p)| match usize::try_from(p - 1) {
            Ok(row) if row >= i => Ok(row),
            _ => Err(KernelError::Gpu {
                message: format!("cuSOLVER's {op} gave interchange {i} the 1-based row {p}"),
            }),
        })
        .collect::<Result<_, _>>()?;
    // A zero pivot (info > 0, 1-based) leaves the factorisation going on, as LAPACK's.
    let zero = usize::try_from(info - 1).ok();
    Ok(PanelFound { ipiv, zero })
}

/// One device: its context, compute and copy streams, cuBLAS and cuSOLVER handles, and page-locked
/// staging buffers.
pub struct GpuContext {
    index: usize,
    name: String,
    ctx: Arc<CudaContext>,
    /// The compute streams, each with its handles and workspaces; the first is the priority stream,
    /// and the one the peers and the copies within the device use.
    lanes: Vec<Lane>,
    h2d: Arc<CudaStream>,
    d2h: Arc<CudaStream>,
    /// Staging buffers by length in bytes, least recently used first.
    staging: Mutex<HashMap<usize, VecDeque<PinnedHostSlice<u8>>>>,
}

/// One compute stream of a device with its own cuBLAS and cuSOLVER handles (bound to it) and
/// solvers' workspaces: kernels queued on different lanes run at once on the GPU; each waits for
/// the copies and kernels that wrote its operands, whatever stream they ran on (cudarc's events on
/// every buffer).
struct Lane {
    stream: Arc<CudaStream>,
    blas: BlasHandle,
    solver: SolverHandle,
    /// Held while a kernel is queued on the lane: its handles and workspaces serve one call at a
    /// time.
    scratch: Mutex<PotrfScratch>,
}

impl Lane {
    /// A new stream of `ctx` with its handles and empty workspaces; `urgent`: at the device's
    /// greatest stream priority (the lane of a step's panel work, whose kernels the GPU then starts
    /// before queued trailing updates), else at the default one.
    fn new(ctx: &Arc<CudaContext>, urgent: bool) -> Result<Self, KernelError> {
        let stream = if urgent {
            ctx.bind_to_thread()
                .map_err(|e| gpu_error("binding the context", e))?;
            let (_, greatest) = cudarc::driver::result::stream::get_priority_range()
                .map_err(|e| gpu_error("cuCtxGetStreamPriorityRange", e))?;
            ctx.new_stream_with_priority(greatest)
        } else {
            ctx.new_stream()
        }
        .map_err(|e| gpu_error("creating a stream", e))?;
        // SAFETY: creating handles and binding them to a live stream of this context (bound
        // to the thread by `new_stream`).
        let blas =
            BlasHandle(blas_result::create_handle().map_err(|e| gpu_error("cublasCreate", e))?);
        unsafe { blas_result::set_stream(blas.0, stream.cu_stream() as _) }
            .map_err(|e| gpu_error("cublasSetStream", e))?;
        let solver =
            SolverHandle(solver_result::dn_create().map_err(|e| gpu_error("cusolverDnCreate", e))?);
        unsafe { solver_result::dn_set_stream(solver.0, stream.cu_stream() as _) }
            .map_err(|e| gpu_error("cusolverDnSetStream", e))?;
        let one_byte = || {
            stream
                .alloc_zeros(1)
                .map_err(|e| gpu_error("allocating the solvers' workspace", e))
        };
        let scratch = PotrfScratch {
            work: one_byte()?,
            host: Vec::new(),
            lauum: one_byte()?,
        };
        Ok(Self {
            stream,
            blas,
            solver,
            scratch: Mutex::new(scratch),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values are replaced whole or not at all: a panic cannot corrupt them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn int(value: usize) -> Result<i32, KernelError> {
    crate::error::blas_int(value, "cuda")
}

impl GpuContext {
    /// Opens device `index`: a context, a compute stream with its cuBLAS and cuSOLVER handles, and
    /// two copy streams. Errors name the library that cannot be loaded or the device that does not
    /// exist.
    pub fn new(index: usize) -> Result<Self, KernelError> {
        Self::with_streams(index, 1)
    }

    /// Opens device `index` with `streams` compute streams (at least one), each with its own
    /// handles and workspaces ([`GpuContext::launch_on`]).
    pub fn with_streams(index: usize, streams: usize) -> Result<Self, KernelError> {
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
        // The panel lane is urgent only beside others: alone, priorities change nothing.
        let lanes = (0..streams.max(1))
            .map(|lane| Lane::new(&ctx, lane == 0 && streams > 1))
            .collect::<Result<Vec<_>, _>>()?;
        let (h2d, d2h) = (stream()?, stream()?);
        if ctx.has_async_alloc() {
            keep_pool_memory(&ctx)?;
        }
        Ok(Self {
            index,
            name,
            ctx,
            lanes,
            h2d,
            d2h,
            staging: Mutex::new(HashMap::new()),
        })
    }

    /// Its compute streams.
    pub fn streams(&self) -> usize {
        self.lanes.len()
    }

    /// The first compute stream: the priority one, which the peers and the copies within the device
    /// use.
    fn compute(&self) -> &Arc<CudaStream> {
        &self.lanes[0].stream
    }

    /// Two timing events of the device's context, to record on a stream before and after a kernel.
    fn timing_events(&self) -> Result<(CudaEvent, CudaEvent), KernelError> {
        let event = || {
            self.ctx
                .new_event(Some(driver_sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| gpu_error("creating an event", e))
        };
        Ok((event()?, event()?))
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

    /// A `rows x cols` tile of device memory in `precision`, contents unset (an upload or a kernel
    /// writes it before it is read).
    pub fn alloc(
        &self,
        precision: Precision,
        rows: usize,
        cols: usize,
    ) -> Result<GpuTile, KernelError> {
        self.bind()?;
        // SAFETY: bytes have no invalid bit pattern, nor has any precision's element, so
        // reading unset memory cannot produce an invalid value; every caller uploads into
        // the tile before a kernel uses it. Stream-ordered allocations are aligned far
        // beyond any element's alignment.
        let data = unsafe {
            self.h2d
                .alloc::<u8>((rows * cols * precision.bytes()).max(16))
        }
        .map_err(|e| gpu_error("allocating device memory for a tile", e))?;
        Ok(GpuTile {
            data,
            rows,
            cols,
            precision,
        })
    }

    /// A `rows x cols` tile of device memory in `precision` set to zeros (for a tile a kernel
    /// overwrites unread: no stale contents can leak into it).
    pub fn alloc_zeroed(
        &self,
        precision: Precision,
        rows: usize,
        cols: usize,
    ) -> Result<GpuTile, KernelError> {
        self.bind()?;
        let data = self
            .h2d
            .alloc_zeros::<u8>((rows * cols * precision.bytes()).max(16))
            .map_err(|e| gpu_error("allocating device memory for a tile", e))?;
        Ok(GpuTile {
            data,
            rows,
            cols,
            precision,
        })
    }

    /// A staging buffer of `len` bytes whose previous copy, if any, is done.
    fn take_staging(&self, len: usize) -> Result<PinnedHostSlice<u8>, KernelError> {
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
            None => unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len, 0) }
                .map_err(|e| gpu_error("allocating page-locked staging memory", e)),
        }
    }

    fn give_back_staging(&self, buffer: PinnedHostSlice<u8>) {
        lock(&self.staging)
            .entry(buffer.len())
            .or_default()
            .push_back(buffer);
    }

    fn check_same_shape(
        tile: &GpuTile,
        precision: Precision,
        (rows, cols): (usize, usize),
    ) -> Result<(), KernelError> {
        if (tile.rows, tile.cols) != (rows, cols) {
            return Err(KernelError::Gpu {
                message: format!(
                    "a copy between a {rows}x{cols} matrix and a {}x{} device tile",
                    tile.rows, tile.cols
                ),
            });
        }
        if tile.precision != precision {
            return Err(KernelError::Gpu {
                message: format!(
                    "a copy between a matrix in {precision} and a device tile in {}",
                    tile.precision
                ),
            });
        }
        Ok(())
    }

    /// A staging buffer for a copy between `tile` and a host tile of `precision` and `shape`, with
    /// the context bound; `None` for an empty tile (nothing to copy). Shapes and precisions are
    /// checked.
    fn staging_for(
        &self,
        tile: &GpuTile,
        precision: Precision,
        shape: (usize, usize),
    ) -> Result<Option<PinnedHostSlice<u8>>, KernelError> {
        Self::check_same_shape(tile, precision, shape)?;
        if shape.0 * shape.1 == 0 {
            return Ok(None);
        }
        self.bind()?;
        self.take_staging(tile.bytes()).map(Some)
    }

    /// Page-locks the host memory `range` for every device of the process (`cuMemHostRegister`,
    /// portable) and enters it in [`crate::PinnedRanges::global`], so that copies of the tiles in
    /// it go straight from and into it. An empty range does nothing.
    ///
    /// # Safety
    /// `range` must be memory of this process that stays allocated until
    /// [`GpuContext::page_unlock`] is called for it.
    pub unsafe fn page_lock(&self, range: HostRange) -> Result<(), KernelError> {
        if range.len == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the caller keeps `range` allocated while it is registered.
        unsafe {
            driver_sys::cuMemHostRegister_v2(
                range.start as *mut std::ffi::c_void,
                range.len,
                driver_sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result()
        .map_err(|e| gpu_error("page-locking host memory (cuMemHostRegister)", e))?;
        if !PinnedRanges::global().insert(range) {
            // SAFETY: registered just above.
            let _ =
                unsafe { driver_sys::cuMemHostUnregister(range.start as *mut std::ffi::c_void) };
            return Err(KernelError::Gpu {
                message: format!(
                    "host memory at {:#x} ({} bytes) overlaps memory page-locked already",
                    range.start, range.len
                ),
            });
        }
        Ok(())
    }

    /// Runs `call` on copies of `inputs` and of `out` in page-locked host memory, as a program that
    /// allocates its matrices page-locked (`cudaMallocHost`) holds them, so that its copies to and
    /// from the device go straight by the DMA engines: the peers' "page-locked" timings. The copies
    /// and the locking are outside `call`; `out` receives the locked output after it, and all is
    /// unlocked before returning, whatever `call` returned.
    pub fn page_locked<T: Scalar, R>(
        &self,
        inputs: &[MatRef<'_, T>],
        mut out: MatMut<'_, T>,
        call: impl FnOnce(&[MatRef<'_, T>], MatMut<'_, T>) -> Result<R, KernelError>,
    ) -> Result<R, KernelError> {
        let mut held: Vec<faer::Mat<T>> = inputs.iter().map(|m| m.to_owned()).collect();
        held.push(faer::Mat::zeros(out.nrows(), out.ncols()));
        let ranges: Vec<HostRange> = (held.iter())
            .map(|m| HostRange::of_matrix(m.as_ptr(), m.nrows(), m.ncols(), m.col_stride()))
            .collect();
        let mut locked = Vec::with_capacity(ranges.len());
        let mut result = Ok(());
        for &range in &ranges {
            // SAFETY: each range is a buffer of `held`, which stays allocated (and unmoved: the
            // matrices' elements live on the heap) until every range is unlocked below.
            result = unsafe { self.page_lock(range) };
            if result.is_err() {
                break;
            }
            locked.push(range);
        }
        let result = result.and_then(|()| {
            let (output, rest) = held.split_last_mut().expect("the output is held");
            let views: Vec<MatRef<'_, T>> = rest.iter().map(|m| m.as_ref()).collect();
            let done = call(&views, output.as_mut())?;
            out.copy_from(output.as_ref());
            Ok(done)
        });
        // Every range unlocked, the first failure kept.
        let mut unlocked = Ok(());
        for range in locked {
            let this = self.page_unlock(range);
            unlocked = unlocked.and(this);
        }
        let done = result?;
        unlocked.map(|()| done)
    }

    /// Takes `range` out of [`crate::PinnedRanges::global`] and unlocks it; nothing for a range not
    /// locked by [`GpuContext::page_lock`]. No copy into or out of it may be under way.
    pub fn page_unlock(&self, range: HostRange) -> Result<(), KernelError> {
        if !PinnedRanges::global().remove(range) {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `range` was registered by `page_lock` (it was in the register).
        unsafe { driver_sys::cuMemHostUnregister(range.start as *mut std::ffi::c_void) }
            .result()
            .map_err(|e| gpu_error("unlocking host memory (cuMemHostUnregister)", e))
    }

    /// Queues the copy of a host tile straight into `dst` by the DMA engine when the tile lies in
    /// page-locked memory with contiguous columns, and returns without waiting for it (false: not
    /// such a tile, nothing done). Kernels and downloads of `dst` wait for it on the device; the
    /// host tile must stay locked and unwritten until it is done ([`GpuContext::wait_uploads`]).
    fn upload_direct<T: Scalar>(
        &self,
        src: MatRef<'_, T>,
        dst: &mut GpuTile,
    ) -> Result<bool, KernelError> {
        let Some(span) = DirectSpan::of_mat(src, true) else {
            return Ok(false);
        };
        self.bind()?;
        let (device, written) = dst.data.device_ptr_mut(&self.h2d);
        // SAFETY: the host tile spans `span` in page-locked memory, which stays allocated and
        // locked until the run has waited for its uploads (`wait_uploads`, before unlocking);
        // nothing writes the host tile meanwhile: a task writing it waits for the tasks reading
        // this copy (which wait for the copy on the device). The device tile holds its rows x
        // cols elements of T (shapes checked by the caller).
        let queued = unsafe { self.copy_2d(&span, device, true, Some(&self.h2d)) };
        drop(written);
        queued.map(|()| true)
    }

    /// Copies `src` straight into a host tile by the DMA engine when the tile lies in page-locked
    /// memory with contiguous columns; returns once it is there (false: not such a tile, nothing
    /// done).
    fn download_direct<T: Scalar>(
        &self,
        src: &GpuTile,
        dst: MatMut<'_, T>,
    ) -> Result<bool, KernelError> {
        let Some(span) = DirectSpan::of_mat(dst.as_ref(), true) else {
            return Ok(false);
        };
        self.bind()?;
        let (device, read) = src.data.device_ptr(&self.d2h);
        // SAFETY: the host tile, borrowed mutably for this call, spans `span` in page-locked
        // memory; the call returns only after the engine wrote it (the event below).
        let queued = unsafe { self.copy_2d(&span, device, false, Some(&self.d2h)) };
        drop(read);
        queued?;
        self.d2h
            .record_event(None)
            .and_then(|event| event.synchronize())
            .map_err(|e| gpu_error("waiting for a direct download", e))?;
        Ok(true)
    }

    /// One 2D copy between the host `span` and the contiguous device tile at `device` (`to_device`:
    /// which way), queued on `stream`, or synchronous (`cuMemcpy2D`, pageable memory allowed) when
    /// there is none.
    ///
    /// # Safety
    /// `span` must be host memory of the tile's bytes that stays valid (and, for a copy into it,
    /// unread) until the copy is done, and `device` a live device allocation of at least its bytes;
    /// the caller orders the copy after the device work on that allocation.
    unsafe fn copy_2d(
        &self,
        span: &DirectSpan,
        device: driver_sys::CUdeviceptr,
        to_device: bool,
        stream: Option<&CudaStream>,
    ) -> Result<(), KernelError> {
        let way = if to_device {
            "host to device"
        } else {
            "device to host"
        };
        // SAFETY: the caller's contract.
        unsafe { issue_2d(&span.copy(to_device, device), stream, way) }
    }

    /// Queues the copy of a host tile into `dst` on the host-to-device stream; returns once the
    /// tile is packed into a staging buffer, before the copy ends (a tile in page-locked memory is
    /// copied straight from it instead, see [`GpuContext::page_lock`]). Kernels that use `dst`
    /// later wait for the copy. `threads`: threads that pack the tile by columns (see
    /// [`crate::copy_by_columns`]).
    pub fn upload(
        &self,
        src: AnyRef<'_>,
        dst: &mut GpuTile,
        threads: Option<&hetla_clusters::CopyThreads>,
    ) -> Result<(), KernelError> {
        Self::check_same_shape(dst, src.precision(), src.shape())?;
        if each_precision!(src, AnyRef, m => self.upload_direct(m, dst))? {
            return Ok(());
        }
        let Some(mut buffer) = self.staging_for(dst, src.precision(), src.shape())? else {
            return Ok(());
        };
        let packed = buffer
            .as_mut_slice()
            .map(|bytes| each_precision!(src, AnyRef, m => pack(m, bytes, threads)))
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

    /// Copies `src` into a host tile; returns when the data is there. `threads`: threads that
    /// unpack it by columns.
    pub fn download(
        &self,
        src: &GpuTile,
        dst: AnyMut<'_>,
        threads: Option<&hetla_clusters::CopyThreads>,
    ) -> Result<(), KernelError> {
        Self::check_same_shape(src, dst.precision(), dst.shape())?;
        let mut dst = dst;
        if each_precision!(&mut dst, AnyMut, m => self.download_direct(src, m.rb_mut()))? {
            return Ok(());
        }
        let Some(mut buffer) = self.staging_for(src, dst.precision(), dst.shape())? else {
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
                each_precision!(dst, AnyMut, m => unpack(host, m, threads));
                Ok(())
            });
        self.give_back_staging(buffer);
        result
    }

    /// Whether `span` lies in this GPU's memory, inside one allocation; else an error that says
    /// what it is (host memory, another GPU's, running past its allocation's end).
    pub fn check_span(&self, span: &DeviceSpan) -> Result<(), KernelError> {
        use driver_sys::CUpointer_attribute::{
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as ORDINAL,
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE as TYPE,
        };
        let extent = span.extent();
        if extent == 0 {
            return Ok(());
        }
        self.bind()?;
        let not_device = |why: String| KernelError::Gpu {
            message: format!(
                "the matrix at {:#x} is not in GPU {}'s memory: {why}",
                span.addr, self.index
            ),
        };
        let mut memory_type: u32 = 0;
        // SAFETY: asks the driver about an address; the attribute is an unsigned int.
        let asked = unsafe {
            driver_sys::cuPointerGetAttribute((&raw mut memory_type).cast(), TYPE, span.addr)
        };
        if asked.result().is_err()
            || memory_type != driver_sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
        {
            return Err(not_device(
                "the address is not device memory (host memory, or unknown to CUDA)".into(),
            ));
        }
        let mut ordinal: i32 = -1;
        // SAFETY: as above; the attribute is an int.
        unsafe { driver_sys::cuPointerGetAttribute((&raw mut ordinal).cast(), ORDINAL, span.addr) }
            .result()
            .map_err(|e| gpu_error("asking which GPU holds the matrix", e))?;
        if usize::try_from(ordinal).ok() != Some(self.index) {
            return Err(not_device(format!("it lies on GPU {ordinal}")));
        }
        let (mut base, mut size): (driver_sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: as above; writes the allocation's base and size.
        unsafe { driver_sys::cuMemGetAddressRange_v2(&mut base, &mut size, span.addr) }
            .result()
            .map_err(|e| gpu_error("asking for the matrix's allocation", e))?;
        let (end, allocation_end) = (span.addr.saturating_add(extent as u64), base + size as u64);
        if end > allocation_end {
            return Err(not_device(format!(
                "its {} x {} elements with leading dimension {} run {} bytes past the end of its \
                 allocation",
                span.rows,
                span.cols,
                span.ld,
                end - allocation_end
            )));
        }
        Ok(())
    }

    /// Queues the copy of the block `span` of this GPU's memory into the tile `dst` (a 2D
    /// device-to-device copy on the host-to-device stream) and returns; kernels and copies of `dst`
    /// wait for it on the device.
    ///
    /// # Safety
    /// `span` must be memory of this GPU ([`GpuContext::check_span`]) holding its elements, not
    /// written until the copy is done ([`GpuContext::wait_uploads`]).
    pub unsafe fn import(&self, span: &DeviceSpan, dst: &mut GpuTile) -> Result<(), KernelError> {
        Self::check_same_shape(dst, span.precision, (span.rows, span.cols))?;
        if dst.bytes() == 0 {
            return Ok(());
        }
        self.bind()?;
        let width = span.rows * span.precision.bytes();
        let (device, written) = dst.data.device_ptr_mut(&self.h2d);
        let copy = copy_2d_descriptor(
            (Side::Device(span.addr), span.ld * span.precision.bytes()),
            (Side::Device(device), width),
            width,
            span.cols,
        );
        // SAFETY: both sides are device memory of this GPU holding the block's bytes (the caller's
        // contract for `span`; `dst` has its shape, checked above); the copy is ordered after the
        // work on `dst` by its events (`device_ptr_mut`).
        let queued = unsafe { issue_2d(&copy, Some(&self.h2d), "device to device, in") };
        drop(written);
        queued
    }

    /// Copies the tile `src` into the block `span` of this GPU's memory (a 2D device-to-device copy
    /// on the device-to-host stream, after the kernels that write `src`); returns when it is there.
    ///
    /// # Safety
    /// `span` must be memory of this GPU ([`GpuContext::check_span`]) that nothing else reads or
    /// writes during the call.
    pub unsafe fn export(&self, src: &GpuTile, span: &DeviceSpan) -> Result<(), KernelError> {
        Self::check_same_shape(src, span.precision, (span.rows, span.cols))?;
        if src.bytes() == 0 {
            return Ok(());
        }
        self.bind()?;
        let width = span.rows * span.precision.bytes();
        let (device, read) = src.data.device_ptr(&self.d2h);
        let copy = copy_2d_descriptor(
            (Side::Device(device), width),
            (Side::Device(span.addr), span.ld * span.precision.bytes()),
            width,
            span.cols,
        );
        // SAFETY: as in `import`, the other way.
        let queued = unsafe { issue_2d(&copy, Some(&self.d2h), "device to device, out") };
        drop(read);
        queued?;
        self.d2h
            .record_event(None)
            .and_then(|event| event.synchronize())
            .map_err(|e| gpu_error("waiting for a copy out to device memory", e))
    }

    /// The device address of `tile`'s first element: what a [`DeviceSpan`] over a matrix the caller
    /// holds across runs starts at (`hetla`'s device buffers). The work queued on the tile so far
    /// is waited for.
    pub fn address(&self, tile: &GpuTile) -> Result<u64, KernelError> {
        self.bind()?;
        let (device, read) = tile.data.device_ptr(&self.h2d);
        drop(read);
        self.h2d
            .synchronize()
            .map_err(|e| gpu_error("waiting for a buffer's allocation", e))?;
        Ok(device)
    }

    /// Copies the host matrix `src` (of `span`'s shape and precision) into the block `span` of this
    /// GPU's memory on the host-to-device stream (after the copies within the device queued there,
    /// which runs' imports are); returns when it is there. Columns in page-locked memory go in one
    /// copy; others by panels of at most 64 MiB, each packed into one of two page-locked staging
    /// buffers by `threads` (see [`crate::copy_by_columns`]) while the other's copy runs: the DMA
    /// engine's rate, not pageable memory's.
    ///
    /// # Safety
    /// `span` must be memory of this GPU ([`GpuContext::check_span`]) that nothing else reads or
    /// writes during the call.
    pub unsafe fn write_span(
        &self,
        src: AnyRef<'_>,
        span: &DeviceSpan,
        threads: Option<&hetla_clusters::CopyThreads>,
    ) -> Result<(), KernelError> {
        Self::check_span_precision(span, src.precision())?;
        let (rows, cols) = (span.rows, span.cols);
        if src.shape() != (rows, cols) {
            return Err(KernelError::Gpu {
                message: format!(
                    "a {:?} host matrix cannot be copied into a {rows} x {cols} device matrix",
                    src.shape()
                ),
            });
        }
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let direct = each_precision!(src, AnyRef, m => DirectSpan::of_mat(m, true));
        if direct.is_some() {
            // SAFETY: the caller's contract; the copy is waited for.
            return unsafe { self.host_span_copy(span, direct, true) };
        }
        let column = rows * span.precision.bytes();
        let per = (WRITE_PANEL_BYTES / column).clamp(1, cols);
        self.bind()?;
        let mut buffers = [
            self.take_staging(per * column)?,
            self.take_staging(per * column)?,
        ];
        let mut copied: [Option<CudaEvent>; 2] = [None, None];
        let mut copy_panels = || -> Result<(), KernelError> {
            for (k, c0) in (0..cols).step_by(per).enumerate() {
                let w = per.min(cols - c0);
                if let Some(event) = copied[k % 2].take() {
                    event
                        .synchronize()
                        .map_err(|e| gpu_error("waiting for a staging buffer", e))?;
                }
                let bytes = buffers[k % 2]
                    .as_mut_slice()
                    .map_err(|e| gpu_error("waiting for a staging buffer", e))?;
                each_precision!(src, AnyRef, m => pack(m.subcols(c0, w), &mut bytes[..w * column], threads));
                let block = span
                    .block(0, c0, rows, w)
                    .expect("the panel lies in the span");
                let copy = copy_2d_descriptor(
                    (Side::Host(bytes.as_ptr() as usize), column),
                    (Side::Device(block.addr), span.ld * span.precision.bytes()),
                    column,
                    w,
                );
                // SAFETY: the staging buffer holds the packed panel and is not written again
                // before the event recorded after the copy has passed (nor freed before the
                // stream is waited for, below); the block is the caller's span.
                unsafe { issue_2d(&copy, Some(&self.h2d), "host to a device matrix") }?;
                let event = self.h2d.record_event(None);
                copied[k % 2] = Some(event.map_err(|e| gpu_error("recording a copy's event", e))?);
            }
            Ok(())
        };
        let copied = copy_panels();
        // Every copy queued is waited for, also after an error, before the buffers go back.
        let done = self
            .h2d
            .synchronize()
            .map_err(|e| gpu_error("waiting for a copy to a device matrix", e));
        for buffer in buffers {
            self.give_back_staging(buffer);
        }
        copied.and(done)
    }

    /// Copies the block `span` of this GPU's memory into the host matrix `dst` (contiguous columns,
    /// of its shape and precision) on the device-to-host stream; returns when it is there.
    ///
    /// # Safety
    /// `span` must be memory of this GPU ([`GpuContext::check_span`]) that nothing writes during
    /// the call.
    pub unsafe fn read_span(&self, span: &DeviceSpan, dst: AnyMut<'_>) -> Result<(), KernelError> {
        Self::check_span_precision(span, dst.precision())?;
        let host = each_precision!(&dst, AnyMut, m => DirectSpan::of_mat(m.as_ref(), false));
        // SAFETY: the caller's contract; `dst` is borrowed mutably for the call, which returns
        // once the copy is done.
        unsafe { self.host_span_copy(span, host, false) }
    }

    /// Copies the block `from` of this GPU's memory into the block `to` (of its shape and
    /// precision) on the host-to-device stream (after the copies queued there); returns when it is
    /// there.
    ///
    /// # Safety
    /// Both spans must be memory of this GPU ([`GpuContext::check_span`]), disjoint, `to` used by
    /// nothing else and `from` unwritten during the call.
    unsafe fn copy_span(&self, from: &DeviceSpan, to: &DeviceSpan) -> Result<(), KernelError> {
        Self::check_span_precision(to, from.precision)?;
        if (from.rows, from.cols) != (to.rows, to.cols) {
            return Err(KernelError::Gpu {
                message: format!(
                    "copying a {} x {} device matrix into a {} x {} one",
                    from.rows, from.cols, to.rows, to.cols
                ),
            });
        }
        if from.rows == 0 || from.cols == 0 {
            return Ok(());
        }
        self.bind()?;
        let bytes = from.precision.bytes();
        let copy = copy_2d_descriptor(
            (Side::Device(from.addr), from.ld * bytes),
            (Side::Device(to.addr), to.ld * bytes),
            from.rows * bytes,
            from.cols,
        );
        // SAFETY: the caller's contract for both spans; the copy is waited for below.
        unsafe { issue_2d(&copy, Some(&self.h2d), "device to device") }?;
        self.h2d
            .synchronize()
            .map_err(|e| gpu_error("waiting for a copy within the device", e))
    }

    /// An error unless a host matrix in `precision` may be copied to or from `span`.
    fn check_span_precision(span: &DeviceSpan, precision: Precision) -> Result<(), KernelError> {
        if span.precision == precision {
            return Ok(());
        }
        Err(KernelError::Gpu {
            message: format!(
                "a host matrix in {precision} cannot be copied to or from a device matrix in {}",
                span.precision
            ),
        })
    }

    /// The 2D copy between the host matrix `host` (its span; `None`: not contiguous by columns) and
    /// the device block `span` (`to_device`: which way), queued on the stream of that direction and
    /// waited for.
    ///
    /// # Safety
    /// As [`GpuContext::write_span`] and [`GpuContext::read_span`]: `span` is this GPU's memory,
    /// the host side holds the bytes and stays valid (unread for a copy into it) during the call.
    unsafe fn host_span_copy(
        &self,
        span: &DeviceSpan,
        host: Option<DirectSpan>,
        to_device: bool,
    ) -> Result<(), KernelError> {
        if span.rows == 0 || span.cols == 0 {
            return Ok(());
        }
        let Some(host) = host else {
            return Err(KernelError::Gpu {
                message: "a copy between host memory and a device matrix takes a host matrix \
                          with contiguous columns"
                    .into(),
            });
        };
        let width = span.rows * span.precision.bytes();
        if host.width != width || host.height != span.cols {
            return Err(KernelError::Gpu {
                message: format!(
                    "the host matrix's {} columns of {} bytes differ from the device matrix's {} \
                     of {width}",
                    host.height, host.width, span.cols
                ),
            });
        }
        self.bind()?;
        let device = (Side::Device(span.addr), span.ld * span.precision.bytes());
        let near = (Side::Host(host.host), host.pitch);
        let (copy, stream, way) = if to_device {
            let copy = copy_2d_descriptor(near, device, width, span.cols);
            (copy, &self.h2d, "host to a device matrix")
        } else {
            let copy = copy_2d_descriptor(device, near, width, span.cols);
            (copy, &self.d2h, "a device matrix to host")
        };
        // SAFETY: the caller's contract for both sides; the copy is waited for below.
        unsafe { issue_2d(&copy, Some(stream), way) }?;
        stream
            .synchronize()
            .map_err(|e| gpu_error(&format!("waiting for a copy from {way}"), e))
    }

    /// Runs `op` on device tiles and waits for it; returns the kernel's seconds on the device (see
    /// [`GpuContext::launch`]).
    pub fn run(&self, op: Op, reads: &[&GpuTile], write: &mut GpuTile) -> Result<f64, KernelError> {
        self.launch(op, reads, write)?.wait()
    }

    /// Queues `op` on device tiles (reads in [`Op`]'s order, then the written tile) on the first
    /// compute stream ([`GpuContext::launch_on`]).
    pub fn launch(
        &self,
        op: Op,
        reads: &[&GpuTile],
        write: &mut GpuTile,
    ) -> Result<GpuKernel, KernelError> {
        self.launch_on(0, op, reads, write)
    }

    /// Queues `op` on device tiles (reads in [`Op`]'s order, then the written tile) on compute
    /// stream `stream`, after the copies and kernels that wrote them, and returns at once: the host
    /// never waits for one kernel before queueing the next. Shapes and the stream are checked
    /// first.
    pub fn launch_on(
        &self,
        stream: usize,
        op: Op,
        reads: &[&GpuTile],
        write: &mut GpuTile,
    ) -> Result<GpuKernel, KernelError> {
        self.launch_with(
            stream,
            (op, &KernelArgs::None, TensorMath::Off),
            reads,
            write,
        )
    }

    /// [`GpuContext::launch_on`] with what the kernel takes besides its tiles (LU's interchanges,
    /// [`KernelArgs::Pivots`], for [`GpuCall::Pivoted`]) and the math of its products: on tensor
    /// cores where [`TensorMath::applies`] (cuBLAS's GEMM with the math's fast compute type).
    pub fn launch_with(
        &self,
        stream: usize,
        (op, args, math): (Op, &KernelArgs, TensorMath),
        reads: &[&GpuTile],
        write: &mut GpuTile,
    ) -> Result<GpuKernel, KernelError> {
        let Some(lane) = self.lanes.get(stream) else {
            return Err(KernelError::Gpu {
                message: format!(
                    "there is no compute stream {stream}: {} has {}",
                    self.name,
                    self.lanes.len()
                ),
            });
        };
        let mut shapes: Vec<_> = reads.iter().map(|t| (t.rows, t.cols)).collect();
        shapes.push((write.rows, write.cols));
        op.check_shapes(&shapes)
            .map_err(|reason| KernelError::Operands { op, reason })?;
        let call = op.codelet().gpu;
        if let GpuCall::Absent(why) = call {
            return Err(KernelError::Gpu {
                message: format!("{op} has no GPU kernel: {why}"),
            });
        }
        if let Some((i, other)) = reads
            .iter()
            .enumerate()
            .find(|(_, t)| t.precision != write.precision)
        {
            return Err(KernelError::Operands {
                op,
                reason: format!(
                    "operand {i} is in precision {} but the written tile is in {}",
                    other.precision, write.precision
                ),
            });
        }
        self.bind()?;
        let s = &lane.stream;
        let mut scratch = lock(&lane.scratch);
        let (start, end) = self.timing_events()?;
        let (mut info, mut found, mut reflectors) = (None, None, None);
        if write.rows > 0 && write.cols > 0 {
            match call {
                GpuCall::Potrf => {
                    info = Some(with_scalar!(write.precision, T => {
                        self.queue_potrf::<T>(lane, write, &mut scratch, &start)
                    })?);
                }
                GpuCall::Blas(call) => with_scalar!(write.precision, T => {
                    self.queue_blas::<T>(lane, (op, call, math), reads, write, &start)
                })?,
                GpuCall::Inverse => {
                    info = with_scalar!(write.precision, T => {
                        self.queue_inverse::<T>(lane, op, reads, write, &mut scratch, &start)
                    })?;
                }
                GpuCall::Pivoted => with_scalar!(write.precision, T => {
                    self.queue_pivoted::<T>(lane, (op, args, math), reads, write, &start)
                })?,
                GpuCall::Panel => {
                    found = Some(with_scalar!(write.precision, T => {
                        self.queue_panel::<T>(lane, (op, args), write, &mut scratch, &start)
                    })?);
                }
                GpuCall::Reflected => with_scalar!(write.precision, T => {
                    self.queue_reflected::<T>(lane, (op, args), reads, write, &mut scratch, &start)
                })?,
                GpuCall::QrPanel => {
                    let (words, copies) = with_scalar!(write.precision, T => {
                        self.queue_qr_panel::<T>(lane, (op, args), write, &mut scratch, &start)
                    })?;
                    (info, reflectors) = (Some(words), copies);
                }
                GpuCall::Aasen => with_scalar!(write.precision, T => {
                    Self::queue_aasen::<T>(lane, (op, args, math), (reads, write), &start)
                })?,
                GpuCall::Absent(_) => unreachable!("refused above"),
            }
        } else {
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))?;
            // An empty panel found nothing.
            match args {
                KernelArgs::Panel { found, .. } => found.fill(PanelFound::default()),
                KernelArgs::QrPanel { found, .. } => {
                    found.fill(Arc::new(crate::AnyMat::zeros(write.precision, 1, 0)))
                }
                _ => {}
            }
        }
        end.record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        Ok(GpuKernel {
            op,
            start,
            end,
            info,
            found,
            reflectors,
        })
    }

    /// Queues the cuBLAS `call` of `op` in `T`'s precision (the tiles', checked by `launch`),
    /// `start` recorded just before it, once the stream waits for the operands' copies.
    fn queue_blas<T: CudaScalar>(
        &self,
        lane: &Lane,
        (op, call, math): (Op, Blas, TensorMath),
        reads: &[&GpuTile],
        write: &mut GpuTile,
        start: &CudaEvent,
    ) -> Result<(), KernelError> {
        use blas::cublasDiagType_t::{
            CUBLAS_DIAG_NON_UNIT as DIAG_NON_UNIT, CUBLAS_DIAG_UNIT as DIAG_UNIT,
        };
        use blas::cublasFillMode_t::{
            CUBLAS_FILL_MODE_LOWER as FILL_LOWER, CUBLAS_FILL_MODE_UPPER as FILL_UPPER,
        };
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        use blas::cublasSideMode_t::{CUBLAS_SIDE_LEFT as LEFT, CUBLAS_SIDE_RIGHT as RIGHT};
        let adj = T::ADJOINT;
        let s = &lane.stream;
        let h = lane.blas.0;
        let one = T::from_f64(1.0);
        let ld = |t: &GpuTile| int(t.rows.max(1));
        let (m, n) = (int(write.rows)?, int(write.cols)?);
        let ldc = ld(write)?;
        let a = reads[0];
        let (lda, a_rows, a_cols) = (ld(a)?, int(a.rows)?, int(a.cols)?);
        // Taking a device pointer makes the stream wait for the buffer's earlier copies;
        // dropping the guard records this use for later ones.
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
        let a = In {
            ptr: pa as *const T,
            ld: lda,
        };
        let b = In {
            ptr: pb as *const T,
            ld: ldb,
        };
        let c = Out {
            ptr: pc as *mut T,
            ld: ldc,
        };
        let c_in = c.read();
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        // SAFETY: the pointers are live device buffers of the shapes checked by `launch`,
        // with their leading dimensions, all in T's precision (checked by `launch`);
        // cudarc's guards order the compute stream after earlier copies into them and
        // record this use for later ones; scalars are host values (cuBLAS's default
        // pointer mode) read before the call returns.
        let status = unsafe {
            match call {
                Blas::Solve(Solve::RightAdjoint) => {
                    T::trsm(h, (RIGHT, adj), None, (m, n), one, a, c)
                }
                Blas::Solve(Solve::Left) => T::trsm(h, (LEFT, N), None, (m, n), one, a, c),
                Blas::Solve(Solve::LeftAdjoint) => T::trsm(h, (LEFT, adj), None, (m, n), one, a, c),
                Blas::Solve(Solve::LeftUnitLower) => {
                    let unit = (FILL_LOWER, DIAG_UNIT);
                    T::trsm(h, (LEFT, N), Some(unit), (m, n), one, a, c)
                }
                Blas::Solve(Solve::LeftUpper) => {
                    let upper = (FILL_UPPER, DIAG_NON_UNIT);
                    T::trsm(h, (LEFT, N), Some(upper), (m, n), one, a, c)
                }
                Blas::RankK => T::rank_k(h, N, (m, a_cols), (-1.0, 1.0), a, c),
                // In place: cuBLAS allows C = B with the same leading dimension.
                Blas::Add => T::geam(h, (m, n), (one, one), (a, c_in), c),
                Blas::Product(p) => {
                    let (alpha, beta) = (T::from_f64(p.alpha()), T::from_f64(p.beta()));
                    let trans = |t: bool| if t { adj } else { N };
                    let k = if p.trans_a { a_rows } else { a_cols };
                    let ops = (trans(p.trans_a), trans(p.trans_b));
                    gemm_with::<T>(h, (ops, math), (m, n, k), (alpha, beta), (a, b, c))
                }
            }
        };
        status
            .result()
            .map_err(|e| gpu_error(&format!("cuBLAS {}{op}", T::PRECISION), e))
    }

    /// Queues LU's panel ([`GpuCall::Panel`]) in `T`'s precision (the tile's, checked by
    /// `launch_with`): cuSOLVER's ?getrf on the block column's rows from the step's first (the
    /// lane's workspace, grown as needed), `start` recorded just before it, then the copy of its
    /// devInfo and interchanges into page-locked memory, read by [`GpuKernel::wait`] into the slot
    /// returned with them.
    fn queue_panel<T: CudaScalar>(
        &self,
        lane: &Lane,
        (op, args): (Op, &KernelArgs),
        write: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<(PinnedHostSlice<i32>, PanelSlot), KernelError> {
        let KernelArgs::Panel { first, found } = args else {
            return Err(KernelError::Operands {
                op,
                reason: format!("{op} takes the step's first row and a slot, given {args:?}"),
            });
        };
        let (first, b) = (*first, write.cols);
        if first + b > write.rows {
            return Err(KernelError::Operands {
                op,
                reason: format!(
                    "a panel of {b} columns from row {first} on a block column of {} rows",
                    write.rows
                ),
            });
        }
        let s = &lane.stream;
        let h = lane.solver.0;
        let (m, n, ld) = (int(write.rows - first)?, int(b)?, int(write.rows)?);
        // devInfo, then the b interchanges: one copy back.
        let mut words = s
            .alloc_zeros::<i32>(b + 1)
            .map_err(|e| gpu_error("allocating the panel's interchanges", e))?;
        let (pa, _use_a) = write.data.device_ptr_mut(s);
        // The rows from the step's first: column-major, so `first` elements in.
        let a = Out {
            ptr: (pa as *mut T).wrapping_add(first),
            ld,
        };
        let mut lwork = 0i32;
        // SAFETY: `a` is the live (rows - first) x b block of the tile, leading dimension its
        // rows; lwork is a host integer that outlives the call.
        unsafe { T::getrf_buffer_size(h, (m, n), a, &mut lwork) }
            .result()
            .map_err(|e| gpu_error(&format!("cusolverDn{}getrf_bufferSize", T::PRECISION), e))?;
        let needed = usize::try_from(lwork).unwrap_or(0).max(1) * size_of::<T>();
        PotrfScratch::grow(s, &mut scratch.work, needed, "GETRF's workspace")?;
        {
            let (pw, _use_w) = scratch.work.device_ptr_mut(s);
            let (pi, _use_i) = words.device_ptr_mut(s);
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))?;
            let (info, ipiv) = (pi as *mut i32, (pi as *mut i32).wrapping_add(1));
            // SAFETY: live device buffers: the block above, a workspace of at least lwork
            // elements, b + 1 integers (devInfo, then the interchanges); the call only queues
            // work on the stream, and cudarc's guards order it after earlier copies.
            unsafe { T::getrf(h, (m, n), a, pw as *mut T, (ipiv, info)) }
                .result()
                .map_err(|e| gpu_error(&format!("cusolverDn{}getrf", T::PRECISION), e))?;
        }
        // SAFETY: b + 1 integers, written by the copy below before `GpuKernel::wait` reads them.
        let mut host = unsafe { self.ctx.alloc_pinned_with_flags::<i32>(b + 1, 0) }
            .map_err(|e| gpu_error("allocating page-locked memory for the interchanges", e))?;
        s.memcpy_dtoh(&words, &mut host)
            .map_err(|e| gpu_error("copying the panel's interchanges", e))?;
        Ok((host, found.clone()))
    }

    /// Queues QR's panel ([`GpuCall::QrPanel`]) in `T`'s precision (the tile's, checked by
    /// `launch_with`): cuSOLVER's ?geqrf on the block column's rows from the step's first (the
    /// lane's workspace, grown as needed), `start` recorded just before it, then for each inner
    /// block of its reflectors the Gram matrix of their rows below the block's diagonal block
    /// (cuBLAS's ?gemm), and the copies into page-locked memory of devInfo, the taus with the Gram
    /// matrices, and the panel's first rows (its diagonal blocks), from which [`GpuKernel::wait`]
    /// makes the T's ([`crate::reflector_ts`]) into the slot (none to copy for a panel of no rows:
    /// its slot is filled at once).
    fn queue_qr_panel<T: CudaScalar>(
        &self,
        lane: &Lane,
        (op, args): (Op, &KernelArgs),
        write: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<(PinnedHostSlice<i32>, Option<ReflectorCopies>), KernelError> {
        let KernelArgs::QrPanel {
            first,
            inner,
            found,
        } = args
        else {
            return Err(KernelError::Operands {
                op,
                reason: format!(
                    "{op} takes the step's first row, the inner block and a slot, given {args:?}"
                ),
            });
        };
        let (first, b) = (*first, write.cols);
        if first > write.rows {
            return Err(KernelError::Operands {
                op,
                reason: format!(
                    "a panel from row {first} on a block column of {} rows",
                    write.rows
                ),
            });
        }
        let rows = write.rows - first;
        let k = rows.min(b);
        let ib = (*inner).min(k).max(1);
        let s = &lane.stream;
        let elem = size_of::<T>();
        let alloc_info = || {
            s.alloc_zeros::<i32>(1)
                .map_err(|e| gpu_error("allocating the panel's devInfo", e))
        };
        let mut info = alloc_info()?;
        // SAFETY: one integer, written by the copy below before `GpuKernel::wait` reads it.
        let mut info_host = unsafe { self.ctx.alloc_pinned_with_flags::<i32>(1, 0) }
            .map_err(|e| gpu_error("allocating page-locked memory for devInfo", e))?;
        if k == 0 {
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))?;
            found.fill(Arc::new(crate::AnyMat::zeros(T::PRECISION, 1, 0)));
            s.memcpy_dtoh(&info, &mut info_host)
                .map_err(|e| gpu_error("copying devInfo", e))?;
            return Ok((info_host, None));
        }
        let h = lane.solver.0;
        let (m, n, ld) = (int(rows)?, int(b)?, int(write.rows)?);
        // tau, then the Gram matrices: one copy back.
        let words_len = (k + ib * k) * elem;
        let mut words = s
            .alloc_zeros::<u8>(words_len)
            .map_err(|e| gpu_error("allocating the panel's taus and Gram matrices", e))?;
        let (pa, _use_a) = write.data.device_ptr_mut(s);
        // The rows from the step's first: column-major, so `first` elements in.
        let at = |(i, j): (usize, usize)| (pa as *mut T).wrapping_add(first + i + j * write.rows);
        let a = Out {
            ptr: at((0, 0)),
            ld,
        };
        let mut lwork = 0i32;
        // SAFETY: `a` is the live (rows - first) x b block of the tile, leading dimension its
        // rows; lwork is a host integer that outlives the call.
        unsafe { T::geqrf_buffer_size(h, (m, n), a, &mut lwork) }
            .result()
            .map_err(|e| gpu_error(&format!("cusolverDn{}geqrf_bufferSize", T::PRECISION), e))?;
        let needed = usize::try_from(lwork).unwrap_or(0).max(1) * elem;
        PotrfScratch::grow(s, &mut scratch.work, needed, "GEQRF's workspace")?;
        {
            let (pw, _use_w) = scratch.work.device_ptr_mut(s);
            let (pt, _use_t) = words.device_ptr_mut(s);
            let (pi, _use_i) = info.device_ptr_mut(s);
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))?;
            let taus = pt as *mut T;
            // SAFETY: live device buffers: the block above, a workspace of at least lwork
            // elements, k scalars tau, devInfo; the call only queues work on the stream, and
            // cudarc's guards order it after earlier copies.
            unsafe { T::geqrf(h, (m, n), a, taus, (pw as *mut T, lwork), pi as *mut i32) }
                .result()
                .map_err(|e| gpu_error(&format!("cusolverDn{}geqrf", T::PRECISION), e))?;
            // SAFETY: the panel's rows from the step's first (rows x b, leading dimension ld,
            // factored by the call above on this stream) and the ib x k Gram matrices after the
            // k taus in the buffer allocated above.
            unsafe {
                queue_grams(
                    lane.blas.0,
                    (at((0, 0)), ld, rows),
                    taus.wrapping_add(k),
                    (k, ib),
                )
            }?;
        }
        let panel = (at((0, 0)) as u64, write.rows);
        let copies = self.copy_reflectors_back::<T>(s, (&words, panel), (k, ib), found)?;
        s.memcpy_dtoh(&info, &mut info_host)
            .map_err(|e| gpu_error("copying devInfo", e))?;
        Ok((info_host, Some(copies)))
    }

    /// Queues on `s` the copies into page-locked memory of what a QR panel's T's are made of: the
    /// taus with the Gram matrices (`words`) and the panel's k x k head (from the device address
    /// `panel.0`, whose columns are `panel.1` elements apart); [`GpuKernel::wait`] reads them.
    fn copy_reflectors_back<T: CudaScalar>(
        &self,
        s: &Arc<CudaStream>,
        (words, panel): (&CudaSlice<u8>, (u64, usize)),
        (k, ib): (usize, usize),
        found: &ReflectorSlot,
    ) -> Result<ReflectorCopies, KernelError> {
        let elem = size_of::<T>();
        // SAFETY (both): bytes written by the copies below before `GpuKernel::wait` reads them.
        let mut host = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(words.len(), 0) }
            .map_err(|e| gpu_error("allocating page-locked memory for the taus", e))?;
        let mut head = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(k * k * elem, 0) }
            .map_err(|e| gpu_error("allocating page-locked memory for the panel's head", e))?;
        s.memcpy_dtoh(words, &mut host)
            .map_err(|e| gpu_error("copying the panel's taus and Gram matrices", e))?;
        let head_ptr = head
            .as_mut_ptr()
            .map_err(|e| gpu_error("addressing the panel's head", e))?;
        let copy = copy_2d_descriptor(
            (Side::Device(panel.0), panel.1 * elem),
            (Side::Host(head_ptr as usize), k * elem),
            k * elem,
            k,
        );
        // SAFETY: the panel's k x k head in the live tile (pitch its rows) into the k x k
        // page-locked buffer above, queued on the stream after ?geqrf wrote it; `wait` reads the
        // buffer only after the kernel's end event, recorded after this copy.
        unsafe { issue_2d(&copy, Some(s), "the panel's head, device to host") }?;
        Ok(ReflectorCopies {
            precision: T::PRECISION,
            k,
            ib,
            words: host,
            head,
            slot: found.clone(),
        })
    }

    /// Queues QR's application of a panel's block reflectors ([`GpuCall::Reflected`]) in `T`'s
    /// precision (the tiles', checked by `launch_with`): C <- Q^H C on the block column's rows from
    /// the step's first, Q = I - V T V^H from the panel's rows from there (all of a panel that
    /// holds only those rows) and the T's uploaded first, one inner block of reflectors after
    /// another as LAPACK's ?larfb (left, adjoint, forward, by columns) computes it: W = V1^H C1 +
    /// V2^H C2 (in the lane's workspace), W = T^H W, C2 -= V2 W, C1 -= V1 W; `start` recorded once
    /// the stream waits for the operands.
    fn queue_reflected<T: CudaScalar>(
        &self,
        lane: &Lane,
        (op, args): (Op, &KernelArgs),
        reads: &[&GpuTile],
        write: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<(), KernelError> {
        let v = reads[0];
        let (first, v_first, rows, t) = reflected_operands::<T>(op, args, v, write)?;
        let (ib, k) = (t.nrows(), t.ncols());
        let s = &lane.stream;
        if k == 0 || write.cols == 0 {
            return start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e));
        }
        // Freed on the stream once the calls below have read it (cudarc's stream-ordered free).
        let ts = upload_matrix(s, t, "the reflectors' T's")?;
        let n = write.cols;
        let bytes = ib * n * size_of::<T>();
        PotrfScratch::grow(s, &mut scratch.work, bytes, "larfb's workspace")?;
        // The workspace and the T's both have the inner block's rows.
        let (ldv, ldc, ldw) = (int(v.rows)?, int(write.rows)?, int(ib)?);
        let (pv, _read_v) = v.data.device_ptr(s);
        let (pt, _read_t) = ts.device_ptr(s);
        let (pc, _write_c) = write.data.device_ptr_mut(s);
        let (pw, _write_w) = scratch.work.device_ptr_mut(s);
        // Column-major: element (i, j) of a matrix with leading dimension ld.
        let at = |ptr: u64, (i, j): (usize, usize), ld: i32| {
            (ptr as *mut T).wrapping_add(i + j * ld as usize)
        };
        let w = Out {
            ptr: pw as *mut T,
            ld: ldw,
        };
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        for i in (0..k).step_by(ib) {
            let kb = ib.min(k - i);
            let v = |row| Out {
                ptr: at(pv, (v_first + row, i), ldv),
                ld: ldv,
            };
            let c = |row| Out {
                ptr: at(pc, (first + row, 0), ldc),
                ld: ldc,
            };
            let t_i = Out {
                ptr: at(pt, (0, i), ldw),
                ld: ldw,
            };
            let block = Larfb {
                v: (v(i).read(), v(i + kb).read()),
                t: t_i.read(),
                c: (c(i), c(i + kb)),
                w,
                shape: (int(kb)?, int(n)?, int(rows - i - kb)?),
            };
            // SAFETY: every pointer lies in a live device buffer of the shapes checked by
            // `reflected_operands` (the panel's and the block column's rows from the step's first,
            // the k reflectors, the ib x k T's) or grown above (the ib x n workspace), with its
            // leading dimension, in T's precision; cudarc's guards order the stream after earlier
            // copies into them and record these uses.
            unsafe { block.queue(lane.blas.0, op) }?;
        }
        Ok(())
    }

    /// Queues one of Aasen's block-column kernels ([`GpuCall::Aasen`]) in `T`'s precision (the
    /// tiles', checked by `launch_with`) on the rows its arguments name (checked by
    /// [`aasen_call`]): the interchanges by cuSOLVER's ?laswp (uploaded first, 1-based), a term of
    /// the update or H's terms by one cuBLAS ?gemm (T uploaded first), `start` recorded once the
    /// stream waits for the operands.
    fn queue_aasen<T: CudaScalar>(
        lane: &Lane,
        (op, args, math): (Op, &KernelArgs, TensorMath),
        (reads, write): (&[&GpuTile], &mut GpuTile),
        start: &CudaEvent,
    ) -> Result<(), KernelError> {
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        let [l] = reads else {
            return Err(KernelError::Operands {
                op,
                reason: format!("expected one block column read, got {}", reads.len()),
            });
        };
        let call = aasen_call(op, args, (l.rows, l.cols), (write.rows, write.cols))?;
        let s = &lane.stream;
        let recorded = || {
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))
        };
        let what = |call: &str| format!("{call} ({op}, {})", T::PRECISION);
        let ld = int(write.rows.max(1))?;
        let cols = int(write.cols)?;
        // What the kernel reads besides the block columns, uploaded first: the interchanges, or
        // H's block column of T.
        let (pivots, t) = match call {
            AasenCall::Swap { ipiv, .. } if !ipiv.is_empty() => {
                (Some(upload_pivots(s, ipiv)?), None)
            }
            AasenCall::Hessenberg { t, .. } => {
                let t = crate::run::operand::<T>(op, "T", t.as_ref())?;
                let empty = t.nrows() == 0 || t.ncols() == 0;
                let upload = (!empty).then(|| upload_matrix(s, t, "a block column of T"));
                (None, upload.transpose()?.map(|u| (u, t.nrows(), t.ncols())))
            }
            _ => (None, None),
        };
        let (pl, _read_l) = l.data.device_ptr(s);
        let (pc, _write_c) = write.data.device_ptr_mut(s);
        // Held until the call is queued, so that cudarc records its use after it.
        let t_at = t.as_ref().map(|(ts, r, b)| (ts.device_ptr(s), *r, *b));
        // Column-major with leading dimension `ld`: `row` elements into a block column.
        let at = |ptr: u64, row: usize| (ptr as *mut T).wrapping_add(row);
        let input = |ptr: u64, row: usize| In {
            ptr: at(ptr, row).cast_const(),
            ld,
        };
        let one = T::from_f64(1.0);
        // The product's operations, shape, scalars and operands: C <- alpha op(A) op(B) + C.
        let product = match (call, &t_at, &pivots) {
            (AasenCall::Swap { first, ipiv }, _, Some(pivots)) => {
                let (pp, _read_pivots) = pivots.device_ptr(s);
                recorded()?;
                let c = Out {
                    ptr: at(pc, first),
                    ld,
                };
                // SAFETY: `c` is the block column's rows from `first` (a live device buffer, its
                // leading dimension its rows), the interchanges k 1-based rows of those (checked by
                // `aasen_call`), in device memory kept until the stream has run the call; cudarc's
                // guards order the stream after earlier copies and record this use.
                unsafe { T::laswp(lane.solver.0, cols, c, (int(ipiv.len())?, pp as *const i32)) }
                    .result()
                    .map_err(|e| gpu_error(&what("cuSOLVER laswp"), e))?;
                return Ok(());
            }
            (AasenCall::Update { first, block }, _, _) if first < write.rows && l.cols > 0 => {
                let shape = (write.rows - first, l.cols);
                let (a, b) = (input(pl, first), input(pc, block));
                ((N, N), shape, T::from_f64(-1.0), (a, b, first))
            }
            (AasenCall::Hessenberg { top, source, .. }, Some(((pt, _), r, b)), _) => {
                let t = In {
                    ptr: *pt as *const T,
                    ld: int(*r)?,
                };
                ((N, T::ADJOINT), (*r, *b), one, (t, input(pl, source), top))
            }
            // Nothing to do: no interchange, no row, an empty T.
            _ => return recorded(),
        };
        let (ops, (m, k), alpha, (a, b, row)) = product;
        recorded()?;
        let c = Out {
            ptr: at(pc, row),
            ld,
        };
        // SAFETY: the pointers are the rows `aasen_call` checked of live device buffers (both
        // block columns `write.rows` rows, their leading dimension; T r x b in device memory kept
        // until the stream has run the call), the block C reads from itself above the rows it
        // writes (no overlap); cudarc's guards order the stream after earlier copies and record
        // these uses.
        unsafe {
            gemm_with::<T>(
                lane.blas.0,
                (ops, math),
                (int(m)?, cols, int(k)?),
                (alpha, one),
                (a, b, c),
            )
        }
        .result()
        .map_err(|e| gpu_error(&what("cuBLAS gemm"), e))?;
        Ok(())
    }

    /// Queues LU's update or interchanges ([`GpuCall::Pivoted`]) in `T`'s precision (the tiles',
    /// checked by `launch_with`): on the rows of the block column `write` from the step's first,
    /// the panel's interchanges by cuSOLVER's ?laswp (uploaded first, 1-based), then for the update
    /// the unit lower solve with the panel's first b rows (cuBLAS's ?trsm) and the product of the
    /// panel's rows below them (?gemm), `start` recorded once the stream waits for the operands.
    fn queue_pivoted<T: CudaScalar>(
        &self,
        lane: &Lane,
        (op, args, math): (Op, &KernelArgs, TensorMath),
        reads: &[&GpuTile],
        write: &mut GpuTile,
        start: &CudaEvent,
    ) -> Result<(), KernelError> {
        use blas::cublasDiagType_t::CUBLAS_DIAG_UNIT as DIAG_UNIT;
        use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as FILL_LOWER;
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        use blas::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
        let bad = |reason: String| KernelError::Operands { op, reason };
        let KernelArgs::Pivots { first, ipiv } = args else {
            return Err(bad(format!(
                "{op} takes the panel's interchanges, given {args:?}"
            )));
        };
        let (first, b) = (*first, ipiv.len());
        let panel = reads[0];
        let rows = write.rows.saturating_sub(first);
        if panel.rows != write.rows || panel.cols != b || first + b > write.rows {
            return Err(bad(format!(
                "a panel {}x{} with {b} interchanges from row {first} on a block column {}x{}",
                panel.rows, panel.cols, write.rows, write.cols
            )));
        }
        if let Some((i, p)) = ipiv.iter().enumerate().find(|&(i, &p)| p < i || p >= rows) {
            return Err(bad(format!(
                "interchange {i} names row {p}: rows {i}..{rows} are the ones it may swap"
            )));
        }
        let s = &lane.stream;
        let pivots = upload_pivots(s, ipiv)?;
        let (pp, _read_pivots) = pivots.device_ptr(s);
        let (ld, cols) = (int(write.rows.max(1))?, int(write.cols)?);
        let (pa, _read_a) = panel.data.device_ptr(s);
        let (pc, _write_c) = write.data.device_ptr_mut(s);
        // The rows from the step's first: column-major, so `first` elements into each matrix.
        let at = |ptr: u64, row: usize| (ptr as *mut T).wrapping_add(row);
        let (l11, l21) = (
            In {
                ptr: at(pa, first).cast_const(),
                ld,
            },
            In {
                ptr: at(pa, first + b).cast_const(),
                ld,
            },
        );
        let (c1, c2) = (
            Out {
                ptr: at(pc, first),
                ld,
            },
            Out {
                ptr: at(pc, first + b),
                ld,
            },
        );
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        let (bi, below) = (int(b)?, int(rows - b)?);
        // SAFETY: the pointers are live device buffers of the shapes checked above and by
        // `launch_with` (the panel's and the block column's rows from `first`, their leading
        // dimension their rows), in T's precision; the interchanges are b 1-based rows of those
        // (checked above), in device memory kept until the stream has run the call; cudarc's guards
        // order the stream after earlier copies and record this use; scalars are host values.
        unsafe {
            T::laswp(lane.solver.0, cols, c1, (bi, pp as *const i32))
                .result()
                .map_err(|e| gpu_error(&format!("cuSOLVER {}laswp", T::PRECISION), e))?;
            if op == Op::LuSwap {
                return Ok(());
            }
            let (h, one) = (lane.blas.0, T::from_f64(1.0));
            let unit = Some((FILL_LOWER, DIAG_UNIT));
            T::trsm(h, (LEFT, N), unit, (bi, cols), one, l11, c1)
                .result()
                .map_err(|e| gpu_error(&format!("cuBLAS {}trsm ({op})", T::PRECISION), e))?;
            if below > 0 {
                let c1 = In {
                    ptr: c1.ptr.cast_const(),
                    ld,
                };
                let minus = (T::from_f64(-1.0), one);
                gemm_with::<T>(h, ((N, N), math), (below, cols, bi), minus, (l21, c1, c2))
                    .result()
                    .map_err(|e| gpu_error(&format!("cuBLAS {}gemm ({op})", T::PRECISION), e))?;
            }
        }
        Ok(())
    }

    /// A whole host matrix copied to device memory (pageable memory, synchronous: the peers'
    /// set-up, never timed).
    fn resident<T: Scalar>(&self, a: MatRef<'_, T>) -> Result<GpuTile, KernelError> {
        self.bind()?;
        let mut elements = vec![T::from_f64(0.0); a.nrows() * a.ncols()];
        MatMut::from_column_major_slice_mut(&mut elements, a.nrows(), a.ncols()).copy_from(a);
        // SAFETY: the bytes of initialised elements, borrowed from them (u8 needs no
        // alignment).
        let packed = unsafe {
            std::slice::from_raw_parts(elements.as_ptr().cast::<u8>(), size_of_val(&*elements))
        };
        let mut tile = self.alloc(T::PRECISION, a.nrows(), a.ncols())?;
        if !packed.is_empty() {
            self.h2d
                .memcpy_htod(packed, &mut tile.data)
                .map_err(|e| gpu_error("copying a matrix to the device", e))?;
        }
        self.wait_uploads()?;
        Ok(tile)
    }

    /// cuSOLVER's `peer` call (the matrix's precision) on the square `a` already in device memory:
    /// copied there once (untimed), then on a fresh device copy of it each time, `1 + runs` calls
    /// (the first a warm-up), each the kernels' seconds by their events.
    pub fn time_resident_solver<T: Scalar>(
        &self,
        peer: SolverPeer,
        a: MatRef<'_, T>,
        runs: usize,
    ) -> Result<Vec<f64>, KernelError> {
        peer.check_shape(a.shape())?;
        peer.check_precision(T::PRECISION)?;
        self.time_resident(a, runs, |work| self.solver_peer(peer, work))
    }

    /// cuSOLVER's `peer` call as a program makes it on `a` in host memory: `a` copied in (from
    /// pageable memory as it lies: the driver stages it; from page-locked memory by DMA), the call,
    /// the result copied out into `out` (`a` stays as it is for the next call), `1 + runs` times
    /// (the first a warm-up), each call timed whole by the wall clock.
    pub fn time_host_solver<T: Scalar>(
        &self,
        peer: SolverPeer,
        a: MatRef<'_, T>,
        out: MatMut<'_, T>,
        runs: usize,
    ) -> Result<Vec<f64>, KernelError> {
        peer.check_shape(a.shape())?;
        peer.check_precision(T::PRECISION)?;
        self.time_host((a, out), (peer.op(), runs), |work| {
            self.solver_peer(peer, work)
        })
    }

    /// The kernels of `peer` on the device matrix `a`, waited for; their seconds by their events.
    fn solver_peer(&self, peer: SolverPeer, a: &mut GpuTile) -> Result<f64, KernelError> {
        match peer {
            SolverPeer::Potrf => self.run(Op::Potrf, &[], a),
            SolverPeer::Inverse => self.potrf_potri(a),
            SolverPeer::Getrf | SolverPeer::Sytrf => self.pivoted(a, peer),
            SolverPeer::Geqrf => self.geqrf(a),
            SolverPeer::Gels { columns } => self.gels(a, columns),
            SolverPeer::Irs { columns, math } => self.irs(a, (columns, math)),
        }
    }

    /// [`SolverPeer::Irs`] on the device matrix `ab` = [A | B] (A n x n, its first `columns`
    /// columns): one `cusolverDn<t1><t2>gesv` call ([`irs_routines`]), X into a device matrix of
    /// B's shape, waited for; its seconds by its events. A zero pivot of the f64 fallback's LU is
    /// [`KernelError::Singular`].
    fn irs(
        &self,
        ab: &mut GpuTile,
        (columns, math): (usize, TensorMath),
    ) -> Result<f64, KernelError> {
        let (n, k) = (columns, ab.cols - columns);
        if n == 0 || k == 0 {
            return Ok(0.0);
        }
        SolverPeer::Irs { columns, math }.check_precision(ab.precision)?;
        match ab.precision {
            Precision::Z => self.irs_with(irs_routines!(Z, math), ab, (n, k, math)),
            _ => self.irs_with(irs_routines!(D, math), ab, (n, k, math)),
        }
    }

    /// [`GpuContext::irs`] with the routines of its precision, on elements `E` (f64 or
    /// cuDoubleComplex).
    fn irs_with<E>(
        &self,
        (size, solve): (IrsSize<E>, IrsSolve<E>),
        ab: &mut GpuTile,
        (n, k, math): (usize, usize, TensorMath),
    ) -> Result<f64, KernelError> {
        let (ni, ki) = (int(n)?, int(k)?);
        self.bind()?;
        let lane = &self.lanes[0];
        let s = &lane.stream;
        let bytes = ab.precision.bytes();
        let alloc = |len: usize, what: &str| {
            s.alloc_zeros::<u8>(len.max(1))
                .map_err(|e| gpu_error(&format!("allocating {what}"), e))
        };
        let (mut x, mut ipiv, mut info) = (
            alloc(n * k * bytes, "the refined solution")?,
            alloc(n * size_of::<i32>(), "the interchanges")?,
            alloc(size_of::<i32>(), "devInfo")?,
        );
        let (start, end) = self.timing_events()?;
        let scratch = lock(&lane.scratch);
        let h = lane.solver.0;
        let (pa, use_a) = ab.data.device_ptr_mut(s);
        let (px, use_x) = x.device_ptr_mut(s);
        let (pp, use_p) = ipiv.device_ptr_mut(s);
        let (pi, use_i) = info.device_ptr_mut(s);
        let (a, x_ptr) = (pa as *mut E, px as *mut E);
        let (b, p) = (a.wrapping_add(n * n), pp as *mut i32);
        let name = format!("cuSOLVER's refined gesv ({}, {math})", ab.precision);
        let mut work_bytes = 0usize;
        // The arguments both routines take, then the workspace and what each takes besides.
        macro_rules! with_operands {
            ($routine:expr, $work:expr, $($tail:expr),*) => {
                $routine(h, ni, ki, a, ni, p, b, ni, x_ptr, ni, $work, $($tail),*)
            };
        }
        // SAFETY: A (n x n) and B (n x k) lie in the live device matrix [A | B] (leading dimension
        // n), X (n x k), the n interchanges and devInfo are live device buffers of their sizes, on
        // the handle's stream; the workspace size is a host value written before the call returns.
        let status = unsafe { with_operands!(size, std::ptr::null_mut(), &mut work_bytes) };
        status.result().map_err(|e| gpu_error(&name, e))?;
        let work = alloc(work_bytes, "the refined solver's workspace")?;
        let (pw, use_w) = work.device_ptr(s);
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        let mut iterations = 0i32;
        // SAFETY: as above; the workspace holds `work_bytes` bytes; the iteration count is a host
        // value written before the call returns, devInfo a device word.
        let status = unsafe {
            let w = pw as *mut std::ffi::c_void;
            with_operands!(solve, w, work_bytes, &mut iterations, pi as *mut i32)
        };
        status.result().map_err(|e| gpu_error(&name, e))?;
        end.record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        drop((use_a, use_x, use_p, use_i, use_w, scratch));
        let seconds = GpuKernel {
            op: Op::LuPanel,
            start,
            end,
            info: None,
            found: None,
            reflectors: None,
        }
        .wait()?;
        let word = s
            .clone_dtoh(&info)
            .map_err(|e| gpu_error("reading the refined solver's devInfo", e))?;
        drop((work, x, ipiv));
        match i32::from_ne_bytes([word[0], word[1], word[2], word[3]]) {
            0 => Ok(seconds),
            column if column > 0 => Err(KernelError::Singular {
                index: column as usize - 1,
            }),
            other => Err(gpu_error(
                &name,
                format!("devInfo {other} (iterations {iterations})"),
            )),
        }
    }

    /// `call` on a fresh device copy of the square `a` (copied to device memory once, untimed; each
    /// copy within the device is not timed either), `1 + runs` times (the first a warm-up): the
    /// seconds `call` returns (its kernels' by their events). `op` names the work in errors.
    fn time_resident<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
        runs: usize,
        call: impl Fn(&mut GpuTile) -> Result<f64, KernelError>,
    ) -> Result<Vec<f64>, KernelError> {
        let pristine = self.resident(a)?;
        let mut work = self.alloc(T::PRECISION, a.nrows(), a.ncols())?;
        warm_then_time(runs, || {
            if a.nrows() * a.ncols() > 0 {
                self.compute()
                    .memcpy_dtod(&pristine.data, &mut work.data)
                    .map_err(|e| gpu_error("copying the matrix on the device", e))?;
            }
            call(&mut work)
        })
    }

    /// `call` as a program makes it on the square matrix `a` in host memory: `a` copied in, the
    /// call, the result copied out into `out` (of `a`'s shape; `a` stays as it is for the next
    /// call), `1 + runs` times (the first a warm-up); the wall-clock seconds of the `runs` timed
    /// calls, copies included. `op` names the work in errors.
    fn time_host<T: Scalar>(
        &self,
        (a, mut out): (MatRef<'_, T>, MatMut<'_, T>),
        (op, runs): (Op, usize),
        call: impl Fn(&mut GpuTile) -> Result<f64, KernelError>,
    ) -> Result<Vec<f64>, KernelError> {
        let (m, n) = a.shape();
        if (out.nrows(), out.ncols()) != (m, n) {
            return Err(KernelError::Operands {
                op,
                reason: format!("the output is {}x{}, not {m}x{n}", out.nrows(), out.ncols()),
            });
        }
        let mut work = self.alloc(T::PRECISION, m, n)?;
        warm_then_time(runs, || {
            let start = std::time::Instant::now();
            self.copy_in(a, &mut work)?;
            call(&mut work)?;
            self.copy_out(&work, out.rb_mut())?;
            Ok(start.elapsed().as_secs_f64())
        })
    }

    /// Copies host matrix `src` into the device tile `dst` (same shape) and returns when it is
    /// there: `cuMemcpy2D` from memory as it is (pageable: the driver stages it), as a user's
    /// program copies a matrix in.
    fn copy_in<T: Scalar>(&self, src: MatRef<'_, T>, dst: &mut GpuTile) -> Result<(), KernelError> {
        let Some(span) = DirectSpan::of_mat(src, false) else {
            return Ok(());
        };
        self.bind()?;
        let (device, written) = dst.data.device_ptr_mut(&self.h2d);
        self.h2d
            .synchronize()
            .map_err(|e| gpu_error("waiting for the copy stream", e))?;
        // SAFETY: `src` spans `span` and is borrowed for the call, which returns once the copy is
        // done (synchronous); the device tile holds its rows x cols elements, idle (synchronized).
        let done = unsafe { self.copy_2d(&span, device, true, None) };
        drop(written);
        done
    }

    /// Copies the device tile `src` into host matrix `dst` (same shape) and returns when it is
    /// there, as [`GpuContext::copy_in`] the other way.
    fn copy_out<T: Scalar>(&self, src: &GpuTile, dst: MatMut<'_, T>) -> Result<(), KernelError> {
        let Some(span) = DirectSpan::of_mat(dst.as_ref(), false) else {
            return Ok(());
        };
        self.bind()?;
        let (device, read) = src.data.device_ptr(&self.d2h);
        self.d2h
            .synchronize()
            .map_err(|e| gpu_error("waiting for the copy stream", e))?;
        // SAFETY: `dst`, borrowed mutably for the call, spans `span`; the copy is synchronous.
        let done = unsafe { self.copy_2d(&span, device, false, None) };
        drop(read);
        done
    }

    /// ?potrf then ?potri on the device matrix `a` (lower triangles), waited for; the seconds of
    /// the two by their events.
    fn potrf_potri(&self, a: &mut GpuTile) -> Result<f64, KernelError> {
        let factor = self.run(Op::Potrf, &[], a)?;
        if a.rows == 0 {
            return Ok(factor);
        }
        let n = int(a.rows)?;
        let potri = with_scalar!(a.precision, T => self.solver_call::<T>(
            a,
            (Op::Trtri, "?potri"),
            // SAFETY (both): `out` is the live n x n device matrix, lwork a host integer, the
            // workspace of at least lwork elements and devInfo live device buffers.
            |h, out, lwork| unsafe { T::potri_buffer_size(h, n, out, lwork) },
            |h, out, work, info| unsafe { T::potri(h, n, out, work, info) },
        ))?;
        Ok(factor + potri.wait()?)
    }

    /// Queues the cuSOLVER routine `call` (`name` in errors, `op`'s rules for its devInfo) on the
    /// device matrix `a` in `T`'s precision on the first compute stream, between two events, with a
    /// workspace of the elements `size` asks for (the lane's, grown as needed) and a devInfo; the
    /// kernel, to wait for.
    fn solver_call<T: CudaScalar>(
        &self,
        a: &mut GpuTile,
        (op, name): (Op, &str),
        size: impl FnOnce(solver::cusolverDnHandle_t, Out<T>, *mut i32) -> SolverStatus,
        call: impl FnOnce(solver::cusolverDnHandle_t, Out<T>, (*mut T, i32), *mut i32) -> SolverStatus,
    ) -> Result<GpuKernel, KernelError> {
        self.bind()?;
        let lane = &self.lanes[0];
        let s = &lane.stream;
        let h = lane.solver.0;
        let (start, end) = self.timing_events()?;
        let mut scratch = lock(&lane.scratch);
        let mut info = s
            .alloc_zeros::<i32>(1)
            .map_err(|e| gpu_error(&format!("allocating {name}'s devInfo"), e))?;
        let mut lwork = 0i32;
        let (pa, use_a) = a.data.device_ptr_mut(s);
        let out = Out {
            ptr: pa as *mut T,
            ld: int(a.rows.max(1))?,
        };
        size(h, out, &mut lwork)
            .result()
            .map_err(|e| gpu_error(&format!("cusolverDn{name}_bufferSize"), e))?;
        let needed = usize::try_from(lwork).unwrap_or(0).max(1) * size_of::<T>();
        PotrfScratch::grow(s, &mut scratch.work, needed, &format!("{name}'s workspace"))?;
        let (pw, use_w) = scratch.work.device_ptr_mut(s);
        let (pi, use_i) = info.device_ptr_mut(s);
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        call(h, out, (pw as *mut T, lwork), pi as *mut i32)
            .result()
            .map_err(|e| gpu_error(&format!("cusolverDn{name}"), e))?;
        end.record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        // Their uses recorded on the stream, for later copies and kernels.
        drop((use_a, use_w, use_i));
        let host = self.info_to_host(lane, &info)?;
        drop(scratch);
        Ok(GpuKernel {
            op,
            start,
            end,
            info: Some(host),
            found: None,
            reflectors: None,
        })
    }

    /// ?getrf (`peer` [`SolverPeer::Getrf`]) or ?sytrf (lower, real, [`SolverPeer::Sytrf`]) on the
    /// device matrix `a` (n x n), its n interchanges left on the device; waited for, its seconds by
    /// its events.
    fn pivoted(&self, a: &mut GpuTile, peer: SolverPeer) -> Result<f64, KernelError> {
        if a.rows == 0 {
            return Ok(0.0);
        }
        let n = int(a.rows)?;
        let s = &self.lanes[0].stream;
        let getrf = peer == SolverPeer::Getrf;
        let name = if getrf { "?getrf" } else { "?sytrf" };
        let mut ipiv = s
            .alloc_zeros::<i32>(a.rows)
            .map_err(|e| gpu_error(&format!("allocating {name}'s interchanges"), e))?;
        let (pp, use_p) = ipiv.device_ptr_mut(s);
        let pivots = pp as *mut i32;
        let kernel = with_scalar!(a.precision, T => self.solver_call::<T>(
            a,
            (peer.op(), name),
            // SAFETY (both): `out` is the live n x n device matrix, lwork a host integer, the
            // workspace, the n interchanges and devInfo live device buffers of their sizes.
            |h, out, lwork| unsafe {
                match getrf {
                    true => T::getrf_buffer_size(h, (n, n), out, lwork),
                    false => T::sytrf_buffer_size(h, n, out, lwork),
                }
            },
            |h, out, work, info| unsafe {
                match getrf {
                    true => T::getrf(h, (n, n), out, work.0, (pivots, info)),
                    false => T::sytrf(h, n, out, work, (pivots, info)),
                }
            },
        ))?;
        drop(use_p);
        kernel.wait()
    }

    /// ?geqrf on the device matrix `a` (m x n), waited for; its seconds by its events.
    fn geqrf(&self, a: &mut GpuTile) -> Result<f64, KernelError> {
        let k = a.rows.min(a.cols);
        if k == 0 {
            return Ok(0.0);
        }
        let (m, n) = (int(a.rows)?, int(a.cols)?);
        let s = &self.lanes[0].stream;
        let mut tau = s
            .alloc_zeros::<u8>(k * a.precision.bytes())
            .map_err(|e| gpu_error("allocating ?geqrf's scalars", e))?;
        let (pt, use_t) = tau.device_ptr_mut(s);
        let kernel = with_scalar!(a.precision, T => self.solver_call::<T>(
            a,
            (Op::Geqrt, "?geqrf"),
            // SAFETY (both): `out` is the live m x n device matrix, lwork a host integer, the
            // workspace, the k scalars tau and devInfo live device buffers of their sizes.
            |h, out, lwork| unsafe { T::geqrf_buffer_size(h, (m, n), out, lwork) },
            |h, out, work, info| unsafe { T::geqrf(h, (m, n), out, pt as *mut T, work, info) },
        ))?;
        drop(use_t);
        kernel.wait()
    }

    /// Least squares as a cuSOLVER user solves them (LAPACK ?gels for m >= n), on the device matrix
    /// `ab` = [A | B], A its first `columns` columns: ?geqrf on A, ?ormqr (?unmqr) B <- Q^H B, then
    /// ?trsm R X = B's first `columns` rows, X left there; waited for, the seconds of the three
    /// calls by their events. The shape was checked ([`SolverPeer::check_shape`]).
    fn gels(&self, ab: &mut GpuTile, columns: usize) -> Result<f64, KernelError> {
        let (m, n, k) = (ab.rows, columns, ab.cols - columns);
        if n == 0 {
            return Ok(0.0);
        }
        let (mi, ni, ki) = (int(m)?, int(n)?, int(k)?);
        let lane = &self.lanes[0];
        let s = &lane.stream;
        let mut tau = s
            .alloc_zeros::<u8>(n * ab.precision.bytes())
            .map_err(|e| gpu_error("allocating ?geqrf's scalars", e))?;
        let (pt, use_t) = tau.device_ptr_mut(s);
        // B: the columns after A's, in the same column-major buffer (leading dimension m).
        let offset = n * m * ab.precision.bytes();
        let b_of = |a: *mut u8| a.wrapping_add(offset);
        let ok = solver::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS;
        let name = "?geqrf + ?ormqr";
        let qr = with_scalar!(ab.precision, T => self.solver_call::<T>(
            ab,
            (Op::Geqrt, name),
            // SAFETY (both): `out` is the live m x (n + k) device matrix [A | B] (leading
            // dimension m), lwork a host integer, tau n device scalars, the workspace of at least
            // lwork elements and devInfo live device buffers.
            |h, out, lwork| unsafe {
                let (mut qr, mut apply) = (0, 0);
                let status = T::geqrf_buffer_size(h, (mi, ni), out, &mut qr);
                if status != ok || k == 0 {
                    *lwork = qr;
                    return status;
                }
                let b = In { ptr: b_of(out.ptr.cast()).cast::<T>().cast_const(), ld: out.ld };
                let reflectors = (out.read(), pt as *const T);
                let status = T::unmqr_buffer_size(h, (mi, ki, ni), reflectors, b, &mut apply);
                *lwork = qr.max(apply);
                status
            },
            |h, out, work, info| unsafe {
                let status = T::geqrf(h, (mi, ni), out, pt as *mut T, work, info);
                if status != ok || k == 0 {
                    return status;
                }
                let b = Out { ptr: b_of(out.ptr.cast()).cast::<T>(), ld: out.ld };
                T::unmqr(h, (mi, ki, ni), (out.read(), pt as *const T), b, work, info)
            },
        ))?;
        drop(use_t);
        let mut seconds = qr.wait()?;
        drop(tau);
        if k > 0 {
            seconds += self.upper_solve(ab, (n, k))?;
        }
        Ok(seconds)
    }

    /// B <- R^-1 B by ?trsm on the first compute stream, R the upper triangle of the first n
    /// columns of `ab` and B the first n rows of its k columns after them (as [`GpuContext::gels`]
    /// leaves them), between two events; waited for, its seconds.
    fn upper_solve(&self, ab: &mut GpuTile, (n, k): (usize, usize)) -> Result<f64, KernelError> {
        use blas::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT as NON_UNIT;
        use blas::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER as UPPER;
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        use blas::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
        self.bind()?;
        let lane = &self.lanes[0];
        let s = &lane.stream;
        let (start, end) = self.timing_events()?;
        let scratch = lock(&lane.scratch);
        let (m, bytes) = (ab.rows, ab.precision.bytes());
        let (ni, ki, ld) = (int(n)?, int(k)?, int(m.max(1))?);
        let (pa, use_a) = ab.data.device_ptr_mut(s);
        let b = (pa as *mut u8).wrapping_add(n * m * bytes);
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        let status = with_scalar!(ab.precision, T => {
            let r = In { ptr: pa as *const T, ld };
            let x = Out { ptr: b.cast::<T>(), ld };
            // SAFETY: R (n x n) and B (n x k) lie in the live m x (n + k) device matrix with
            // leading dimension m >= n, on the lane's handle's stream; alpha is a host value
            // read before the call returns.
            unsafe {
                T::trsm(lane.blas.0, (LEFT, N), Some((UPPER, NON_UNIT)), (ni, ki), T::from_f64(1.0), r, x)
            }
        });
        status
            .result()
            .map_err(|e| gpu_error(&format!("cuBLAS {}trsm", ab.precision), e))?;
        end.record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        drop((use_a, scratch));
        GpuKernel {
            op: Op::Geqrt,
            start,
            end,
            info: None,
            found: None,
            reflectors: None,
        }
        .wait()
    }

    /// The cuBLAS peer as a program calls it on matrices in host memory: copy A and B in, C = A B
    /// by one cublas?gemm call, copy C out into `c`, `1 + runs` times (the first a warm-up); the
    /// wall-clock seconds of the `runs` timed calls, copies included.
    pub fn time_host_gemm<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        mut c: MatMut<'_, T>,
        runs: usize,
    ) -> Result<Vec<f64>, KernelError> {
        let product = Op::MatMul(crate::MatMul::new(false, false, 1.0, 0.0));
        if a.ncols() != b.nrows() || (c.nrows(), c.ncols()) != (a.nrows(), b.ncols()) {
            return Err(KernelError::Operands {
                op: product,
                reason: format!(
                    "A is {}x{}, B {}x{}, C {}x{}",
                    a.nrows(),
                    a.ncols(),
                    b.nrows(),
                    b.ncols(),
                    c.nrows(),
                    c.ncols()
                ),
            });
        }
        let mut da = self.alloc(T::PRECISION, a.nrows(), a.ncols())?;
        let mut db = self.alloc(T::PRECISION, b.nrows(), b.ncols())?;
        let mut dc = self.alloc_zeroed(T::PRECISION, c.nrows(), c.ncols())?;
        warm_then_time(runs, || {
            let start = std::time::Instant::now();
            self.copy_in(a, &mut da)?;
            self.copy_in(b, &mut db)?;
            self.run(product, &[&da, &db], &mut dc)?;
            self.copy_out(&dc, c.rb_mut())?;
            Ok(start.elapsed().as_secs_f64())
        })
    }

    /// The lower triangle of A - L L^H (A and L read from the lower triangles of `a` and `l`, of
    /// one order) computed on the device: both copied in (L with its strict upper triangle zero,
    /// whatever `l` holds there), one cuBLAS ?syrk or ?herk on the whole matrix (what the tiled
    /// SYRK task does to a tile), the result copied out. n^3 flops at the GPU's rate instead of
    /// n^3/3 on the host's cores: the check of an n = 32768 factor in seconds.
    pub fn cholesky_gram_residual<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
        l: MatRef<'_, T>,
    ) -> Result<faer::Mat<T>, KernelError> {
        let n = a.nrows();
        if a.ncols() != n || (l.nrows(), l.ncols()) != (n, n) {
            return Err(KernelError::Operands {
                op: Op::Syrk,
                reason: format!(
                    "A is {}x{} and L {}x{}: both must be square of one order",
                    n,
                    a.ncols(),
                    l.nrows(),
                    l.ncols()
                ),
            });
        }
        let mut host = faer::Mat::<T>::zeros(n, n);
        if n == 0 {
            return Ok(host);
        }
        host.as_mut().copy_from_triangular_lower(l);
        let mut dl = self.alloc(T::PRECISION, n, n)?;
        self.copy_in(host.as_ref(), &mut dl)?;
        let mut dr = self.alloc(T::PRECISION, n, n)?;
        self.copy_in(a, &mut dr)?;
        self.run(Op::Syrk, &[&dl], &mut dr)?;
        self.copy_out(&dr, host.as_mut())?;
        Ok(host)
    }

    /// The cuBLAS peer: C = A B (`m x k` times `k x n`, alpha 1, beta 0) with the three matrices in
    /// device memory, one cublas?gemm call (the precision of `T`) `1 + runs` times (the first a
    /// warm-up); the `runs` timed calls' seconds, each timed by events.
    pub fn time_resident_gemm<T: Scalar>(
        &self,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        runs: usize,
    ) -> Result<Vec<f64>, KernelError> {
        let product = Op::MatMul(crate::MatMul::new(false, false, 1.0, 0.0));
        let (a, b) = (self.resident(a)?, self.resident(b)?);
        let mut c = self.alloc_zeroed(T::PRECISION, a.rows, b.cols)?;
        warm_then_time(runs, || self.run(product, &[&a, &b], &mut c))
    }

    /// Queues cusolverDn?potrf (`T`'s precision, the tile's) on the lower triangle of `a`, `start`
    /// recorded just before it, and the copy of its `devInfo` into page-locked memory after it
    /// (read by [`GpuKernel::wait`]).
    fn queue_potrf<T: CudaScalar>(
        &self,
        lane: &Lane,
        a: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<PinnedHostSlice<i32>, KernelError> {
        let s = &lane.stream;
        let h = lane.solver.0;
        let (n, lda) = (int(a.rows)?, int(a.rows.max(1))?);
        let mut lwork = 0i32;
        {
            let (pa, _use_a) = a.data.device_ptr_mut(s);
            // SAFETY: pa is a live n x n device buffer with leading dimension lda; lwork is
            // a host integer that outlives the call.
            let a = Out {
                ptr: pa as *mut T,
                ld: lda,
            };
            unsafe { T::potrf_buffer_size(h, n, a, &mut lwork) }
                .result()
                .map_err(|e| {
                    gpu_error(&format!("cusolverDn{}potrf_bufferSize", T::PRECISION), e)
                })?;
        }
        let needed = usize::try_from(lwork).unwrap_or(0).max(1) * size_of::<T>();
        PotrfScratch::grow(s, &mut scratch.work, needed, "POTRF's workspace")?;
        let mut info = s
            .alloc_zeros::<i32>(1)
            .map_err(|e| gpu_error("allocating POTRF's devInfo", e))?;
        {
            let (pa, _use_a) = a.data.device_ptr_mut(s);
            let (pw, _use_w) = scratch.work.device_ptr_mut(s);
            let (pi, _use_i) = info.device_ptr_mut(s);
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))?;
            // SAFETY: live device buffers: A (n x n, lda), a workspace of at least lwork
            // elements, one int for devInfo; the call only queues work on the stream.
            let a = Out {
                ptr: pa as *mut T,
                ld: lda,
            };
            unsafe { T::potrf(h, n, a, (pw as *mut T, lwork), pi as *mut i32) }
                .result()
                .map_err(|e| gpu_error(&format!("cusolverDn{}potrf", T::PRECISION), e))?;
        }
        self.info_to_host(lane, &info)
    }

    /// Queues the copy of a solver's `devInfo` into page-locked host memory on the compute stream
    /// (read by [`GpuKernel::wait`] once the kernel's end event has completed).
    fn info_to_host(
        &self,
        lane: &Lane,
        info: &CudaSlice<i32>,
    ) -> Result<PinnedHostSlice<i32>, KernelError> {
        // SAFETY: one i32, written by the copy below before it is read.
        let mut host = unsafe { self.ctx.alloc_pinned_with_flags::<i32>(1, 0) }
            .map_err(|e| gpu_error("allocating page-locked memory for devInfo", e))?;
        lane.stream
            .memcpy_dtoh(info, &mut host)
            .map_err(|e| gpu_error("copying a solver's devInfo", e))?;
        Ok(host)
    }

    /// Queues one step of the inverse of a Cholesky factor ([`GpuCall::Inverse`]) in `T`'s
    /// precision, `start` recorded just before it: TRTRI by cuSOLVER (its `devInfo` returned),
    /// LAUUM by [`GpuContext::queue_lauum`], the panel steps by one cuBLAS call each: SolveRight B
    /// <- -B L^-1 (?trsm), SyrkAdjoint C <- C + A^H A (?syrk, ?herk), TrmmAdjoint B <- L^H B (?trmm
    /// in place, which cuBLAS allows with C = B).
    fn queue_inverse<T: CudaScalar>(
        &self,
        lane: &Lane,
        op: Op,
        reads: &[&GpuTile],
        write: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<Option<PinnedHostSlice<i32>>, KernelError> {
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        use blas::cublasSideMode_t::{CUBLAS_SIDE_LEFT as LEFT, CUBLAS_SIDE_RIGHT as RIGHT};
        match op {
            Op::Trtri => return self.queue_trtri::<T>(lane, write, scratch, start).map(Some),
            Op::Lauum => {
                return self
                    .queue_lauum::<T>(lane, write, scratch, start)
                    .map(|()| None);
            }
            Op::SolveRight | Op::SyrkAdjoint | Op::TrmmAdjoint => {}
            other => {
                return Err(KernelError::Gpu {
                    message: format!("{other} is not a step of the inverse"),
                });
            }
        }
        let s = &lane.stream;
        let h = lane.blas.0;
        let a = reads[0];
        let (m, n) = (int(write.rows)?, int(write.cols)?);
        let (lda, ldc) = (int(a.rows.max(1))?, int(write.rows.max(1))?);
        let (pa, _read_a) = a.data.device_ptr(s);
        let (pc, _write_c) = write.data.device_ptr_mut(s);
        let a_in = In {
            ptr: pa as *const T,
            ld: lda,
        };
        let c = Out {
            ptr: pc as *mut T,
            ld: ldc,
        };
        let c_in = In {
            ptr: c.ptr.cast_const(),
            ld: ldc,
        };
        let one = T::from_f64(1.0);
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        // SAFETY: live device buffers of the shapes `launch` checked, in T's precision, with
        // their leading dimensions; cudarc's guards order the compute stream after the copies
        // into them; the scalars are host values read before each call returns.
        let status = unsafe {
            match op {
                Op::SolveRight => T::trsm(h, (RIGHT, N), None, (m, n), T::from_f64(-1.0), a_in, c),
                Op::SyrkAdjoint => T::rank_k(h, T::ADJOINT, (n, int(a.rows)?), (1.0, 1.0), a_in, c),
                _ => T::trmm(h, (LEFT, T::ADJOINT, None), (m, n), one, a_in, c_in, c),
            }
        };
        status
            .result()
            .map_err(|e| gpu_error(&format!("cuBLAS {}{op}", T::PRECISION), e))?;
        Ok(None)
    }

    /// Queues cusolverDnXtrtri (lower, non-unit, `T`'s precision) on `a` in place, `start` recorded
    /// just before it, and the copy of its `devInfo` after it.
    fn queue_trtri<T: CudaScalar>(
        &self,
        lane: &Lane,
        a: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<PinnedHostSlice<i32>, KernelError> {
        use solver::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT as NON_UNIT;
        use solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
        let s = &lane.stream;
        let h = lane.solver.0;
        let (n, lda) = (a.rows as i64, a.rows.max(1) as i64);
        let (mut device_bytes, mut host_bytes) = (0usize, 0usize);
        {
            let (pa, _use_a) = a.data.device_ptr_mut(s);
            // SAFETY: pa is a live n x n device buffer with leading dimension lda; the sizes are
            // host integers that outlive the call.
            unsafe {
                solver::cusolverDnXtrtri_bufferSize(
                    h,
                    LOWER,
                    NON_UNIT,
                    n,
                    T::DATA_TYPE,
                    pa as *mut std::ffi::c_void,
                    lda,
                    &mut device_bytes,
                    &mut host_bytes,
                )
            }
            .result()
            .map_err(|e| gpu_error("cusolverDnXtrtri_bufferSize", e))?;
        }
        PotrfScratch::grow(
            s,
            &mut scratch.work,
            device_bytes.max(1),
            "TRTRI's workspace",
        )?;
        if scratch.host.len() < host_bytes.max(1) {
            scratch.host.resize(host_bytes.max(1), 0);
        }
        let mut info = s
            .alloc_zeros::<i32>(1)
            .map_err(|e| gpu_error("allocating TRTRI's devInfo", e))?;
        {
            let (pa, _use_a) = a.data.device_ptr_mut(s);
            let (pw, _use_w) = scratch.work.device_ptr_mut(s);
            let (pi, _use_i) = info.device_ptr_mut(s);
            start
                .record(s)
                .map_err(|e| gpu_error("recording an event", e))?;
            // SAFETY: live device buffers: A (n x n, lda), a device workspace of at least
            // `device_bytes`, one int for devInfo; the host workspace of at least `host_bytes`
            // is the context's, held under its queue lock while the call runs.
            unsafe {
                solver::cusolverDnXtrtri(
                    h,
                    LOWER,
                    NON_UNIT,
                    n,
                    T::DATA_TYPE,
                    pa as *mut std::ffi::c_void,
                    lda,
                    pw as *mut std::ffi::c_void,
                    device_bytes,
                    scratch.host.as_mut_ptr().cast(),
                    host_bytes,
                    pi as *mut i32,
                )
            }
            .result()
            .map_err(|e| gpu_error(&format!("cusolverDnXtrtri ({})", T::PRECISION), e))?;
        }
        self.info_to_host(lane, &info)
    }

    /// Queues LAUUM, L <- L^H L on the lower triangle of `a` (its strict upper triangle untouched),
    /// from cuBLAS: L's lower triangle is copied into a zeroed square W through the packed triangle
    /// (?trttp then ?tpttr, which write one triangle only), W <- L^H W by ?trmm in place, and W's
    /// lower triangle back into the tile the same way. cuSOLVER has no LAUUM; the triangular
    /// product does n^3 flops where LAUUM needs n^3/3, on a diagonal tile (one in N of a row's).
    fn queue_lauum<T: CudaScalar>(
        &self,
        lane: &Lane,
        a: &mut GpuTile,
        scratch: &mut PotrfScratch,
        start: &CudaEvent,
    ) -> Result<(), KernelError> {
        use blas::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
        let s = &lane.stream;
        let h = lane.blas.0;
        let order = a.rows;
        let (n, lda) = (int(order)?, int(order.max(1))?);
        let square = order * order * size_of::<T>();
        let packed = order * (order + 1) / 2 * size_of::<T>();
        PotrfScratch::grow(s, &mut scratch.lauum, square + packed, "LAUUM's copy")?;
        let (pa, _use_a) = a.data.device_ptr_mut(s);
        let (pw, _use_w) = scratch.lauum.device_ptr_mut(s);
        let l = Out {
            ptr: pa as *mut T,
            ld: lda,
        };
        let w = Out {
            ptr: pw as *mut T,
            ld: lda,
        };
        // The packed triangle follows W (square is a multiple of T's size and alignment).
        let p = (pw as usize + square) as *mut T;
        let read = |o: Out<T>| In {
            ptr: o.ptr.cast_const(),
            ld: o.ld,
        };
        start
            .record(s)
            .map_err(|e| gpu_error("recording an event", e))?;
        // SAFETY: W and the packed triangle lie in the scratch buffer of at least `square +
        // packed` bytes, L is the live n x n tile; every call is queued on the compute stream in
        // order, after the memset that zeroes W.
        unsafe {
            cudarc::driver::result::memset_d8_async(pw, 0, square, s.cu_stream())
                .map_err(|e| gpu_error("zeroing LAUUM's copy", e))?;
            let blas_step = |status: BlasStatus, what: &str| {
                status
                    .result()
                    .map_err(|e| gpu_error(&format!("cuBLAS {}{what} (LAUUM)", T::PRECISION), e))
            };
            blas_step(T::trttp(h, n, read(l), p), "trttp")?;
            blas_step(T::tpttr(h, n, p.cast_const(), w), "tpttr")?;
            let one = T::from_f64(1.0);
            blas_step(
                T::trmm(
                    h,
                    (LEFT, T::ADJOINT, None),
                    (n, n),
                    one,
                    read(l),
                    read(w),
                    w,
                ),
                "trmm",
            )?;
            blas_step(T::trttp(h, n, read(w), p), "trttp")?;
            blas_step(T::tpttr(h, n, p.cast_const(), l), "tpttr")?;
        }
        Ok(())
    }
}

/// Keeps freed device memory in the default memory pool (used by cudarc's stream-ordered
/// allocations where the device has one), instead of returning it to the driver at each
/// synchronisation (the release threshold is 0 by default), so that the tiles a run allocates and
/// frees over and over do not pay the driver's allocation cost.
fn keep_pool_memory(ctx: &CudaContext) -> Result<(), KernelError> {
    let mut pool = std::ptr::null_mut();
    // SAFETY: the device handle is the context's; `pool` is written by the call.
    unsafe { driver_sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
        .result()
        .map_err(|e| gpu_error("cuDeviceGetDefaultMemPool", e))?;
    let mut threshold = u64::MAX;
    // SAFETY: the release threshold attribute takes a pointer to a u64 that outlives the call.
    unsafe {
        driver_sys::cuMemPoolSetAttribute(
            pool,
            driver_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&raw mut threshold).cast(),
        )
    }
    .result()
    .map_err(|e| gpu_error("setting the memory pool's release threshold", e))
}

/// The seconds `call` returns over `runs` calls (at least one) after one untimed warm-up call
/// (library loading, workspaces, clocks): how the GPU peers are timed.
fn warm_then_time(
    runs: usize,
    mut call: impl FnMut() -> Result<f64, KernelError>,
) -> Result<Vec<f64>, KernelError> {
    call()?;
    (0..runs.max(1)).map(|_| call()).collect()
}

/// A host tile a 2D copy moves (a DMA engine straight from or into it when it lies in page-locked
/// memory): its first byte, the bytes between columns, a column's bytes, its columns.
struct DirectSpan {
    host: usize,
    pitch: usize,
    width: usize,
    height: usize,
}

impl DirectSpan {
    /// The span of tile `m`: non-empty, columns contiguous and apart at least a column; with
    /// `pinned`, also wholly in one range of [`PinnedRanges::global`] (a DMA engine's direct copy).
    fn of_mat<T>(m: MatRef<'_, T>, pinned: bool) -> Option<Self> {
        let (rows, cols) = (m.nrows(), m.ncols());
        let pitch = if cols == 1 {
            rows
        } else {
            usize::try_from(m.col_stride()).ok()?
        };
        if rows == 0 || cols == 0 || m.row_stride() != 1 || pitch < rows {
            return None;
        }
        let range = HostRange::of_matrix(m.as_ptr(), rows, cols, pitch as isize);
        if pinned && !PinnedRanges::global().covers(&range) {
            return None;
        }
        let elem = size_of::<T>();
        Some(Self {
            host: m.as_ptr() as usize,
            pitch: pitch * elem,
            width: rows * elem,
            height: cols,
        })
    }

    /// The 2D copy between this host span and a contiguous device tile at `device`, into the device
    /// (`to_device`) or out of it.
    fn copy(&self, to_device: bool, device: driver_sys::CUdeviceptr) -> driver_sys::CUDA_MEMCPY2D {
        let host = (Side::Host(self.host), self.pitch);
        let tile = (Side::Device(device), self.width);
        let (from, to) = if to_device {
            (host, tile)
        } else {
            (tile, host)
        };
        copy_2d_descriptor(from, to, self.width, self.height)
    }
}

/// Issues the 2D copy `copy` ("`way`" names its direction in an error): queued on `stream`, or
/// synchronous (`cuMemcpy2D`, pageable host memory allowed) when there is none.
///
/// # Safety
/// Both sides of `copy` must be memory of their kinds holding its bytes, valid (and, for the side
/// written, unread) until the copy is done; the caller orders it after the device work on them.
unsafe fn issue_2d(
    copy: &driver_sys::CUDA_MEMCPY2D,
    stream: Option<&CudaStream>,
    way: &str,
) -> Result<(), KernelError> {
    // SAFETY: the caller's contract.
    match stream {
        Some(stream) => unsafe { driver_sys::cuMemcpy2DAsync_v2(copy, stream.cu_stream()) }
            .result()
            .map_err(|e| gpu_error(&format!("cuMemcpy2DAsync ({way})"), e)),
        None => unsafe { driver_sys::cuMemcpy2D_v2(copy) }
            .result()
            .map_err(|e| gpu_error(&format!("cuMemcpy2D ({way})"), e)),
    }
}

/// One side of a 2D copy: host memory or device memory, by address.
#[derive(Clone, Copy)]
enum Side {
    Host(usize),
    Device(driver_sys::CUdeviceptr),
}

/// The descriptor of a 2D copy of `height` columns of `width` bytes from `from` to `to`, each side
/// with its bytes between columns.
fn copy_2d_descriptor(
    (from, from_pitch): (Side, usize),
    (to, to_pitch): (Side, usize),
    width: usize,
    height: usize,
) -> driver_sys::CUDA_MEMCPY2D {
    use driver_sys::CUmemorytype::{CU_MEMORYTYPE_DEVICE as DEVICE, CU_MEMORYTYPE_HOST as HOST};
    let (src_type, src_host, src_device) = match from {
        Side::Host(address) => (HOST, address as *const std::ffi::c_void, 0),
        Side::Device(address) => (DEVICE, std::ptr::null(), address),
    };
    let (dst_type, dst_host, dst_device) = match to {
        Side::Host(address) => (HOST, address as *mut std::ffi::c_void, 0),
        Side::Device(address) => (DEVICE, std::ptr::null_mut(), address),
    };
    // Every field written out: the struct holds two `CUmemorytype` enums, which have no zero
    // value, so `mem::zeroed` is undefined behaviour (Rust aborts on it).
    driver_sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: std::ptr::null_mut(),
        srcPitch: from_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        dstPitch: to_pitch,
        WidthInBytes: width,
        Height: height,
    }
}

/// Packs a host tile into a contiguous column-major byte buffer of its size (a staging buffer), by
/// columns over `threads` when given.
fn pack<T: Scalar>(
    src: MatRef<'_, T>,
    bytes: &mut [u8],
    threads: Option<&hetla_clusters::CopyThreads>,
) {
    let (rows, cols) = (src.nrows(), src.ncols());
    let packed = MatMut::from_column_major_slice_mut(typed_mut::<T>(bytes), rows, cols);
    crate::copy_by_columns(packed, src, threads);
}

/// Unpacks a contiguous column-major byte buffer into a host tile of its size.
fn unpack<T: Scalar>(
    bytes: &[u8],
    dst: MatMut<'_, T>,
    threads: Option<&hetla_clusters::CopyThreads>,
) {
    let (rows, cols) = (dst.nrows(), dst.ncols());
    let len = rows * cols;
    assert!(bytes.len() >= len * size_of::<T>() && bytes.as_ptr().cast::<T>().is_aligned());
    // SAFETY: the buffer holds at least `len` elements of T (asserted, with the alignment);
    // every bit pattern is a valid f32/f64/c32/c64; the slice borrows `bytes`.
    let host = unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), len) };
    crate::copy_by_columns(
        dst,
        MatRef::from_column_major_slice(host, rows, cols),
        threads,
    );
}

/// Queues on `h`'s stream, for each inner block of `ib` of a factored panel's k reflectors, the
/// Gram matrix of their rows below the block's diagonal block, V[j0 + jb.., j0..j0 + jb]^H V[j0 +
/// jb.., j0..j0 + jb] (cuBLAS's ?gemm), into the block's columns and first rows of the `ib` x k
/// `grams` (left as they are where no row is below: zeros).
///
/// # Safety
/// `panel` must be a live device matrix of `rows` rows and at least k columns with leading
/// dimension `ld`, `grams` a live device buffer of ib x k elements, both of `h`'s stream, in `T`'s
/// precision; the caller orders the calls after the panel's factorisation.
unsafe fn queue_grams<T: CudaScalar>(
    h: blas::cublasHandle_t,
    (panel, ld, rows): (*mut T, i32, usize),
    grams: *mut T,
    (k, ib): (usize, usize),
) -> Result<(), KernelError> {
    let one = (T::from_f64(1.0), T::from_f64(0.0));
    for j0 in (0..k).step_by(ib) {
        let jb = ib.min(k - j0);
        let below = rows - j0 - jb;
        if below == 0 {
            continue;
        }
        let v = In {
            ptr: panel.wrapping_add(j0 + jb + j0 * ld as usize).cast_const(),
            ld,
        };
        let z = Out {
            ptr: grams.wrapping_add(j0 * ib),
            ld: int(ib)?,
        };
        // SAFETY: v is the below x jb block of the panel under block j0's diagonal block, z the
        // block's jb x jb columns of the Gram matrices: the caller's buffers.
        unsafe {
            T::gemm(
                h,
                (T::ADJOINT, blas::cublasOperation_t::CUBLAS_OP_N),
                (int(jb)?, int(jb)?, int(below)?),
                one,
                (v, v),
                z,
            )
        }
        .result()
        .map_err(|e| gpu_error(&format!("cublas{}gemm (a Gram matrix)", T::PRECISION), e))?;
    }
    Ok(())
}

/// A byte buffer as the elements of `T` it holds (whole elements only), read only.
fn elements<T: Scalar>(bytes: &[u8]) -> &[T] {
    let len = bytes.len() / size_of::<T>();
    assert!(
        bytes.as_ptr().cast::<T>().is_aligned(),
        "a misaligned page-locked buffer"
    );
    // SAFETY: `len` whole elements of T in the buffer, aligned (asserted); every bit pattern is a
    // valid f32/f64/c32/c64; the slice borrows `bytes`.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), len) }
}

/// A byte buffer as the elements of `T` it holds (whole elements only).
fn typed_mut<T: Scalar>(bytes: &mut [u8]) -> &mut [T] {
    let len = bytes.len() / size_of::<T>();
    assert!(
        bytes.as_ptr().cast::<T>().is_aligned(),
        "a misaligned staging buffer"
    );
    // SAFETY: `len` whole elements fit in the buffer, which is aligned for T (asserted);
    // every bit pattern is a valid f32/f64/c32/c64; the slice borrows `bytes` mutably.
    unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), len) }
}

type BlasStatus = blas::cublasStatus_t;
/// A triangle other than the lower one with its diagonal (its fill, or a unit diagonal); `None`:
/// the lower triangle, non-unit.
type Triangle = Option<(blas::cublasFillMode_t, blas::cublasDiagType_t)>;
type SolverStatus = solver::cusolverStatus_t;

/// A device matrix a routine reads: its pointer and leading dimension.
#[derive(Clone, Copy)]
struct In<T> {
    ptr: *const T,
    ld: i32,
}

/// A device matrix a routine writes: its pointer and leading dimension.
#[derive(Clone, Copy)]
struct Out<T> {
    ptr: *mut T,
    ld: i32,
}

/// The interchanges `ipiv` (0-based, local) as LAPACK's 1-based rows in a new device buffer on
/// stream `s`, freed on the stream once the calls queued after the copy have read it (cudarc's
/// stream-ordered free).
fn upload_pivots(s: &Arc<CudaStream>, ipiv: &[usize]) -> Result<CudaSlice<i32>, KernelError> {
    let pivots = (ipiv.iter())
        .map(|&p| int(p + 1))
        .collect::<Result<Vec<i32>, _>>()?;
    s.clone_htod(&pivots)
        .map_err(|e| gpu_error("copying the interchanges to the device", e))
}

/// `m` copied column-major (its rows the leading dimension) into a new device buffer on stream `s`,
/// freed on the stream once the calls queued after the copy have read it (cudarc's stream-ordered
/// free); `what` names it in the error.
fn upload_matrix<T: Scalar>(
    s: &Arc<CudaStream>,
    m: MatRef<'_, T>,
    what: &str,
) -> Result<CudaSlice<u8>, KernelError> {
    let (rows, cols) = (m.nrows(), m.ncols());
    let mut elements = vec![T::from_f64(0.0); rows * cols];
    MatMut::from_column_major_slice_mut(&mut elements, rows, cols).copy_from(m);
    // SAFETY: the bytes of initialised elements, borrowed from them (u8 needs no alignment).
    let packed = unsafe {
        std::slice::from_raw_parts(elements.as_ptr().cast::<u8>(), size_of_val(&*elements))
    };
    s.clone_htod(packed)
        .map_err(|e| gpu_error(&format!("copying {what} to the device"), e))
}

/// QR's operands of an application of block reflectors ([`GpuCall::Reflected`]) checked: the step's
/// first row, where the panel's reflectors start in it (the first row too, or 0 for a panel that
/// holds only the rows from there), the rows from the step's first, and the T's in `T` (ib x k for
/// k = min(rows, the panel's columns) reflectors, ib >= 1 when k > 0).
fn reflected_operands<'a, T: CudaScalar>(
    op: Op,
    args: &'a KernelArgs,
    v: &GpuTile,
    write: &GpuTile,
) -> Result<(usize, usize, usize, MatRef<'a, T>), KernelError> {
    let bad = |reason: String| KernelError::Operands { op, reason };
    let KernelArgs::Reflectors { first, t } = args else {
        return Err(bad(format!(
            "{op} takes the step's first row and the reflectors' T's, given {args:?}"
        )));
    };
    let first = *first;
    let rows = write.rows.checked_sub(first).ok_or_else(|| {
        bad(format!(
            "the step's first row {first} lies below the block column ({} rows)",
            write.rows
        ))
    })?;
    let v_first = if v.rows == write.rows { first } else { 0 };
    if v.rows - v_first != rows {
        return Err(bad(format!(
            "a panel of {} rows for the {rows} rows of a block column from row {first}",
            v.rows
        )));
    }
    let k = rows.min(v.cols);
    let t = T::of_any_ref(t.as_ref().as_ref()).ok_or_else(|| {
        bad(format!(
            "the T's are in precision {}, the tiles in {}",
            t.precision(),
            T::PRECISION
        ))
    })?;
    if t.ncols() != k || (t.nrows() == 0 && k > 0) {
        return Err(bad(format!(
            "T's are {}x{} for {k} reflectors: an inner block of at least one row by {k}",
            t.nrows(),
            t.ncols()
        )));
    }
    Ok((first, v_first, rows, t))
}

/// One inner block of LAPACK's ?larfb (left, adjoint, forward, by columns) on device matrices: C
/// <- (I - V T^H V^H) C with V = [V1; V2] (V1 kb x kb unit lower, V2 below x kb), T kb x kb upper,
/// C = [C1; C2] (kb and below rows, n columns), W a kb x n workspace.
struct Larfb<T> {
    v: (In<T>, In<T>),
    t: In<T>,
    c: (Out<T>, Out<T>),
    w: Out<T>,
    /// (kb, n, below).
    shape: (i32, i32, i32),
}

impl<T: CudaScalar> Larfb<T> {
    /// Queues W = V1^H C1 + V2^H C2, W = T^H W, C2 -= V2 W, C1 -= V1 W on the handle's stream.
    ///
    /// # Safety
    /// Every pointer must lie in a live device buffer of its shape and leading dimension, in T's
    /// precision, on the handle's stream.
    unsafe fn queue(&self, h: blas::cublasHandle_t, op: Op) -> Result<(), KernelError> {
        use blas::cublasDiagType_t::{CUBLAS_DIAG_NON_UNIT as NON_UNIT, CUBLAS_DIAG_UNIT as UNIT};
        use blas::cublasFillMode_t::{
            CUBLAS_FILL_MODE_LOWER as LOWER, CUBLAS_FILL_MODE_UPPER as UPPER,
        };
        use blas::cublasOperation_t::CUBLAS_OP_N as N;
        use blas::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
        let Self {
            v: (v1, v2),
            t,
            c: (c1, c2),
            w,
            shape: (kb, n, below),
        } = *self;
        let call = |status: BlasStatus, what: &str| {
            status
                .result()
                .map_err(|e| gpu_error(&format!("cuBLAS {}{what} ({op})", T::PRECISION), e))
        };
        let (one, zero, minus) = (T::from_f64(1.0), T::from_f64(0.0), T::from_f64(-1.0));
        let (adj, unit_lower, upper) = (T::ADJOINT, Some((LOWER, UNIT)), Some((UPPER, NON_UNIT)));
        let (c1_in, c2_in, w_in) = (c1.read(), c2.read(), w.read());
        // SAFETY: the caller's; scalars are host values read before each call returns; in-place
        // calls are the forms cuBLAS allows (?trmm with C = B, ?geam with C = B and equal leading
        // dimensions).
        unsafe {
            call(T::geam(h, (kb, n), (one, zero), (c1_in, c1_in), w), "geam")?;
            call(
                T::trmm(h, (LEFT, adj, unit_lower), (kb, n), one, v1, w_in, w),
                "trmm",
            )?;
            if below > 0 {
                let shape = (kb, n, below);
                call(
                    T::gemm(h, (adj, N), shape, (one, one), (v2, c2_in), w),
                    "gemm",
                )?;
            }
            call(
                T::trmm(h, (LEFT, adj, upper), (kb, n), one, t, w_in, w),
                "trmm",
            )?;
            if below > 0 {
                let shape = (below, n, kb);
                call(
                    T::gemm(h, (N, N), shape, (minus, one), (v2, w_in), c2),
                    "gemm",
                )?;
            }
            call(
                T::trmm(h, (LEFT, N, unit_lower), (kb, n), one, v1, w_in, w),
                "trmm",
            )?;
            call(T::geam(h, (kb, n), (minus, one), (w_in, c1_in), c1), "geam")
        }
    }
}

/// The type of a refined solver's routine (`cusolverDn<t1><t2>gesv` and its workspace query) on
/// elements `E`: handle, n, nrhs, A, lda, ipiv, B, ldb, X, ldx, workspace, then `tail`.
macro_rules! irs_fn {
    ($e:ty; $($tail:ty),*) => {
        unsafe fn(
            solver::cusolverDnHandle_t, i32, i32, *mut $e, i32, *mut i32, *mut $e, i32, *mut $e,
            i32, *mut std::ffi::c_void, $($tail),*
        ) -> SolverStatus
    };
}

/// cuSOLVER's workspace query of a refined solver (its bytes, written by the call).
type IrsSize<E> = irs_fn!(E; *mut usize);

/// cuSOLVER's refined solver: the workspace's bytes, the iterations (host), devInfo (device).
type IrsSolve<E> = irs_fn!(E; usize, *mut i32, *mut i32);

/// The refined solver of working precision `D` or `Z` whose factor is in the lower precision of a
/// [`TensorMath`] (off: single; TF32; BF16): its workspace query and its call.
macro_rules! irs_routines {
    (D, $math:expr) => {
        match $math {
            TensorMath::Off => (
                solver::cusolverDnDSgesv_bufferSize as IrsSize<f64>,
                solver::cusolverDnDSgesv as IrsSolve<f64>,
            ),
            TensorMath::Tf32 => (
                solver::cusolverDnDXgesv_bufferSize as _,
                solver::cusolverDnDXgesv as _,
            ),
            TensorMath::Bf16 => (
                solver::cusolverDnDBgesv_bufferSize as _,
                solver::cusolverDnDBgesv as _,
            ),
        }
    };
    (Z, $math:expr) => {
        match $math {
            TensorMath::Off => (
                solver::cusolverDnZCgesv_bufferSize as IrsSize<solver::cuDoubleComplex>,
                solver::cusolverDnZCgesv as IrsSolve<solver::cuDoubleComplex>,
            ),
            TensorMath::Tf32 => (
                solver::cusolverDnZYgesv_bufferSize as _,
                solver::cusolverDnZYgesv as _,
            ),
            TensorMath::Bf16 => (
                solver::cusolverDnZEgesv_bufferSize as _,
                solver::cusolverDnZEgesv as _,
            ),
        }
    };
}
use irs_routines;

/// C <- alpha op(A) op(B) + beta C as [`CudaScalar::gemm`], on tensor cores where `math` applies to
/// T (f32 and complex f32): cublasGemmEx on T's operands with the math's fast compute type
/// (`CUBLAS_COMPUTE_32F_FAST_TF32`, `_16BF`: operands rounded, products accumulated in f32); else
/// T's own ?gemm.
///
/// # Safety
/// As [`CudaScalar::gemm`].
unsafe fn gemm_with<T: CudaScalar>(
    h: blas::cublasHandle_t,
    ((ta, tb), math): (
        (blas::cublasOperation_t, blas::cublasOperation_t),
        TensorMath,
    ),
    (m, n, k): (i32, i32, i32),
    (alpha, beta): (T, T),
    (a, b, c): (In<T>, In<T>, Out<T>),
) -> BlasStatus {
    use blas::cublasComputeType_t::{
        CUBLAS_COMPUTE_32F_FAST_16BF as FAST_BF16, CUBLAS_COMPUTE_32F_FAST_TF32 as FAST_TF32,
    };
    use blas::cudaDataType::{CUDA_C_32F, CUDA_R_32F};
    let data = match T::PRECISION {
        Precision::S => Some(CUDA_R_32F),
        Precision::C => Some(CUDA_C_32F),
        Precision::D | Precision::Z => None,
    };
    let (data, compute) = match (data, math) {
        (Some(data), TensorMath::Tf32) => (data, FAST_TF32),
        (Some(data), TensorMath::Bf16) => (data, FAST_BF16),
        // SAFETY: the caller's.
        _ => return unsafe { T::gemm(h, (ta, tb), (m, n, k), (alpha, beta), (a, b), c) },
    };
    // SAFETY: the caller's; the data type is T's (f32 or complex f32), as are the host scalars,
    // which outlive the call; the fast compute types take f32 operands, scalars and results.
    unsafe {
        blas::cublasGemmEx(
            h,
            ta,
            tb,
            m,
            n,
            k,
            (&raw const alpha).cast(),
            a.ptr.cast(),
            data,
            a.ld,
            b.ptr.cast(),
            data,
            b.ld,
            (&raw const beta).cast(),
            c.ptr.cast(),
            data,
            c.ld,
            compute,
            blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
}

impl<T> Out<T> {
    /// The same matrix, for a routine that reads it.
    fn read(self) -> In<T> {
        In {
            ptr: self.ptr.cast_const(),
            ld: self.ld,
        }
    }
}

/// The cuBLAS and cuSOLVER routines of one precision (S, D, C or Z) on raw device pointers, for the
/// lower triangle and non-unit diagonals the Cholesky kernels use. Complex types take the conjugate
/// transpose ([`CudaScalar::ADJOINT`]) and HERK where real ones take the transpose and SYRK. Shapes
/// are (rows, columns[, inner dimension]) of the written matrix, scalars (alpha, beta).
///
/// Every function is unsafe for the same reason: the pointers must be live device buffers of the
/// shapes and leading dimensions given, on the handle's stream.
trait CudaScalar: Scalar {
    /// The operand operation that stands for "adjoint": T for real types, C for complex.
    const ADJOINT: blas::cublasOperation_t;
    /// B <- alpha op(L)^-1 B (left) or alpha B op(L)^-1 (right), L lower, non-unit; B is m x n.
    /// `triangle` reads another triangle of L (its fill) or takes its diagonal as unit.
    unsafe fn trsm(
        h: blas::cublasHandle_t,
        ops: (blas::cublasSideMode_t, blas::cublasOperation_t),
        triangle: Option<(blas::cublasFillMode_t, blas::cublasDiagType_t)>,
        shape: (i32, i32),
        alpha: Self,
        l: In<Self>,
        b: Out<Self>,
    ) -> BlasStatus;
    /// cuSOLVER's name of the type (its 64-bit API's `dataTypeA`).
    const DATA_TYPE: solver::cudaDataType;
    /// C <- alpha op(A) op(A)^H + beta C on the lower triangle of the n x n C, op(A) n x k: A as it
    /// is (`N`) or its adjoint (SYRK, or HERK for complex: real alpha and beta).
    unsafe fn rank_k(
        h: blas::cublasHandle_t,
        trans: blas::cublasOperation_t,
        shape: (i32, i32),
        scalars: (f64, f64),
        a: In<Self>,
        c: Out<Self>,
    ) -> BlasStatus;
    /// C <- alpha op(A) op(B) + beta C, C m x n, the inner dimension k.
    unsafe fn gemm(
        h: blas::cublasHandle_t,
        ops: (blas::cublasOperation_t, blas::cublasOperation_t),
        shape: (i32, i32, i32),
        scalars: (Self, Self),
        reads: (In<Self>, In<Self>),
        c: Out<Self>,
    ) -> BlasStatus;
    /// C <- alpha op(L) B (left) or alpha B op(L) (right), L lower, non-unit; B and C are m x n (C
    /// may be B: cuBLAS's in-place form). `triangle` reads another triangle of L (its fill) or
    /// takes its diagonal as unit.
    unsafe fn trmm(
        h: blas::cublasHandle_t,
        ops: (blas::cublasSideMode_t, blas::cublasOperation_t, Triangle),
        shape: (i32, i32),
        alpha: Self,
        l: In<Self>,
        b: In<Self>,
        c: Out<Self>,
    ) -> BlasStatus;
    /// The lower triangle of the n x n A into the packed `ap` (n (n + 1) / 2 elements).
    unsafe fn trttp(h: blas::cublasHandle_t, n: i32, a: In<Self>, ap: *mut Self) -> BlasStatus;
    /// The packed lower triangle `ap` into the lower triangle of the n x n A.
    unsafe fn tpttr(h: blas::cublasHandle_t, n: i32, ap: *const Self, a: Out<Self>) -> BlasStatus;
    /// POTRI's workspace, in elements, for an `n x n` lower triangle.
    unsafe fn potri_buffer_size(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        lwork: *mut i32,
    ) -> SolverStatus;
    /// A^-1 on the lower triangle of the n x n A from its Cholesky factor there; `info` receives
    /// devInfo.
    unsafe fn potri(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        work: (*mut Self, i32),
        info: *mut i32,
    ) -> SolverStatus;
    /// C <- alpha A + beta B (C may be B), all m x n.
    unsafe fn geam(
        h: blas::cublasHandle_t,
        shape: (i32, i32),
        scalars: (Self, Self),
        reads: (In<Self>, In<Self>),
        c: Out<Self>,
    ) -> BlasStatus;
    /// LAPACK's ?laswp on the n columns of `a`: rows 1..=k swapped, in order, with the 1-based rows
    /// `ipiv` names (k device integers).
    unsafe fn laswp(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        ipiv: (i32, *const i32),
    ) -> SolverStatus;
    /// SYTRF's workspace, in elements, for an `n x n` matrix.
    unsafe fn sytrf_buffer_size(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        lwork: *mut i32,
    ) -> SolverStatus;
    /// A = L D L^T (Bunch-Kaufman) of the n x n symmetric A's lower triangle in place; n 1-based
    /// interchanges (LAPACK's ?sytrf convention) into `ipiv`, `info` receives devInfo.
    unsafe fn sytrf(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        work: (*mut Self, i32),
        ipiv_info: (*mut i32, *mut i32),
    ) -> SolverStatus;
    /// GETRF's workspace, in elements, for an `m x n` matrix.
    unsafe fn getrf_buffer_size(
        h: solver::cusolverDnHandle_t,
        shape: (i32, i32),
        a: Out<Self>,
        lwork: *mut i32,
    ) -> SolverStatus;
    /// P A = L U with partial pivoting of the m x n A in place; min(m, n) 1-based interchanges into
    /// `ipiv`, `info` receives devInfo.
    unsafe fn getrf(
        h: solver::cusolverDnHandle_t,
        shape: (i32, i32),
        a: Out<Self>,
        work: *mut Self,
        ipiv_info: (*mut i32, *mut i32),
    ) -> SolverStatus;
    /// GEQRF's workspace, in elements, for an `m x n` matrix.
    unsafe fn geqrf_buffer_size(
        h: solver::cusolverDnHandle_t,
        shape: (i32, i32),
        a: Out<Self>,
        lwork: *mut i32,
    ) -> SolverStatus;
    /// A = Q R (Householder) of the m x n A in place: R above the diagonal, the reflectors below,
    /// their min(m, n) scalars into `tau`; `info` receives devInfo.
    unsafe fn geqrf(
        h: solver::cusolverDnHandle_t,
        shape: (i32, i32),
        a: Out<Self>,
        tau: *mut Self,
        work: (*mut Self, i32),
        info: *mut i32,
    ) -> SolverStatus;
    /// ORMQR's (UNMQR's) workspace, in elements, for [`CudaScalar::unmqr`] of these operands.
    unsafe fn unmqr_buffer_size(
        h: solver::cusolverDnHandle_t,
        shape: (i32, i32, i32),
        reflectors: (In<Self>, *const Self),
        c: In<Self>,
        lwork: *mut i32,
    ) -> SolverStatus;
    /// C <- Q^H C, C m x n, Q the product of the k reflectors below the diagonal of the m x k
    /// `reflectors` with their scalars (as ?geqrf leaves them): ?ormqr with `T`, ?unmqr with `C`;
    /// `info` receives devInfo. `shape` is (m, n, k).
    unsafe fn unmqr(
        h: solver::cusolverDnHandle_t,
        shape: (i32, i32, i32),
        reflectors: (In<Self>, *const Self),
        c: Out<Self>,
        work: (*mut Self, i32),
        info: *mut i32,
    ) -> SolverStatus;
    /// POTRF's workspace, in elements, for an `n x n` lower triangle.
    unsafe fn potrf_buffer_size(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        lwork: *mut i32,
    ) -> SolverStatus;
    /// A = L L^H on the lower triangle of the n x n A; `info` receives devInfo.
    unsafe fn potrf(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: Out<Self>,
        work: (*mut Self, i32),
        info: *mut i32,
    ) -> SolverStatus;
}

/// [`CudaScalar`] for one type: its real type, adjoint operation and routines.
macro_rules! cuda_scalar {
    ($ty:ty, $real:ty, $adj:ident, $dtype:ident, $trsm:ident, $rank_k:ident, $gemm:ident,
     $geam:ident, $bufsize:ident, $potrf:ident, $trmm:ident, $trttp:ident, $tpttr:ident,
     $potri_bufsize:ident, $potri:ident, $laswp:ident, $getrf_bufsize:ident, $getrf:ident,
     $geqrf_bufsize:ident, $geqrf:ident, $unmqr_bufsize:ident, $unmqr:ident,
     $sytrf_bufsize:ident, $sytrf:ident) => {
        impl CudaScalar for $ty {
            unsafe fn unmqr_buffer_size(
                h: solver::cusolverDnHandle_t,
                (m, n, k): (i32, i32, i32),
                (a, tau): (In<Self>, *const Self),
                c: In<Self>,
                lwork: *mut i32,
            ) -> SolverStatus {
                use solver::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
                let adjoint = solver::cublasOperation_t::$adj;
                // SAFETY: the caller's; lwork is a host integer that outlives the call.
                unsafe {
                    solver::$unmqr_bufsize(
                        h,
                        LEFT,
                        adjoint,
                        m,
                        n,
                        k,
                        a.ptr.cast(),
                        a.ld,
                        tau.cast(),
                        c.ptr.cast(),
                        c.ld,
                        lwork,
                    )
                }
            }
            unsafe fn unmqr(
                h: solver::cusolverDnHandle_t,
                (m, n, k): (i32, i32, i32),
                (a, tau): (In<Self>, *const Self),
                c: Out<Self>,
                (work, lwork): (*mut Self, i32),
                info: *mut i32,
            ) -> SolverStatus {
                use solver::cublasSideMode_t::CUBLAS_SIDE_LEFT as LEFT;
                let adjoint = solver::cublasOperation_t::$adj;
                // SAFETY: the caller's.
                unsafe {
                    solver::$unmqr(
                        h,
                        LEFT,
                        adjoint,
                        m,
                        n,
                        k,
                        a.ptr.cast(),
                        a.ld,
                        tau.cast(),
                        c.ptr.cast(),
                        c.ld,
                        work.cast(),
                        lwork,
                        info,
                    )
                }
            }
            unsafe fn geqrf_buffer_size(
                h: solver::cusolverDnHandle_t,
                (m, n): (i32, i32),
                a: Out<Self>,
                lwork: *mut i32,
            ) -> SolverStatus {
                // SAFETY: the caller's; lwork is a host integer that outlives the call.
                unsafe { solver::$geqrf_bufsize(h, m, n, a.ptr.cast(), a.ld, lwork) }
            }
            unsafe fn geqrf(
                h: solver::cusolverDnHandle_t,
                (m, n): (i32, i32),
                a: Out<Self>,
                tau: *mut Self,
                (work, lwork): (*mut Self, i32),
                info: *mut i32,
            ) -> SolverStatus {
                // SAFETY: the caller's.
                unsafe {
                    solver::$geqrf(
                        h,
                        m,
                        n,
                        a.ptr.cast(),
                        a.ld,
                        tau.cast(),
                        work.cast(),
                        lwork,
                        info,
                    )
                }
            }
            unsafe fn sytrf_buffer_size(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                lwork: *mut i32,
            ) -> SolverStatus {
                // SAFETY: the caller's; lwork is a host integer that outlives the call.
                unsafe { solver::$sytrf_bufsize(h, n, a.ptr.cast(), a.ld, lwork) }
            }
            unsafe fn sytrf(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                (work, lwork): (*mut Self, i32),
                (ipiv, info): (*mut i32, *mut i32),
            ) -> SolverStatus {
                let lower = solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER;
                // SAFETY: the caller's.
                unsafe {
                    solver::$sytrf(
                        h,
                        lower,
                        n,
                        a.ptr.cast(),
                        a.ld,
                        ipiv,
                        work.cast(),
                        lwork,
                        info,
                    )
                }
            }
            unsafe fn getrf_buffer_size(
                h: solver::cusolverDnHandle_t,
                (m, n): (i32, i32),
                a: Out<Self>,
                lwork: *mut i32,
            ) -> SolverStatus {
                // SAFETY: the caller's; lwork is a host integer that outlives the call.
                unsafe { solver::$getrf_bufsize(h, m, n, a.ptr.cast(), a.ld, lwork) }
            }
            unsafe fn getrf(
                h: solver::cusolverDnHandle_t,
                (m, n): (i32, i32),
                a: Out<Self>,
                work: *mut Self,
                (ipiv, info): (*mut i32, *mut i32),
            ) -> SolverStatus {
                // SAFETY: the caller's.
                unsafe { solver::$getrf(h, m, n, a.ptr.cast(), a.ld, work.cast(), ipiv, info) }
            }
            unsafe fn laswp(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                (k, ipiv): (i32, *const i32),
            ) -> SolverStatus {
                // SAFETY: the caller's.
                unsafe { solver::$laswp(h, n, a.ptr.cast(), a.ld, 1, k, ipiv, 1) }
            }
            const ADJOINT: blas::cublasOperation_t = blas::cublasOperation_t::$adj;
            const DATA_TYPE: solver::cudaDataType = solver::cudaDataType::$dtype;
            unsafe fn trmm(
                h: blas::cublasHandle_t,
                (side, trans, triangle): (
                    blas::cublasSideMode_t,
                    blas::cublasOperation_t,
                    Triangle,
                ),
                (m, n): (i32, i32),
                alpha: Self,
                l: In<Self>,
                b: In<Self>,
                c: Out<Self>,
            ) -> BlasStatus {
                use blas::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT as NON_UNIT;
                use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                let (fill, diag) = triangle.unwrap_or((LOWER, NON_UNIT));
                // SAFETY: the caller's (see the trait); alpha is a host value that
                // outlives the call.
                unsafe {
                    blas::$trmm(
                        h,
                        side,
                        fill,
                        trans,
                        diag,
                        m,
                        n,
                        (&raw const alpha).cast(),
                        l.ptr.cast(),
                        l.ld,
                        b.ptr.cast(),
                        b.ld,
                        c.ptr.cast(),
                        c.ld,
                    )
                }
            }
            unsafe fn trttp(
                h: blas::cublasHandle_t,
                n: i32,
                a: In<Self>,
                ap: *mut Self,
            ) -> BlasStatus {
                use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                // SAFETY: the caller's.
                unsafe { blas::$trttp(h, LOWER, n, a.ptr.cast(), a.ld, ap.cast()) }
            }
            unsafe fn tpttr(
                h: blas::cublasHandle_t,
                n: i32,
                ap: *const Self,
                a: Out<Self>,
            ) -> BlasStatus {
                use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                // SAFETY: the caller's.
                unsafe { blas::$tpttr(h, LOWER, n, ap.cast(), a.ptr.cast(), a.ld) }
            }
            unsafe fn potri_buffer_size(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                lwork: *mut i32,
            ) -> SolverStatus {
                use solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                // SAFETY: the caller's; lwork is a host integer that outlives the call.
                unsafe { solver::$potri_bufsize(h, LOWER, n, a.ptr.cast(), a.ld, lwork) }
            }
            unsafe fn potri(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                (work, lwork): (*mut Self, i32),
                info: *mut i32,
            ) -> SolverStatus {
                use solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                // SAFETY: the caller's.
                unsafe { solver::$potri(h, LOWER, n, a.ptr.cast(), a.ld, work.cast(), lwork, info) }
            }
            unsafe fn trsm(
                h: blas::cublasHandle_t,
                (side, trans): (blas::cublasSideMode_t, blas::cublasOperation_t),
                triangle: Option<(blas::cublasFillMode_t, blas::cublasDiagType_t)>,
                (m, n): (i32, i32),
                alpha: Self,
                l: In<Self>,
                b: Out<Self>,
            ) -> BlasStatus {
                use blas::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT;
                use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER;
                let (fill, diag) =
                    triangle.unwrap_or((CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT));
                // SAFETY: the caller's (see the trait); alpha is a host value that
                // outlives the call.
                unsafe {
                    blas::$trsm(
                        h,
                        side,
                        fill,
                        trans,
                        diag,
                        m,
                        n,
                        (&raw const alpha).cast(),
                        l.ptr.cast(),
                        l.ld,
                        b.ptr.cast(),
                        b.ld,
                    )
                }
            }
            unsafe fn rank_k(
                h: blas::cublasHandle_t,
                trans: blas::cublasOperation_t,
                (n, k): (i32, i32),
                (alpha, beta): (f64, f64),
                a: In<Self>,
                c: Out<Self>,
            ) -> BlasStatus {
                use blas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                let (alpha, beta) = (alpha as $real, beta as $real);
                // SAFETY: the caller's; the scalars are host values that outlive the call.
                unsafe {
                    blas::$rank_k(
                        h,
                        LOWER,
                        trans,
                        n,
                        k,
                        (&raw const alpha).cast(),
                        a.ptr.cast(),
                        a.ld,
                        (&raw const beta).cast(),
                        c.ptr.cast(),
                        c.ld,
                    )
                }
            }
            unsafe fn gemm(
                h: blas::cublasHandle_t,
                (ta, tb): (blas::cublasOperation_t, blas::cublasOperation_t),
                (m, n, k): (i32, i32, i32),
                (alpha, beta): (Self, Self),
                (a, b): (In<Self>, In<Self>),
                c: Out<Self>,
            ) -> BlasStatus {
                // SAFETY: the caller's; the scalars are host values that outlive the call.
                unsafe {
                    blas::$gemm(
                        h,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        (&raw const alpha).cast(),
                        a.ptr.cast(),
                        a.ld,
                        b.ptr.cast(),
                        b.ld,
                        (&raw const beta).cast(),
                        c.ptr.cast(),
                        c.ld,
                    )
                }
            }
            unsafe fn geam(
                h: blas::cublasHandle_t,
                (m, n): (i32, i32),
                (alpha, beta): (Self, Self),
                (a, b): (In<Self>, In<Self>),
                c: Out<Self>,
            ) -> BlasStatus {
                use blas::cublasOperation_t::CUBLAS_OP_N as N;
                // SAFETY: the caller's; the scalars are host values that outlive the call.
                unsafe {
                    blas::$geam(
                        h,
                        N,
                        N,
                        m,
                        n,
                        (&raw const alpha).cast(),
                        a.ptr.cast(),
                        a.ld,
                        (&raw const beta).cast(),
                        b.ptr.cast(),
                        b.ld,
                        c.ptr.cast(),
                        c.ld,
                    )
                }
            }
            unsafe fn potrf_buffer_size(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                lwork: *mut i32,
            ) -> SolverStatus {
                use solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                // SAFETY: the caller's; lwork is a host integer that outlives the call.
                unsafe { solver::$bufsize(h, LOWER, n, a.ptr.cast(), a.ld, lwork) }
            }
            unsafe fn potrf(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: Out<Self>,
                (work, lwork): (*mut Self, i32),
                info: *mut i32,
            ) -> SolverStatus {
                use solver::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER as LOWER;
                // SAFETY: the caller's.
                unsafe { solver::$potrf(h, LOWER, n, a.ptr.cast(), a.ld, work.cast(), lwork, info) }
            }
        }
    };
}

cuda_scalar!(
    f32,
    f32,
    CUBLAS_OP_T,
    CUDA_R_32F,
    cublasStrsm_v2,
    cublasSsyrk_v2,
    cublasSgemm_v2,
    cublasSgeam,
    cusolverDnSpotrf_bufferSize,
    cusolverDnSpotrf,
    cublasStrmm_v2,
    cublasStrttp,
    cublasStpttr,
    cusolverDnSpotri_bufferSize,
    cusolverDnSpotri,
    cusolverDnSlaswp,
    cusolverDnSgetrf_bufferSize,
    cusolverDnSgetrf,
    cusolverDnSgeqrf_bufferSize,
    cusolverDnSgeqrf,
    cusolverDnSormqr_bufferSize,
    cusolverDnSormqr,
    cusolverDnSsytrf_bufferSize,
    cusolverDnSsytrf
);
cuda_scalar!(
    f64,
    f64,
    CUBLAS_OP_T,
    CUDA_R_64F,
    cublasDtrsm_v2,
    cublasDsyrk_v2,
    cublasDgemm_v2,
    cublasDgeam,
    cusolverDnDpotrf_bufferSize,
    cusolverDnDpotrf,
    cublasDtrmm_v2,
    cublasDtrttp,
    cublasDtpttr,
    cusolverDnDpotri_bufferSize,
    cusolverDnDpotri,
    cusolverDnDlaswp,
    cusolverDnDgetrf_bufferSize,
    cusolverDnDgetrf,
    cusolverDnDgeqrf_bufferSize,
    cusolverDnDgeqrf,
    cusolverDnDormqr_bufferSize,
    cusolverDnDormqr,
    cusolverDnDsytrf_bufferSize,
    cusolverDnDsytrf
);
cuda_scalar!(
    c32,
    f32,
    CUBLAS_OP_C,
    CUDA_C_32F,
    cublasCtrsm_v2,
    cublasCherk_v2,
    cublasCgemm_v2,
    cublasCgeam,
    cusolverDnCpotrf_bufferSize,
    cusolverDnCpotrf,
    cublasCtrmm_v2,
    cublasCtrttp,
    cublasCtpttr,
    cusolverDnCpotri_bufferSize,
    cusolverDnCpotri,
    cusolverDnClaswp,
    cusolverDnCgetrf_bufferSize,
    cusolverDnCgetrf,
    cusolverDnCgeqrf_bufferSize,
    cusolverDnCgeqrf,
    cusolverDnCunmqr_bufferSize,
    cusolverDnCunmqr,
    cusolverDnCsytrf_bufferSize,
    cusolverDnCsytrf
);
cuda_scalar!(
    c64,
    f64,
    CUBLAS_OP_C,
    CUDA_C_64F,
    cublasZtrsm_v2,
    cublasZherk_v2,
    cublasZgemm_v2,
    cublasZgeam,
    cusolverDnZpotrf_bufferSize,
    cusolverDnZpotrf,
    cublasZtrmm_v2,
    cublasZtrttp,
    cublasZtpttr,
    cusolverDnZpotri_bufferSize,
    cusolverDnZpotri,
    cusolverDnZlaswp,
    cusolverDnZgetrf_bufferSize,
    cusolverDnZgetrf,
    cusolverDnZgeqrf_bufferSize,
    cusolverDnZgeqrf,
    cusolverDnZunmqr_bufferSize,
    cusolverDnZunmqr,
    cusolverDnZsytrf_bufferSize,
    cusolverDnZsytrf
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy descriptors are built on the host alone, so they are checked here without a GPU (a
    /// zero-initialised descriptor aborted every direct copy on the first real one).
    #[test]
    fn copies_within_a_device_name_device_memory_on_both_sides_with_their_pitches() {
        let device = driver_sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
        // A 100 x 7 block of f64 in a matrix with leading dimension 130, into a packed tile.
        let copy = copy_2d_descriptor(
            (Side::Device(0xa000), 130 * 8),
            (Side::Device(0xb000), 100 * 8),
            100 * 8,
            7,
        );
        assert_eq!((copy.srcMemoryType, copy.dstMemoryType), (device, device));
        assert_eq!(
            (copy.srcDevice, copy.srcPitch, copy.dstDevice, copy.dstPitch),
            (0xa000, 1040, 0xb000, 800)
        );
        assert!(copy.srcHost.is_null() && copy.dstHost.is_null());
        assert_eq!((copy.WidthInBytes, copy.Height), (800, 7));
    }

    #[test]
    fn direct_copy_descriptors_name_both_sides_in_each_direction() {
        let span = DirectSpan {
            host: 0x1000,
            pitch: 800,
            width: 160,
            height: 7,
        };
        let (host, device) = (
            driver_sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            driver_sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        );
        let up = span.copy(true, 0xbeef);
        assert_eq!((up.srcMemoryType, up.dstMemoryType), (host, device));
        assert_eq!(
            (up.srcHost as usize, up.srcPitch, up.dstDevice, up.dstPitch),
            (0x1000, 800, 0xbeef, 160)
        );
        assert!(up.dstHost.is_null() && up.srcDevice == 0);
        let down = span.copy(false, 0xbeef);
        assert_eq!((down.srcMemoryType, down.dstMemoryType), (device, host));
        assert_eq!(
            (
                down.srcDevice,
                down.srcPitch,
                down.dstHost as usize,
                down.dstPitch
            ),
            (0xbeef, 160, 0x1000, 800)
        );
        assert!(down.srcHost.is_null() && down.dstDevice == 0);
        assert_eq!(
            (up.WidthInBytes, up.Height, down.WidthInBytes, down.Height),
            (160, 7, 160, 7)
        );
    }

    /// The peers' shapes and precisions are checked before any device work: the one-matrix
    /// factorisations take a square matrix, ?geqrf any, least squares [A | B] with A's columns
    /// among its columns and A at least as tall as wide; the refined solvers f64 and c64, ?sytrf s
    /// and d.
    #[test]
    fn solver_peers_refuse_the_shapes_they_cannot_take() {
        assert!(SolverPeer::Getrf.check_shape((5, 5)).is_ok());
        assert!(SolverPeer::Potrf.check_shape((5, 4)).is_err());
        assert!(SolverPeer::Geqrf.check_shape((5, 9)).is_ok());
        let gels = SolverPeer::Gels { columns: 4 };
        assert!(gels.check_shape((10, 6)).is_ok() && gels.check_shape((4, 4)).is_ok());
        let narrow = gels.check_shape((10, 3)).unwrap_err().to_string();
        assert!(
            narrow.contains("too few columns for the 4 of A"),
            "{narrow}"
        );
        let wide = gels.check_shape((3, 6)).unwrap_err().to_string();
        assert!(wide.contains("at least as many rows as columns"), "{wide}");
        let irs = SolverPeer::Irs {
            columns: 6,
            math: TensorMath::Tf32,
        };
        assert!(irs.check_shape((6, 7)).is_ok() && irs.check_precision(Precision::Z).is_ok());
        let tall = irs.check_shape((7, 8)).unwrap_err().to_string();
        assert!(tall.contains("first 6 columns, square"), "{tall}");
        let single = irs.check_precision(Precision::S).unwrap_err().to_string();
        assert!(single.contains("f64 or c64"), "{single}");
        // ?sytrf: a square real matrix (cuSOLVER's complex one is not Hermitian).
        let sytrf = SolverPeer::Sytrf;
        assert!(sytrf.check_shape((5, 5)).is_ok() && sytrf.check_shape((5, 4)).is_err());
        assert!(sytrf.check_precision(Precision::S).is_ok());
        let complex = sytrf.check_precision(Precision::Z).unwrap_err().to_string();
        assert!(complex.contains("not Hermitian"), "{complex}");
    }

    /// An LU panel's devInfo and 1-based interchanges, as ?getrf leaves them, read on the host:
    /// 0-based interchanges, a zero pivot at its 0-based column without an error (the factorisation
    /// goes on), and what no ?getrf gives refused.
    #[test]
    fn a_panels_devinfo_and_interchanges_become_its_zero_pivot_and_0_based_rows() {
        let found = panel_found(Op::LuPanel, &[0, 3, 2, 3]).unwrap();
        assert_eq!(found.ipiv, vec![2, 1, 2]);
        assert_eq!(found.zero, None);
        assert_eq!(panel_found(Op::LuPanel, &[2, 1, 2]).unwrap().zero, Some(1));
        for words in [&[][..], &[-4, 1], &[0, 0], &[0, 2, 1]] {
            assert!(panel_found(Op::LuPanel, words).is_err(), "{words:?}");
        }
    }
}
