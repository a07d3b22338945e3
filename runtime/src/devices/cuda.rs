//! A CUDA GPU as a device: replicas in device memory, kernels through cuBLAS/cuSOLVER.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use hetla_clusters::CopyThreads;
use hetla_kernels::cuda::{GpuContext, GpuKernel, GpuTile};
use hetla_kernels::elementwise::{SpanKernel, SpanOutput};
use hetla_kernels::{AnyMut, AnyRef, DeviceSpan, HostRange, KernelError, Precision};

use super::device::{Device, DeviceMemory, KernelCall, Launched, Pending, stream_for};
use super::replicas::Replicas;
use crate::data::Handle;

/// A kernel queued on one of a GPU's compute streams.
struct GpuPending(GpuKernel);

impl Pending for GpuPending {
    fn is_done(&self) -> bool {
        self.0.is_done()
    }

    fn wait(self: Box<Self>) -> Result<f64, KernelError> {
        self.0.wait()
    }
}

/// A CUDA GPU: replicas in device memory, kernels through cuBLAS/cuSOLVER.
pub struct CudaDevice {
    gpu: GpuContext,
    budget: usize,
    replicas: Replicas<GpuTile>,
    copy_threads: OnceLock<Arc<CopyThreads>>,
    /// Kernels queued so far (whose turn the next one's stream is, [`stream_for`]).
    turn: AtomicUsize,
}

impl CudaDevice {
    /// Opens GPU `index` with `streams` compute streams (at least one: a step's panel work on the
    /// first, the rest in turn on the others) and a memory budget for tiles: `budget` bytes, or 90%
    /// of the memory free now when `None`. A budget above the free memory is an error.
    pub fn open(index: usize, budget: Option<usize>, streams: usize) -> Result<Self, KernelError> {
        let gpu = GpuContext::with_streams(index, streams)?;
        let (free, _total) = gpu.memory()?;
        let budget = match budget {
            None => free / 10 * 9,
            Some(b) if b <= free => b,
            Some(b) => {
                return Err(KernelError::Gpu {
                    message: format!(
                        "a budget of {b} bytes on GPU {index} is more than its {free} free bytes"
                    ),
                });
            }
        };
        Ok(Self {
            gpu,
            budget,
            replicas: Replicas::new(),
            copy_threads: OnceLock::new(),
            turn: AtomicUsize::new(0),
        })
    }

    /// Copies into the replica of `handle` by `copy`: the one it has when of the `kind` (precision,
    /// rows, cols) wanted, else a new one.
    fn fill(
        &self,
        handle: Handle,
        (precision, rows, cols): (Precision, usize, usize),
        copy: impl FnOnce(&mut GpuTile) -> Result<(), KernelError>,
    ) -> Result<(), KernelError> {
        self.replicas.put(handle, |existing| match existing {
            Some(tile)
                if (tile.precision(), tile.rows(), tile.cols()) == (precision, rows, cols) =>
            {
                copy(tile).map(|()| None)
            }
            _ => {
                let mut tile = self.gpu.alloc(precision, rows, cols)?;
                copy(&mut tile)?;
                Ok(Some(tile))
            }
        })
    }

    fn copy_threads(&self) -> Option<&CopyThreads> {
        self.copy_threads.get().map(|c| &**c)
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        self.gpu.name()
    }

    fn budget(&self) -> usize {
        self.budget
    }

    fn upload(&self, handle: Handle, src: AnyRef<'_>) -> Result<(), KernelError> {
        let ((rows, cols), precision) = (src.shape(), src.precision());
        self.fill(handle, (precision, rows, cols), |tile| {
            self.gpu.upload(src, tile, self.copy_threads())
        })
    }

    fn check_span(&self, span: &DeviceSpan) -> Result<(), KernelError> {
        self.gpu.check_span(span)
    }

    unsafe fn import(&self, handle: Handle, span: &DeviceSpan) -> Result<(), KernelError> {
        let kind = (span.precision, span.rows, span.cols);
        // SAFETY: the caller's contract is this one's.
        self.fill(handle, kind, |tile| unsafe { self.gpu.import(span, tile) })
    }

    unsafe fn export(&self, handle: Handle, span: &DeviceSpan) -> Result<(), KernelError> {
        let replica = self.replicas.get(handle)?;
        let tile = replica.read().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller's contract is this one's.
        unsafe { self.gpu.export(&tile, span) }
    }

    fn allocate_span(&self, kind: (Precision, usize, usize)) -> Result<DeviceMemory, KernelError> {
        let tile = self.gpu.alloc_zeroed(kind.0, kind.1, kind.2)?;
        let addr = self.gpu.address(&tile)?;
        // SAFETY: the matrix is the tile's allocation of its elements, freed only when the memory
        // (which owns the tile) is dropped.
        Ok(unsafe { DeviceMemory::new(addr, kind, Box::new(tile)) })
    }

    unsafe fn write_span(&self, span: &DeviceSpan, src: AnyRef<'_>) -> Result<(), KernelError> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.gpu.write_span(src, span, self.copy_threads()) }
    }

    unsafe fn read_span(&self, span: &DeviceSpan, dst: AnyMut<'_>) -> Result<(), KernelError> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.gpu.read_span(span, dst) }
    }

    fn elementwise(&self) -> Result<(), KernelError> {
        self.gpu.elementwise()
    }

    unsafe fn run_span_kernel(&self, kernel: SpanKernel<'_>) -> Result<SpanOutput, KernelError> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.gpu.run_span_kernel(kernel) }
    }

    fn allocate(&self, handle: Handle, kind: (Precision, usize, usize)) -> Result<(), KernelError> {
        let (precision, rows, cols) = kind;
        self.replicas.put(handle, |existing| match existing {
            Some(tile) if (tile.precision(), tile.rows(), tile.cols()) == kind => Ok(None),
            _ => self.gpu.alloc_zeroed(precision, rows, cols).map(Some),
        })
    }

    fn wait_uploads(&self) -> Result<(), KernelError> {
        self.gpu.wait_uploads()
    }

    fn download(&self, handle: Handle, dst: AnyMut<'_>) -> Result<(), KernelError> {
        let replica = self.replicas.get(handle)?;
        let tile = replica.read().unwrap_or_else(|e| e.into_inner());
        self.gpu.download(&tile, dst, self.copy_threads())
    }

    fn set_copy_threads(&self, threads: Arc<CopyThreads>) {
        let _ = self.copy_threads.set(threads);
    }

    unsafe fn page_lock(&self, range: HostRange) -> Result<(), KernelError> {
        // SAFETY: the caller keeps `range` allocated until `page_unlock`.
        unsafe { self.gpu.page_lock(range) }
    }

    fn page_unlock(&self, range: HostRange) -> Result<(), KernelError> {
        self.gpu.page_unlock(range)
    }

    fn release(&self, handle: Handle) {
        // Dropping the tile frees its memory once the stream work on it is done.
        self.replicas.remove(handle);
    }

    fn clear(&self) {
        self.replicas.clear();
    }

    fn compute_streams(&self) -> usize {
        self.gpu.streams()
    }

    fn launch_with(&self, call: &KernelCall<'_>) -> Result<Launched, KernelError> {
        let stream = stream_for(call.op, self.gpu.streams(), &self.turn);
        let kernel = self
            .replicas
            .with_operands(call.reads, call.write, |reads, write| {
                self.gpu
                    .launch_with(stream, (call.op, call.args, call.math), reads, write)
            })??;
        Ok(Launched::new(GpuPending(kernel)))
    }
}
