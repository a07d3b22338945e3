//! A device emulated in host memory (see the [module](super) documentation).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use hetla_clusters::CopyThreads;
use hetla_kernels::{
    AnyMat, AnyMut, AnyRef, Backend, DeviceSpan, HostRange, KernelArgs, KernelError, Op, Par,
    PinnedRanges, Precision, TensorMath,
};

use hetla_kernels::elementwise::{SpanKernel, SpanOutput};

use super::device::{Device, DeviceMemory, KernelCall, Launched, stream_for};
use super::replicas::Replicas;
use super::streams::{Event, Stream};
use crate::data::Handle;
use crate::sync::{lock, read, write};

/// An emulated replica: its data (replaced by copies and written by kernels on the stream threads),
/// its shape once the queued work is done, the last queued write, the copies into it not yet
/// arrived, and whether a copy or a kernel was queued to fill it since it was allocated.
struct EmuTile {
    data: Arc<RwLock<AnyMat>>,
    precision: Precision,
    rows: usize,
    cols: usize,
    written: Event,
    arriving: Arc<AtomicUsize>,
    filled: bool,
}

impl EmuTile {
    fn bytes(&self) -> usize {
        self.rows * self.cols * self.precision.bytes()
    }
}

/// What an emulated device counts, shared with its stream threads.
#[derive(Default)]
struct EmuCounts {
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
    /// Kernels running now (past the wait for their operands), and the most at once.
    running: AtomicUsize,
    peak_running: AtomicUsize,
    /// Kernels queued on each compute stream.
    by_stream: Vec<AtomicUsize>,
    early_reads: AtomicUsize,
    downloading: AtomicUsize,
    launched_beside_downloads: AtomicUsize,
    direct_copies: AtomicUsize,
    staged_copies: AtomicUsize,
    device_copies: AtomicUsize,
}

/// A device emulated in host memory: its own copies of the tiles, the faer kernels on one core, and
/// real copies as transfers, asynchronous like a GPU's: a copy stream and one or more compute
/// streams (threads), with events between them. With several compute streams
/// ([`EmulatedDevice::with_compute_streams`]) independent kernels run at once, as on a GPU with a
/// pool of streams: a step's panel work on the first (the priority stream), the rest in turn on the
/// others; a kernel waits for the last writes of its operands, whatever stream made them.
pub struct EmulatedDevice {
    budget: usize,
    replicas: Replicas<EmuTile>,
    /// Bytes of the replicas held now, and the most ever held.
    held: AtomicUsize,
    peak: AtomicUsize,
    upload_delay: Duration,
    download_delay: Duration,
    /// Kernels wait for the copies into their operands (false only in the test that shows the check
    /// catches a kernel that does not).
    ordered: bool,
    /// It runs hetla's elementwise kernels (false: as a GPU without NVRTC,
    /// [`EmulatedDevice::without_elementwise`]).
    elementwise: bool,
    counts: Arc<EmuCounts>,
    last_upload: Mutex<Event>,
    copy_threads: OnceLock<Arc<CopyThreads>>,
    h2d: Stream,
    compute: Vec<Stream>,
    /// Kernels queued so far (whose turn the next one's stream is).
    turn: AtomicUsize,
}

