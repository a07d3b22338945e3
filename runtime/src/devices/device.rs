//! The interface of a device worker's memory and kernels, addressed by data handle, and the ticket
//! of a kernel queued on it.

use std::sync::Arc;

use hetla_clusters::CopyThreads;
use hetla_kernels::elementwise::{SpanKernel, SpanOutput};
use hetla_kernels::{
    AnyMut, AnyRef, DeviceSpan, HostRange, KernelArgs, KernelError, Op, Precision, TensorMath,
};

use crate::data::Handle;

/// Kernels a device worker keeps queued on its device by default: the uploads of the next tasks
/// overlap the running kernel, and the tiles they pin leave room to cache others.
pub const QUEUE_DEPTH: usize = 4;

/// The stream, of a device's `streams` compute streams, a kernel of `op` is queued on: with one,
/// it; with more, the first (the priority stream) for a step's panel work, which lies on its
/// graph's critical path ([`Op::on_critical_path`]: POTRF, TRSM, the inverse's diagonal and panel
/// steps), and the others in turn for the rest, `turn` counting the kernels queued, so that the
/// trailing updates of a step run beside each other and beside the next panel.
pub(crate) fn stream_for(op: Op, streams: usize, turn: &std::sync::atomic::AtomicUsize) -> usize {
    use std::sync::atomic::Ordering;
    if streams <= 1 || op.on_critical_path() {
        return 0;
    }
    1 + turn.fetch_add(1, Ordering::Relaxed) % (streams - 1)
}

/// A kernel queued on a device by [`Device::launch`]: wait for it to learn whether it succeeded and
/// how long it ran on the device.
#[must_use = "a launched kernel must be waited for to learn whether it succeeded"]
pub struct Launched(Box<dyn Pending>);

/// A device's side of a [`Launched`] kernel.
pub trait Pending: Send {
    /// Whether the kernel has finished.
    fn is_done(&self) -> bool;
    /// Waits for the kernel; its seconds on the device (the kernel alone, not the wait for its
    /// operands' copies).
    fn wait(self: Box<Self>) -> Result<f64, KernelError>;
}

impl Launched {
    /// A ticket for a device's queued kernel.
    pub fn new(pending: impl Pending + 'static) -> Self {
        Self(Box::new(pending))
    }

    /// Whether the kernel has finished.
    pub fn is_done(&self) -> bool {
        self.0.is_done()
    }

    /// Waits for the kernel; its seconds on the device.
    pub fn wait(self) -> Result<f64, KernelError> {
        self.0.wait()
    }
}

/// A kernel for a device to queue ([`Device::launch_with`]): its operation, the replicas it reads
/// (in [`Op`]'s operand order) and the one it writes, and what it takes besides its tiles (LU's
/// interchanges).
pub struct KernelCall<'a> {
    /// The operation.
    pub op: Op,
    /// The replicas it only reads.
    pub reads: &'a [Handle],
    /// The replica it writes.
    pub write: Handle,
    /// What it takes besides its tiles.
    pub args: &'a KernelArgs,
    /// How it computes its product where it is one of single-precision tiles
    /// ([`TensorMath::applies`]).
    pub math: TensorMath,
}

/// A matrix of a device's own memory that a caller holds across runs ([`Device::allocate_span`]):
/// what a run imports its tiles from and exports them into, freed when dropped (once the work
/// queued on it is done).
pub struct DeviceMemory {
    span: DeviceSpan,
    /// What keeps the memory allocated (a GPU's allocation, an emulated device's host buffer).
    _owner: Box<dyn std::any::Any + Send + Sync>,
}

impl DeviceMemory {
    /// The `rows x cols` matrix in `precision` at `addr` (columns contiguous, `ld = rows`), kept
    /// allocated by `owner` until dropped.
    ///
    /// # Safety
    /// The matrix must lie in the device memory `owner` holds and stay valid as long as `owner`
    /// lives.
    pub unsafe fn new(
        addr: u64,
        (precision, rows, cols): (Precision, usize, usize),
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        let span = DeviceSpan {
            addr,
            rows,
            cols,
            ld: rows.max(1),
            precision,
        };
        Self {
            span,
            _owner: owner,
        }
    }

    /// The matrix it holds: columns contiguous, `ld = rows`.
    pub fn span(&self) -> &DeviceSpan {
        &self.span
    }
}