impl EmulatedDevice {
    /// An emulated device whose memory node holds at most `budget` bytes of tiles.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            replicas: Replicas::new(),
            held: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            upload_delay: Duration::ZERO,
            download_delay: Duration::ZERO,
            ordered: true,
            elementwise: true,
            counts: Arc::new(EmuCounts::with_streams(1)),
            last_upload: Mutex::new(Event::happened()),
            copy_threads: OnceLock::new(),
            h2d: Stream::new("copy"),
            compute: vec![Stream::new("compute")],
            turn: AtomicUsize::new(0),
        }
    }

    /// The same device refusing hetla's elementwise kernels, as a GPU without NVRTC does
    /// ([`Device::elementwise`]): what their callers do on the host instead is then tested.
    pub fn without_elementwise(mut self) -> Self {
        self.elementwise = false;
        self
    }

    /// The same device with `streams` compute streams (at least one; one by default), each a thread
    /// of its own: independent kernels queued on different streams run at once.
    pub fn with_compute_streams(mut self, streams: usize) -> Self {
        let streams = streams.max(1);
        const NAMES: [&str; 4] = ["compute", "compute-1", "compute-2", "compute-3"];
        self.compute = (0..streams)
            .map(|i| Stream::new(NAMES.get(i).copied().unwrap_or("compute-n")))
            .collect();
        self.counts = Arc::new(EmuCounts::with_streams(streams));
        self
    }

    /// The most kernels that ran at once (past the wait for their operands): 1 with one compute
    /// stream.
    pub fn peak_running(&self) -> usize {
        self.counts.peak_running.load(Ordering::SeqCst)
    }

    /// Kernels queued on each compute stream, the priority stream first.
    pub fn kernels_by_stream(&self) -> Vec<usize> {
        let counts = &self.counts.by_stream;
        counts.iter().map(|c| c.load(Ordering::SeqCst)).collect()
    }

    /// The same device whose uploads each take at least `delay` to arrive: kernels queued meanwhile
    /// must wait for them (tests use it to make an ordering bug show).
    pub fn with_upload_delay(mut self, delay: Duration) -> Self {
        self.upload_delay = delay;
        self
    }

    /// The same device whose downloads each take at least `delay` (in the caller's thread, like a
    /// wait for a device-to-host copy).
    pub fn with_download_delay(mut self, delay: Duration) -> Self {
        self.download_delay = delay;
        self
    }

    /// Kernels queued while a download from this device was under way: 0 when the thread that
    /// queues kernels also waits for the downloads.
    pub fn launched_beside_downloads(&self) -> usize {
        self.counts.launched_beside_downloads.load(Ordering::SeqCst)
    }

    /// Copies (uploads and downloads) made straight from or into page-locked host memory, and
    /// through a packing pass: what a GPU's DMA engine would copy alone, and what its cores would
    /// pack first.
    pub fn copies(&self) -> (usize, usize) {
        (
            self.counts.direct_copies.load(Ordering::SeqCst),
            self.counts.staged_copies.load(Ordering::SeqCst),
        )
    }

    /// Copies between its replicas and a caller's matrix in its own memory ([`Device::import`] and
    /// [`Device::export`]): what a GPU's device-to-device copies would be.
    pub fn device_copies(&self) -> usize {
        self.counts.device_copies.load(Ordering::SeqCst)
    }

    /// The copy threads of a copy between `host` (`None`: the device's own memory, counted as such)
    /// and a replica: none (the DMA engine's copy, on the calling thread) when `host` lies in
    /// page-locked memory, else the packing threads; counted.
    fn copy_threads_for(&self, host: Option<HostRange>) -> Option<&CopyThreads> {
        let Some(host) = host else {
            self.counts.device_copies.fetch_add(1, Ordering::SeqCst);
            return None;
        };
        if PinnedRanges::global().covers(&host) {
            self.counts.direct_copies.fetch_add(1, Ordering::SeqCst);
            None
        } else {
            self.counts.staged_copies.fetch_add(1, Ordering::SeqCst);
            self.copy_threads()
        }
    }

    /// The most bytes of replicas this device ever held at once: what its memory would have needed
    /// (tests check it against the budget).
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// The most kernels queued on it at once.
    pub fn peak_in_flight(&self) -> usize {
        self.counts.peak_in_flight.load(Ordering::SeqCst)
    }

    /// Kernels that found a copy into one of their operands still on its way (each one failed
    /// instead of reading stale data): 0 unless the ordering is broken.
    pub fn early_reads(&self) -> usize {
        self.counts.early_reads.load(Ordering::SeqCst)
    }

    fn copy_threads(&self) -> Option<&CopyThreads> {
        self.copy_threads.get().map(|c| &**c)
    }

    fn hold(&self, bytes: usize) {
        let now = self.held.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    /// A replica of `rows x cols` in `precision` holding `data`, its last write `written`.
    fn new_tile(
        &self,
        data: AnyMat,
        (precision, rows, cols): (Precision, usize, usize),
        written: Event,
    ) -> EmuTile {
        self.hold(rows * cols * precision.bytes());
        EmuTile {
            data: Arc::new(RwLock::new(data)),
            precision,
            rows,
            cols,
            written,
            arriving: Arc::default(),
            filled: false,
        }
    }

    /// Queues the copy of `src` into the replica of `handle`, read now (`host`: its host memory,
    /// `None` for the device's own), as an upload packs into a GPU's staging buffer (or as its DMA
    /// engine reads a page-locked tile before the call returns): `src` is not read afterwards.
    fn copy_in(
        &self,
        handle: Handle,
        src: AnyRef<'_>,
        host: Option<HostRange>,
    ) -> Result<(), KernelError> {
        let ((rows, cols), precision) = (src.shape(), src.precision());
        let mut staged = AnyMat::zeros(precision, rows, cols);
        staged
            .as_mut()
            .copy_from(src, self.copy_threads_for(host))?;

        let kind = (precision, rows, cols);
        let arrived = Event::new();
        let mut target = None;
        self.replicas.put(handle, |existing| {
            let mut fresh = None;
            let tile = match existing {
                Some(tile) => {
                    if (tile.precision, tile.rows, tile.cols) != kind {
                        self.reshape(tile, kind);
                    }
                    tile
                }
                None => fresh.insert(self.new_tile(
                    AnyMat::zeros(precision, 0, 0),
                    kind,
                    Event::happened(),
                )),
            };
            let before = std::mem::replace(&mut tile.written, arrived.clone());
            tile.arriving.fetch_add(1, Ordering::SeqCst);
            tile.filled = true;
            target = Some((tile.data.clone(), before, tile.arriving.clone()));
            Ok(fresh)
        })?;
        let (data, before, arriving) = target.expect("set by put");
        let delay = self.upload_delay;
        *lock(&self.last_upload) = arrived.clone();
        self.h2d.submit(arrived, move || {
            std::thread::sleep(delay);
            // After the previous write of the replica, whatever its outcome.
            let _ = before.wait();
            *write(&data) = staged;
            arriving.fetch_sub(1, Ordering::SeqCst);
            Ok(0.0)
        })
    }

    /// Counts `tile` as `rows x cols` in `precision` from now on.
    fn reshape(&self, tile: &mut EmuTile, (precision, rows, cols): (Precision, usize, usize)) {
        self.held.fetch_sub(tile.bytes(), Ordering::SeqCst);
        self.hold(rows * cols * precision.bytes());
        (tile.precision, tile.rows, tile.cols) = (precision, rows, cols);
    }
}

impl EmuCounts {
    /// Zero counts for a device of `streams` compute streams.
    fn with_streams(streams: usize) -> Self {
        Self {
            by_stream: (0..streams).map(|_| AtomicUsize::new(0)).collect(),
            ..Self::default()
        }
    }
}

impl Device for EmulatedDevice {
    fn name(&self) -> &str {
        "emulated"
    }

    fn compute_streams(&self) -> usize {
        self.compute.len()
    }

    fn budget(&self) -> usize {
        self.budget
    }

    fn upload(&self, handle: Handle, src: AnyRef<'_>) -> Result<(), KernelError> {
        self.copy_in(handle, src, Some(src.host_range()))
    }

    fn check_span(&self, span: &DeviceSpan) -> Result<(), KernelError> {
        // Its memory is host memory: any address is its own.
        let _ = span;
        Ok(())
    }

    unsafe fn import(&self, handle: Handle, span: &DeviceSpan) -> Result<(), KernelError> {
        // SAFETY: the caller's contract: `span` is this device's memory (host memory here) holding
        // its elements, unwritten meanwhile.
        self.copy_in(handle, unsafe { span.host_view() }, None)
    }

    unsafe fn export(&self, handle: Handle, span: &DeviceSpan) -> Result<(), KernelError> {
        // SAFETY: the caller's contract: nothing else uses `span` during the call.
        self.copy_out(handle, unsafe { span.host_view_mut() }, None)
    }