impl std::fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

/// A device worker's memory and kernels, addressed by data handle.
pub trait Device: Send + Sync {
    /// The device name its performance models are kept under ("NVIDIA H100 80GB HBM3", "emulated").
    fn name(&self) -> &str;
    /// Bytes of tiles its memory node may hold (the data layer never exceeds it).
    fn budget(&self) -> usize;
    /// Makes the replica of `handle` a copy of the host tile `src`, in its precision. Returns once
    /// `src` is read (packed), before the copy ends; a later kernel or download of the handle waits
    /// for it on the device. A tile in page-locked memory ([`Device::page_lock`]) may still be read
    /// after the call returns, by the device's DMA engine: the run keeps it unwritten (a task
    /// writing it waits for the tasks reading the copy, which wait for the copy) and waits for the
    /// uploads ([`Device::wait_uploads`]) before it unlocks the memory.
    fn upload(&self, handle: Handle, src: AnyRef<'_>) -> Result<(), KernelError>;
    /// Whether the device's own memory holds `span` (a caller's matrix that a run takes its tiles
    /// from and puts them back into, [`crate::Workload::device_home`]); else an error that says
    /// why. Devices with no such memory refuse.
    fn check_span(&self, span: &DeviceSpan) -> Result<(), KernelError> {
        let _ = span;
        Err(KernelError::Gpu {
            message: format!("{} holds no matrix of a caller's", self.name()),
        })
    }
    /// Makes the replica of `handle` a copy of the block `span` of the device's own memory (a copy
    /// within the device), as [`Device::upload`] does from host memory: returns before the copy
    /// ends, and later kernels and copies of the handle wait for it on the device.
    ///
    /// # Safety
    /// `span` must be memory of this device ([`Device::check_span`]) holding its elements, not
    /// written until the run has waited for its uploads ([`Device::wait_uploads`]).
    unsafe fn import(&self, handle: Handle, span: &DeviceSpan) -> Result<(), KernelError> {
        let _ = handle;
        self.check_span(span).and(Err(KernelError::Gpu {
            message: format!("{} cannot copy within its memory", self.name()),
        }))
    }
    /// Copies the replica of `handle` into the block `span` of the device's own memory, after the
    /// kernels that write it; returns when it is there.
    ///
    /// # Safety
    /// `span` must be memory of this device ([`Device::check_span`]) that nothing else reads or
    /// writes during the call.
    unsafe fn export(&self, handle: Handle, span: &DeviceSpan) -> Result<(), KernelError> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.import(handle, span) }
    }
    /// A matrix of `kind` (precision, rows, cols) of the device's own memory, zeros, that the
    /// caller holds across runs ([`DeviceMemory`]: what `hetla`'s refinement on a device keeps A
    /// and the factor in). It is not counted in [`Device::budget`]: the caller leaves room for it.
    /// Devices with no such memory refuse.
    fn allocate_span(&self, kind: (Precision, usize, usize)) -> Result<DeviceMemory, KernelError> {
        let _ = kind;
        Err(KernelError::Gpu {
            message: format!("{} holds no matrix of a caller's", self.name()),
        })
    }
    /// Copies the host matrix `src` (of `span`'s shape and precision, contiguous columns) into the
    /// block `span` of the device's own memory, after the copies within the device queued before
    /// (runs' imports); returns when it is there.
    ///
    /// # Safety
    /// `span` must be memory of this device ([`Device::check_span`]) that nothing else reads or
    /// writes during the call.
    unsafe fn write_span(&self, span: &DeviceSpan, src: AnyRef<'_>) -> Result<(), KernelError> {
        let _ = src;
        self.check_span(span).and(Err(KernelError::Gpu {
            message: format!("{} cannot copy host memory into its own", self.name()),
        }))
    }
    /// Copies the block `span` of the device's own memory into the host matrix `dst` (of its shape
    /// and precision, contiguous columns); returns when it is there.
    ///
    /// # Safety
    /// `span` must be memory of this device ([`Device::check_span`]) that nothing writes during the
    /// call.
    unsafe fn read_span(&self, span: &DeviceSpan, dst: AnyMut<'_>) -> Result<(), KernelError> {
        let _ = dst;
        self.check_span(span).and(Err(KernelError::Gpu {
            message: format!("{} cannot copy its memory into host memory", self.name()),
        }))
    }
    /// Whether the device runs hetla's elementwise kernels ([`Device::run_span_kernel`]: a mixed
    /// solve's preparation on it), else why not (a GPU without NVRTC). Devices with no memory of a
    /// caller's refuse.
    fn elementwise(&self) -> Result<(), KernelError> {
        Err(KernelError::Gpu {
            message: format!("{} runs no elementwise kernels", self.name()),
        })
    }
    /// Runs one of hetla's elementwise kernels on its memory ([`SpanKernel`]) and waits for it.
    ///
    /// # Safety
    /// The kernel's spans must be memory of this device ([`Device::check_span`]), disjoint; the
    /// span it writes used by nothing else and the others unwritten during the call.
    unsafe fn run_span_kernel(&self, kernel: SpanKernel<'_>) -> Result<SpanOutput, KernelError> {
        let _ = kernel;
        self.elementwise().map(|()| SpanOutput::Done)
    }
    /// Gives `handle` a replica of `kind`, (precision, rows, cols), zeros when new, that a kernel
    /// will overwrite unread; an existing replica of that precision and shape is kept as it is.
    fn allocate(&self, handle: Handle, kind: (Precision, usize, usize)) -> Result<(), KernelError>;
    /// Waits until every upload queued so far has arrived (for timing copies).
    fn wait_uploads(&self) -> Result<(), KernelError>;
    /// Copies the replica of `handle` into the host tile `dst` (of the replica's shape and
    /// precision), after the kernels that write it; returns when it is there.
    fn download(&self, handle: Handle, dst: AnyMut<'_>) -> Result<(), KernelError>;
    /// Frees the replica of `handle` (nothing when there is none) once the work queued on it is
    /// done.
    fn release(&self, handle: Handle);
    /// Frees every replica.
    fn clear(&self);
    /// Queues `call` after the copies into its replicas and returns without waiting for it.
    fn launch_with(&self, call: &KernelCall<'_>) -> Result<Launched, KernelError>;
    /// Queues `op` on the replicas `reads` (in [`Op`]'s operand order) and `write`, an operation
    /// that takes nothing besides its tiles ([`Device::launch_with`]).
    fn launch(&self, op: Op, reads: &[Handle], write: Handle) -> Result<Launched, KernelError> {
        let args = &KernelArgs::None;
        self.launch_with(&KernelCall {
            op,
            reads,
            write,
            args,
            math: TensorMath::Off,
        })
    }
    /// Runs `op` and waits for it; its seconds on the device.
    fn run(&self, op: Op, reads: &[Handle], write: Handle) -> Result<f64, KernelError> {
        self.launch(op, reads, write)?.wait()
    }
    /// How many kernels its worker keeps in flight: [`QUEUE_DEPTH`], or enough for every compute
    /// stream to hold one running and one waiting.
    fn queue_depth(&self) -> usize {
        QUEUE_DEPTH.max(2 * self.compute_streams())
    }
    /// How many kernels it runs at once at most (its compute streams).
    fn compute_streams(&self) -> usize {
        1
    }
    /// Page-locks the host memory `range` for every device of the process and enters it in
    /// [`hetla_kernels::PinnedRanges::global`]: copies of the host tiles in it then go straight
    /// from and into it, with no staging pass. Devices with no such thing refuse.
    ///
    /// # Safety
    /// `range` must be memory of this process that stays allocated until [`Device::page_unlock`] is
    /// called for it.
    unsafe fn page_lock(&self, range: HostRange) -> Result<(), KernelError> {
        let _ = range;
        Err(KernelError::Gpu {
            message: format!("{} cannot page-lock host memory", self.name()),
        })
    }
    /// Unlocks `range`, locked by [`Device::page_lock`] (nothing for another range). No copy into
    /// or out of it may be under way.
    fn page_unlock(&self, range: HostRange) -> Result<(), KernelError> {
        let _ = range;
        Ok(())
    }
    /// Gives the device pinned threads to pack and unpack its copies with (the platform gives it
    /// its host thread's core, the cores no cluster uses and the cores the clusters lend it while
    /// they are idle: [`CopyThreads`]); the first call counts. Without it, the calling thread packs
    /// alone.
    fn set_copy_threads(&self, threads: Arc<CopyThreads>) {
        let _ = threads;
    }
}