    fn allocate_span(&self, kind: (Precision, usize, usize)) -> Result<DeviceMemory, KernelError> {
        // Its memory is host memory: a buffer of 16-byte words (aligned for every precision).
        let (precision, rows, cols) = kind;
        let words = (rows * cols * precision.bytes()).div_ceil(16).max(1);
        let mut buffer = vec![0_u128; words].into_boxed_slice();
        // SAFETY: the matrix's elements lie in `buffer`, a heap allocation that does not move when
        // the box does, kept by the memory.
        Ok(unsafe { DeviceMemory::new(buffer.as_mut_ptr() as u64, kind, Box::new(buffer)) })
    }

    unsafe fn write_span(&self, span: &DeviceSpan, src: AnyRef<'_>) -> Result<(), KernelError> {
        // SAFETY: the caller's contract: `span` is host memory here, unused by others meanwhile.
        unsafe { span.host_view_mut() }.copy_from(src, None)
    }

    unsafe fn read_span(&self, span: &DeviceSpan, dst: AnyMut<'_>) -> Result<(), KernelError> {
        // SAFETY: the caller's contract: `span` is host memory here, unwritten meanwhile.
        dst.copy_from(unsafe { span.host_view() }, None)
    }

    fn elementwise(&self) -> Result<(), KernelError> {
        if self.elementwise {
            return Ok(());
        }
        Err(KernelError::Gpu {
            message: "this emulated device runs no elementwise kernels, as a GPU without NVRTC"
                .into(),
        })
    }

    unsafe fn run_span_kernel(&self, kernel: SpanKernel<'_>) -> Result<SpanOutput, KernelError> {
        if kernel.compiled() {
            self.elementwise()?;
        }
        // SAFETY: the caller's contract: the spans are host memory here (an emulated device's
        // memory), disjoint, the one written unused by others and the rest unwritten.
        unsafe { kernel.run_on_host() }
    }
    fn allocate(&self, handle: Handle, kind: (Precision, usize, usize)) -> Result<(), KernelError> {
        let (precision, rows, cols) = kind;
        self.replicas.put(handle, |existing| match existing {
            Some(tile) if (tile.precision, tile.rows, tile.cols) == kind => Ok(None),
            Some(tile) => {
                self.reshape(tile, kind);
                tile.data = Arc::new(RwLock::new(AnyMat::zeros(precision, rows, cols)));
                tile.written = Event::happened();
                tile.arriving = Arc::default();
                tile.filled = false;
                Ok(None)
            }
            None => Ok(Some(self.new_tile(
                AnyMat::zeros(precision, rows, cols),
                kind,
                Event::happened(),
            ))),
        })
    }

    fn wait_uploads(&self) -> Result<(), KernelError> {
        // The copy stream runs in order: the last upload queued arrives last.
        let last = lock(&self.last_upload).clone();
        last.wait().map(|_| ())
    }

    fn download(&self, handle: Handle, dst: AnyMut<'_>) -> Result<(), KernelError> {
        self.counts.downloading.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.download_delay);
        let host = dst.host_range();
        let downloaded = self.copy_out(handle, dst, Some(host));
        self.counts.downloading.fetch_sub(1, Ordering::SeqCst);
        downloaded
    }

    fn set_copy_threads(&self, threads: Arc<CopyThreads>) {
        let _ = self.copy_threads.set(threads);
    }

    unsafe fn page_lock(&self, range: HostRange) -> Result<(), KernelError> {
        // Nothing to lock in host memory: the register alone decides how its copies go.
        if range.len == 0 || PinnedRanges::global().insert(range) {
            Ok(())
        } else {
            Err(KernelError::Gpu {
                message: format!(
                    "host memory at {:#x} ({} bytes) overlaps memory page-locked already",
                    range.start, range.len
                ),
            })
        }
    }

    fn page_unlock(&self, range: HostRange) -> Result<(), KernelError> {
        PinnedRanges::global().remove(range);
        Ok(())
    }

    fn release(&self, handle: Handle) {
        // Queued work keeps the data alive until it is done.
        if let Some(tile) = self.replicas.remove(handle) {
            let bytes = tile.read().unwrap_or_else(|e| e.into_inner()).bytes();
            self.held.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    fn clear(&self) {
        self.replicas.clear();
        self.held.store(0, Ordering::SeqCst);
    }

    fn launch_with(&self, call: &KernelCall<'_>) -> Result<Launched, KernelError> {
        let &KernelCall {
            op,
            reads,
            write,
            args,
            math,
        } = call;
        if self.counts.downloading.load(Ordering::SeqCst) > 0 {
            self.counts
                .launched_beside_downloads
                .fetch_add(1, Ordering::SeqCst);
        }
        self.launch_now((op, math), (reads, write), args.clone())
    }
}

impl EmulatedDevice {
    /// Copies the replica of `handle` into `dst` once its last write is done. Copies the replica of
    /// `handle` into `dst` (`host`: its host memory, `None` for the device's own) after the
    /// replica's last write.
    fn copy_out(
        &self,
        handle: Handle,
        dst: AnyMut<'_>,
        host: Option<HostRange>,
    ) -> Result<(), KernelError> {
        let replica = self.replicas.get(handle)?;
        let (data, written) = {
            let tile = replica.read().unwrap_or_else(|e| e.into_inner());
            (tile.data.clone(), tile.written.clone())
        };
        // After the last write, whatever its outcome (a failed kernel's tile is written
        // back as it is).
        let _ = written.wait();
        let tile = read(&data);
        let (ours, theirs) = (
            (tile.precision(), tile.shape()),
            (dst.precision(), dst.shape()),
        );
        if ours != theirs {
            return Err(KernelError::Gpu {
                message: format!(
                    "replica of handle {handle} is {}x{} in {}, the host tile {}x{} in {}",
                    ours.1.0, ours.1.1, ours.0, theirs.1.0, theirs.1.1, theirs.0
                ),
            });
        }
        let threads = self.copy_threads_for(host);
        dst.copy_from(tile.as_ref(), threads)
    }

    /// Queues `op` on the compute stream after the last writes of its operands.
    fn launch_now(
        &self,
        (op, math): (Op, TensorMath),
        (reads, write): (&[Handle], Handle),
        args: KernelArgs,
    ) -> Result<Launched, KernelError> {
        let done = Event::new();
        let operand = |handle: Handle, t: &EmuTile| Operand {
            handle,
            data: t.data.clone(),
            written: t.written.clone(),
            arriving: t.arriving.clone(),
            filled: t.filled,
        };
        let (inputs, output) = self.replicas.with_operands(reads, write, |tiles, out| {
            let inputs: Vec<Operand> = reads
                .iter()
                .zip(tiles)
                .map(|(&h, t)| operand(h, t))
                .collect();
            let output = operand(write, out);
            out.written = done.clone();
            out.filled = true;
            (inputs, output)
        })?;
        let counts = self.counts.clone();
        let now = counts.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        counts.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        let ordered = self.ordered;
        let stream = stream_for(op, self.compute.len(), &self.turn);
        counts.by_stream[stream].fetch_add(1, Ordering::SeqCst);
        self.compute[stream].submit(done.clone(), move || {
            let result = run_emulated((op, &args, math), &inputs, &output, ordered, &counts);
            counts.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })?;
        Ok(Launched::new(done))
    }
}

/// An operand of an emulated kernel, as its replica was when the kernel was queued.
struct Operand {
    handle: Handle,
    data: Arc<RwLock<AnyMat>>,
    /// The replica's last write queued before the kernel.
    written: Event,
    arriving: Arc<AtomicUsize>,
    /// Whether a copy or kernel had been queued into it when the kernel was.
    filled: bool,
}

/// An emulated kernel on the compute stream: waits for the last writes of its operands (when
/// `ordered`), checks that no copy into them is still on its way, and runs `op` with its `args`
/// with faer on one core; returns its seconds.
fn run_emulated(
    (op, args, math): (Op, &KernelArgs, TensorMath),
    inputs: &[Operand],
    output: &Operand,
    ordered: bool,
    counts: &EmuCounts,
) -> Result<f64, KernelError> {
    let operands = || inputs.iter().chain(std::iter::once(output));
    if ordered {
        for operand in operands() {
            // A failed earlier write leaves the tile as it was; the task that failed
            // reports it.
            let _ = operand.written.wait();
        }
    }
    // An input no copy was queued into yet (a kernel launched before its upload was
    // queued) counts as an early read too.
    let early = operands().find(|o| o.arriving.load(Ordering::SeqCst) > 0);
    if let Some(early) = early.or_else(|| inputs.iter().find(|o| !o.filled)) {
        counts.early_reads.fetch_add(1, Ordering::SeqCst);
        return Err(KernelError::Gpu {
            message: format!(
                "{op} would read data handle {} before its upload arrived",
                early.handle
            ),
        });
    }
    // Read locks: kernels on other streams may read the same tiles at once.
    let guards: Vec<_> = inputs.iter().map(|o| read(&o.data)).collect();
    let views: Vec<AnyRef<'_>> = guards.iter().map(|m| m.as_ref()).collect();
    let mut out = write(&output.data);
    let running = counts.running.fetch_add(1, Ordering::SeqCst) + 1;
    counts.peak_running.fetch_max(running, Ordering::SeqCst);
    let start = Instant::now();
    let call = (op, math);
    let result = Backend::Faer.run_any_with_math(call, &views, out.as_mut(), (args, Par::Seq));
    let seconds = start.elapsed().as_secs_f64();
    counts.running.fetch_sub(1, Ordering::SeqCst);
    result.map(|()| seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::{Mat, MatRef};

    /// A small SPD tile (diagonally dominant) and its Cholesky factor by faer.
    fn spd(n: usize) -> (Mat<f64>, Mat<f64>) {
        let a = Mat::from_fn(n, n, |i, j| {
            if i == j {
                n as f64 + 1.0
            } else {
                1.0 / (1.0 + i.abs_diff(j) as f64)
            }
        });
        let mut l = a.clone();
        Backend::Faer
            .run(Op::Potrf, &[], l.as_mut(), Par::Seq)
            .unwrap();
        (a, l)
    }

    fn lower_differs(x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> f64 {
        let mut worst = 0.0f64;
        for j in 0..x.ncols() {
            for i in j..x.nrows() {
                worst = worst.max((x[(i, j)] - y[(i, j)]).abs());
            }
        }
        worst
    }

    #[test]
    fn a_kernel_launched_before_its_upload_arrives_waits_for_it() {
        let (a, expected) = spd(40);
        let device = EmulatedDevice::new(usize::MAX).with_upload_delay(Duration::from_millis(200));
        device.upload(Handle(0), a.as_ref().into()).unwrap();
        let kernel = device.launch(Op::Potrf, &[], Handle(0)).unwrap();
        // Both returned at once: the copy is still on its way, so the kernel cannot be done.
        assert!(
            !kernel.is_done(),
            "the kernel ended before its upload arrived"
        );
        let seconds = kernel.wait().unwrap();
        assert!(
            (0.0..0.2).contains(&seconds),
            "kernel time {seconds} s includes the upload"
        );
        let mut back = Mat::<f64>::zeros(40, 40);
        device.download(Handle(0), back.as_mut().into()).unwrap();
        assert!(lower_differs(back.as_ref(), expected.as_ref()) < 1e-12);
        assert_eq!(device.early_reads(), 0);
        assert_eq!(device.peak_in_flight(), 1);
    }

    #[test]
    fn the_ordering_check_catches_a_kernel_that_does_not_wait_for_its_upload() {
        // The check must be able to fail: a device whose kernels skip the wait reports it.
        let (a, _) = spd(40);
        let mut device =
            EmulatedDevice::new(usize::MAX).with_upload_delay(Duration::from_millis(200));
        device.ordered = false;
        device.upload(Handle(0), a.as_ref().into()).unwrap();
        let error = device.run(Op::Potrf, &[], Handle(0)).unwrap_err();
        assert!(
            error.to_string().contains("before its upload arrived"),
            "{error}"
        );
        assert_eq!(device.early_reads(), 1);
    }

    #[test]
    fn kernels_on_different_streams_run_at_once_and_panels_take_the_first() {
        // Six GEMM NT updates of different tiles reading the same two: independent, on the
        // two streams after the priority one, so that two run at once; a POTRF goes first.
        let n = 512;
        let device = EmulatedDevice::new(usize::MAX).with_compute_streams(3);
        let a = Mat::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 / 11.0);
        let (spd_tile, _) = spd(n);
        for h in 0..2 {
            device.upload(Handle(h), a.as_ref().into()).unwrap();
        }
        device.upload(Handle(9), spd_tile.as_ref().into()).unwrap();
        let mut kernels = vec![device.launch(Op::Potrf, &[], Handle(9)).unwrap()];
        for h in 2..8 {
            device.upload(Handle(h), a.as_ref().into()).unwrap();
            let gemm = device.launch(Op::GemmNt, &[Handle(0), Handle(1)], Handle(h));
            kernels.push(gemm.unwrap());
        }
        for k in kernels {
            k.wait().unwrap();
        }
        assert_eq!(device.kernels_by_stream(), vec![1, 3, 3]);
        assert!(device.peak_running() >= 2, "peak {}", device.peak_running());
        assert_eq!(device.early_reads(), 0);
        // Each update is a's own: x - a a^T.
        let expected = &a - &a * a.transpose();
        for h in 2..8 {
            let mut back = Mat::<f64>::zeros(n, n);
            device.download(Handle(h), back.as_mut().into()).unwrap();
            assert!((&back - &expected).norm_max() < 1e-9);
        }
    }

    #[test]
    fn queued_kernels_run_in_order_and_a_download_waits_for_the_last_write() {
        // x = a * 1, then x -= a * b^T twice (GEMM NT on the written tile): each kernel
        // reads the previous one's result, none waits on the host.
        let n = 30;
        let a = Mat::from_fn(n, n, |i, j| (i + 2 * j) as f64 / 100.0);
        let b = Mat::from_fn(n, n, |i, j| (2 * i + j) as f64 / 100.0);
        let device = EmulatedDevice::new(usize::MAX).with_upload_delay(Duration::from_millis(20));
        device.upload(Handle(1), a.as_ref().into()).unwrap();
        device.upload(Handle(2), b.as_ref().into()).unwrap();
        device.upload(Handle(0), a.as_ref().into()).unwrap();
        let kernels: Vec<Launched> = (0..3)
            .map(|_| {
                device
                    .launch(Op::GemmNt, &[Handle(1), Handle(2)], Handle(0))
                    .unwrap()
            })
            .collect();
        let mut x = Mat::<f64>::zeros(n, n);
        device.download(Handle(0), x.as_mut().into()).unwrap();
        let mut expected = a.clone();
        for _ in 0..3 {
            expected -= &a * b.transpose();
        }
        let worst = (0..n)
            .flat_map(|j| (0..n).map(move |i| (i, j)))
            .map(|(i, j)| (x[(i, j)] - expected[(i, j)]).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-10, "worst error {worst}");
        assert!(kernels.iter().all(Launched::is_done));
        assert_eq!(device.peak_in_flight(), 3);
        for k in kernels {
            k.wait().unwrap();
        }
    }
}
