//! Devices: workers with a memory node of their own, holding tile replicas, and kernels
//! that run on those replicas. Two kinds stand behind the one [`Device`] interface:
//!
//! - [`CudaDevice`] (feature `cuda`): a GPU through cuBLAS/cuSOLVER
//!   (`hetla_kernels::cuda`), replicas in device memory, copies on the GPU's copy
//!   streams through page-locked staging buffers;
//! - [`EmulatedDevice`]: replicas in separate host memory, the CPU kernels (faer, one
//!   core), and transfers that are real copies. It runs everywhere, so tests check with
//!   real numbers that replicas, transfers, eviction and write-back keep every tile right.
//!
//! Both are asynchronous in the same way: an upload packs the host tile and queues the
//! copy on a copy stream; [`Device::launch`] queues a kernel on the compute stream and
//! returns a [`Launched`] ticket at once; the kernel waits, on the device, for the copies
//! into its operands (CUDA events; the emulated device's events and stream threads do the
//! same), and its ticket gives its duration on the device. A device worker keeps up to
//! [`Device::queue_depth`] kernels in flight and waits only for the oldest. The emulated
//! device checks, in each kernel, that no copy into an operand is still on its way (a
//! kernel that would read a tile before its upload arrived fails and is counted), can
//! delay its uploads to make such a race likely, and counts the kernels in flight.
//!
//! The runtime's data layer decides what moves ([`crate::data::DataRegistry`]); the
//! executor carries the copies out through this interface, by data handle: `upload` makes
//! (or refreshes) the device's replica of a handle from a host tile, `download` writes it
//! back into a host tile, `release` frees it, and `launch` queues an operation on replicas.
//! A device holds the replicas of one run at a time; the executor clears it at the end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use hetla_clusters::CpuCluster;
use hetla_kernels::{AnyMat, AnyMut, AnyRef, Backend, KernelError, Op, Par, Precision};

use crate::data::Handle;
use crate::{Error, Result};

/// The most GPUs (indices 0 to 63, or emulated devices) a selection may name: each one
/// runs a host thread, and no node has more.
pub const MAX_GPUS: usize = 64;

/// Which GPUs a platform uses (`--gpus`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GpuSelection {
    /// Every GPU the driver reports (none on a machine without a driver or device).
    #[default]
    All,
    /// No GPU.
    None,
    /// These GPUs, by index.
    List(Vec<usize>),
    /// `count` emulated devices ([`EmulatedDevice`]): the GPU code paths on any machine,
    /// for tests and demonstrations.
    Emulated(usize),
}

impl std::str::FromStr for GpuSelection {
    type Err = Error;

    /// `all`, `none`, indices (`0,1`, `0-3`), or `emulated:K` (`emulated` is one).
    fn from_str(text: &str) -> Result<Self> {
        let s = text.trim().to_ascii_lowercase();
        let invalid = |reason: String| Error::InvalidOption {
            option: "gpus",
            reason,
        };
        match s.as_str() {
            "all" => return Ok(Self::All),
            "none" => return Ok(Self::None),
            "emulated" => return Ok(Self::Emulated(1)),
            _ => {}
        }
        if let Some(count) = s.strip_prefix("emulated:") {
            return count
                .parse::<usize>()
                .ok()
                .filter(|&k| (1..=MAX_GPUS).contains(&k))
                .map(Self::Emulated)
                .ok_or_else(|| {
                    invalid(format!(
                        "{text:?}: expected emulated:K with K a whole number from 1 to {MAX_GPUS} (each device runs a host thread)"
                    ))
                });
        }
        hetla_clusters::parse_cpu_list(&s)
            .ok()
            .filter(|list| list.iter().all(|&i| i < MAX_GPUS))
            .map(Self::List)
            .ok_or(())
            .map_err(|_| {
                invalid(format!(
                    "{text:?}: expected all, none, GPU indices below {MAX_GPUS} (\"0,1\", \"0-3\") or emulated:K"
                ))
            })
    }
}

impl std::fmt::Display for GpuSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("all"),
            Self::None => f.write_str("none"),
            Self::List(list) => f.write_str(&hetla_clusters::format_cpu_list(list)),
            Self::Emulated(k) => write!(f, "emulated:{k}"),
        }
    }
}

impl GpuSelection {
    /// The GPUs of `found` (discovery's list, [`hetla_clusters::gpus`]) the selection names,
    /// by CUDA ordinal (a device the driver cannot open is left out of discovery, so
    /// positions and ordinals may differ); none for `None` and `Emulated`. Errors name a GPU
    /// that is not there.
    pub fn select(
        &self,
        found: Vec<hetla_clusters::GpuInfo>,
    ) -> Result<Vec<hetla_clusters::GpuInfo>> {
        match self {
            Self::All => Ok(found),
            Self::None | Self::Emulated(_) => Ok(Vec::new()),
            Self::List(list) => list
                .iter()
                .map(|&i| {
                    found.iter().find(|g| g.index == i).cloned().ok_or_else(|| {
                        let ordinals: Vec<usize> = found.iter().map(|g| g.index).collect();
                        Error::InvalidOption {
                            option: "gpus",
                            reason: format!(
                                "there is no GPU {i}: this machine has {} usable ({}; `hetla info` lists them)",
                                ordinals.len(),
                                if ordinals.is_empty() {
                                    "none".to_owned()
                                } else {
                                    format!("ordinals {ordinals:?}")
                                }
                            ),
                        }
                    })
                })
                .collect(),
        }
    }

    /// Opens the selected devices, each with a memory budget of `budget` bytes (`None`:
    /// 90% of a GPU's free memory; an emulated device then has no limit). Errors name a
    /// GPU that does not exist or cannot be opened.
    pub fn open(&self, budget: Option<usize>) -> Result<Vec<Arc<dyn Device>>> {
        match self {
            Self::None => Ok(Vec::new()),
            Self::Emulated(k) => {
                let budget = budget.unwrap_or(usize::MAX);
                Ok((0..*k)
                    .map(|_| Arc::new(EmulatedDevice::new(budget)) as Arc<dyn Device>)
                    .collect())
            }
            Self::All | Self::List(_) => self
                .select(hetla_clusters::gpus())?
                .iter()
                .map(|g| open_gpu(g.index, budget))
                .collect(),
        }
    }
}

#[cfg(feature = "cuda")]
fn open_gpu(index: usize, budget: Option<usize>) -> Result<Arc<dyn Device>> {
    Ok(Arc::new(CudaDevice::open(index, budget)?))
}

#[cfg(not(feature = "cuda"))]
fn open_gpu(index: usize, _budget: Option<usize>) -> Result<Arc<dyn Device>> {
    Err(Error::InvalidOption {
        option: "gpus",
        reason: format!("GPU {index} needs a build with the `cuda` feature"),
    })
}

/// Kernels a device worker keeps queued on its device by default: the uploads of the next
/// tasks overlap the running kernel, and the tiles they pin leave room to cache others.
pub const QUEUE_DEPTH: usize = 4;

/// A kernel queued on a device by [`Device::launch`]: wait for it to learn whether it
/// succeeded and how long it ran on the device.
#[must_use = "a launched kernel must be waited for to learn whether it succeeded"]
pub struct Launched(Box<dyn Pending>);

/// A device's side of a [`Launched`] kernel.
pub trait Pending: Send {
    /// Whether the kernel has finished.
    fn is_done(&self) -> bool;
    /// Waits for the kernel; its seconds on the device (the kernel alone, not the wait for
    /// its operands' copies).
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

/// A device worker's memory and kernels, addressed by data handle.
pub trait Device: Send + Sync {
    /// The device name its performance models are kept under ("NVIDIA H100 80GB HBM3",
    /// "emulated").
    fn name(&self) -> &str;
    /// Bytes of tiles its memory node may hold (the data layer never exceeds it).
    fn budget(&self) -> usize;
    /// Makes the replica of `handle` a copy of the host tile `src`, in its precision.
    /// Returns once `src` is read (packed), before the copy ends; a later kernel or
    /// download of the handle waits for it on the device.
    fn upload(&self, handle: Handle, src: AnyRef<'_>) -> Result<(), KernelError>;
    /// Gives `handle` a `rows x cols` replica in `precision` (zeros when new) that a
    /// kernel will overwrite unread; an existing replica of that shape and precision is
    /// kept as it is.
    fn allocate(
        &self,
        handle: Handle,
        precision: Precision,
        rows: usize,
        cols: usize,
    ) -> Result<(), KernelError>;
    /// Waits until every upload queued so far has arrived (for timing copies).
    fn wait_uploads(&self) -> Result<(), KernelError>;
    /// Copies the replica of `handle` into the host tile `dst` (of the replica's shape and
    /// precision), after the kernels that write it; returns when it is there.
    fn download(&self, handle: Handle, dst: AnyMut<'_>) -> Result<(), KernelError>;
    /// Frees the replica of `handle` (nothing when there is none) once the work queued on
    /// it is done.
    fn release(&self, handle: Handle);
    /// Frees every replica.
    fn clear(&self);
    /// Queues `op` on the replicas `reads` (in [`Op`]'s operand order) and `write`, after
    /// the copies into them, and returns without waiting for it.
    fn launch(&self, op: Op, reads: &[Handle], write: Handle) -> Result<Launched, KernelError>;
    /// Runs `op` and waits for it; its seconds on the device.
    fn run(&self, op: Op, reads: &[Handle], write: Handle) -> Result<f64, KernelError> {
        self.launch(op, reads, write)?.wait()
    }
    /// How many kernels its worker keeps in flight.
    fn queue_depth(&self) -> usize {
        QUEUE_DEPTH
    }
    /// Gives the device pinned threads to pack and unpack its copies with (the platform
    /// gives it the cores no cluster uses, its host thread's among them); the first call
    /// counts. Without it, the device's host thread packs alone.
    fn set_copy_threads(&self, threads: Arc<CpuCluster>) {
        let _ = threads;
    }
}

/// The replicas a device holds, by handle: each behind its own lock, so a kernel and a
/// copy of different tiles never wait for each other.
struct Replicas<T> {
    map: Mutex<HashMap<Handle, Arc<RwLock<T>>>>,
}

impl<T> Replicas<T> {
    fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Handle, Arc<RwLock<T>>>> {
        // Map updates are single inserts and removals: a panic cannot leave it torn.
        crate::lock(&self.map)
    }

    fn get(&self, handle: Handle) -> Result<Arc<RwLock<T>>, KernelError> {
        self.lock()
            .get(&handle)
            .cloned()
            .ok_or_else(|| KernelError::Gpu {
                message: format!("data handle {handle} has no replica on the device"),
            })
    }

    /// Replaces (or creates) the replica of `handle` with what `make` returns, given the
    /// current one to reuse.
    fn put(
        &self,
        handle: Handle,
        make: impl FnOnce(Option<&mut T>) -> Result<Option<T>, KernelError>,
    ) -> Result<(), KernelError> {
        let existing = self.lock().get(&handle).cloned();
        match existing {
            Some(replica) => {
                let mut guard = replica.write().unwrap_or_else(|e| e.into_inner());
                if let Some(new) = make(Some(&mut guard))? {
                    *guard = new;
                }
            }
            None => {
                if let Some(new) = make(None)? {
                    self.lock().insert(handle, Arc::new(RwLock::new(new)));
                }
            }
        }
        Ok(())
    }

    fn remove(&self, handle: Handle) -> Option<Arc<RwLock<T>>> {
        self.lock().remove(&handle)
    }

    fn clear(&self) {
        self.lock().clear();
    }

    /// Runs `f` with the read replicas and the written one locked. The written handle
    /// must differ from the read ones (the executor checks task accesses before).
    fn with_operands<R>(
        &self,
        reads: &[Handle],
        write: Handle,
        f: impl FnOnce(&[&T], &mut T) -> R,
    ) -> Result<R, KernelError> {
        if reads.contains(&write) {
            return Err(KernelError::Gpu {
                message: format!("data handle {write} is both read and written by one task"),
            });
        }
        let reads = reads
            .iter()
            .map(|&h| self.get(h))
            .collect::<Result<Vec<_>, _>>()?;
        let write = self.get(write)?;
        let guards: Vec<_> = reads
            .iter()
            .map(|r| r.read().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let views: Vec<&T> = guards.iter().map(|g| &**g).collect();
        let mut out = write.write().unwrap_or_else(|e| e.into_inner());
        Ok(f(&views, &mut out))
    }
}

/// The completion of work queued on an emulated stream, with its result (a copy: `Ok(0.0)`;
/// a kernel: its seconds or its error). Cloning shares it.
#[derive(Clone)]
struct Event(Arc<EventState>);

/// An event's result once it has happened, and the condition its waiters sleep on.
#[derive(Default)]
struct EventState {
    result: Mutex<Option<Result<f64, KernelError>>>,
    happened: Condvar,
}

impl Event {
    fn new() -> Self {
        Self(Arc::default())
    }

    /// An event that has already happened.
    fn happened() -> Self {
        let event = Self::new();
        event.fire(Ok(0.0));
        event
    }

    fn fire(&self, result: Result<f64, KernelError>) {
        *crate::lock(&self.0.result) = Some(result);
        self.0.happened.notify_all();
    }

    fn is_done(&self) -> bool {
        crate::lock(&self.0.result).is_some()
    }

    fn wait(&self) -> Result<f64, KernelError> {
        let mut state = crate::lock(&self.0.result);
        loop {
            if let Some(result) = &*state {
                return result.clone();
            }
            state = self
                .0
                .happened
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Pending for Event {
    fn is_done(&self) -> bool {
        Event::is_done(self)
    }

    fn wait(self: Box<Self>) -> Result<f64, KernelError> {
        Event::wait(&self)
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// An emulated stream: a thread that runs the work queued on it in order, started on first
/// use and joined when the device is dropped.
struct Stream {
    name: &'static str,
    queue: Mutex<Option<(mpsc::Sender<Job>, std::thread::JoinHandle<()>)>>,
}

impl Stream {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            queue: Mutex::new(None),
        }
    }

    /// Queues `work`; `done` fires with its result (a panic becomes an error), so that
    /// no waiter hangs.
    fn submit(
        &self,
        done: Event,
        work: impl FnOnce() -> Result<f64, KernelError> + Send + 'static,
    ) -> Result<(), KernelError> {
        let name = self.name;
        let job: Job = Box::new(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                .unwrap_or_else(|_| {
                    Err(KernelError::Gpu {
                        message: format!("work on the emulated {name} stream panicked"),
                    })
                });
            done.fire(result);
        });
        let mut queue = crate::lock(&self.queue);
        if queue.is_none() {
            let (send, receive) = mpsc::channel::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("emulated-{name}"))
                .spawn(move || receive.into_iter().for_each(|job| job()))
                .map_err(|e| KernelError::Gpu {
                    message: format!("starting the emulated {name} stream: {e}"),
                })?;
            *queue = Some((send, thread));
        }
        let (send, _) = queue.as_ref().expect("started above");
        send.send(job).map_err(|_| KernelError::Gpu {
            message: format!("the emulated {name} stream has stopped"),
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some((send, thread)) = self.queue.get_mut().ok().and_then(Option::take) {
            drop(send);
            let _ = thread.join();
        }
    }
}

/// An emulated replica: its data (replaced by copies and written by kernels on the stream
/// threads), its shape once the queued work is done, the last queued write, the copies
/// into it not yet arrived, and whether a copy or a kernel was queued to fill it since it
/// was allocated.
struct EmuTile {
    data: Arc<Mutex<AnyMat>>,
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
    early_reads: AtomicUsize,
    downloading: AtomicUsize,
    launched_beside_downloads: AtomicUsize,
}

/// A device emulated in host memory: its own copies of the tiles, the faer kernels on one
/// core, and real copies as transfers, asynchronous like a GPU's: a copy stream and a
/// compute stream (threads), with events between them.
pub struct EmulatedDevice {
    budget: usize,
    replicas: Replicas<EmuTile>,
    /// Bytes of the replicas held now, and the most ever held.
    held: AtomicUsize,
    peak: AtomicUsize,
    upload_delay: Duration,
    download_delay: Duration,
    /// Kernels wait for the copies into their operands (false only in the test that shows
    /// the check catches a kernel that does not).
    ordered: bool,
    counts: Arc<EmuCounts>,
    last_upload: Mutex<Event>,
    copy_threads: OnceLock<Arc<CpuCluster>>,
    h2d: Stream,
    compute: Stream,
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
            counts: Arc::default(),
            last_upload: Mutex::new(Event::happened()),
            copy_threads: OnceLock::new(),
            h2d: Stream::new("copy"),
            compute: Stream::new("compute"),
        }
    }

    /// The same device whose uploads each take at least `delay` to arrive: kernels queued
    /// meanwhile must wait for them (tests use it to make an ordering bug show).
    pub fn with_upload_delay(mut self, delay: Duration) -> Self {
        self.upload_delay = delay;
        self
    }

    /// The same device whose downloads each take at least `delay` (in the caller's thread,
    /// like a wait for a device-to-host copy).
    pub fn with_download_delay(mut self, delay: Duration) -> Self {
        self.download_delay = delay;
        self
    }

    /// Kernels queued while a download from this device was under way: 0 when the thread
    /// that queues kernels also waits for the downloads.
    pub fn launched_beside_downloads(&self) -> usize {
        self.counts.launched_beside_downloads.load(Ordering::SeqCst)
    }

    /// The most bytes of replicas this device ever held at once: what its memory would
    /// have needed (tests check it against the budget).
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// The most kernels queued on it at once.
    pub fn peak_in_flight(&self) -> usize {
        self.counts.peak_in_flight.load(Ordering::SeqCst)
    }

    /// Kernels that found a copy into one of their operands still on its way (each one
    /// failed instead of reading stale data): 0 unless the ordering is broken.
    pub fn early_reads(&self) -> usize {
        self.counts.early_reads.load(Ordering::SeqCst)
    }

    fn copy_pool(&self) -> Option<&rayon::ThreadPool> {
        self.copy_threads.get().map(|c| c.pool())
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
            data: Arc::new(Mutex::new(data)),
            precision,
            rows,
            cols,
            written,
            arriving: Arc::default(),
            filled: false,
        }
    }

    /// Counts `tile` as `rows x cols` in `precision` from now on.
    fn reshape(&self, tile: &mut EmuTile, (precision, rows, cols): (Precision, usize, usize)) {
        self.held.fetch_sub(tile.bytes(), Ordering::SeqCst);
        self.hold(rows * cols * precision.bytes());
        (tile.precision, tile.rows, tile.cols) = (precision, rows, cols);
    }
}

impl Device for EmulatedDevice {
    fn name(&self) -> &str {
        "emulated"
    }

    fn budget(&self) -> usize {
        self.budget
    }

    fn upload(&self, handle: Handle, src: AnyRef<'_>) -> Result<(), KernelError> {
        // Pack now, as into a GPU's staging buffer: the host tile is not read afterwards.
        let ((rows, cols), precision) = (src.shape(), src.precision());
        let mut staged = AnyMat::zeros(precision, rows, cols);
        staged.as_mut().copy_from(src, self.copy_pool())?;
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
        *crate::lock(&self.last_upload) = arrived.clone();
        self.h2d.submit(arrived, move || {
            std::thread::sleep(delay);
            // After the previous write of the replica, whatever its outcome.
            let _ = before.wait();
            *crate::lock(&data) = staged;
            arriving.fetch_sub(1, Ordering::SeqCst);
            Ok(0.0)
        })
    }

    fn allocate(
        &self,
        handle: Handle,
        precision: Precision,
        rows: usize,
        cols: usize,
    ) -> Result<(), KernelError> {
        let kind = (precision, rows, cols);
        self.replicas.put(handle, |existing| match existing {
            Some(tile) if (tile.precision, tile.rows, tile.cols) == kind => Ok(None),
            Some(tile) => {
                self.reshape(tile, kind);
                tile.data = Arc::new(Mutex::new(AnyMat::zeros(precision, rows, cols)));
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
        let last = crate::lock(&self.last_upload).clone();
        last.wait().map(|_| ())
    }

    fn download(&self, handle: Handle, dst: AnyMut<'_>) -> Result<(), KernelError> {
        self.counts.downloading.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.download_delay);
        let downloaded = self.download_now(handle, dst);
        self.counts.downloading.fetch_sub(1, Ordering::SeqCst);
        downloaded
    }

    fn set_copy_threads(&self, threads: Arc<CpuCluster>) {
        let _ = self.copy_threads.set(threads);
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

    fn launch(&self, op: Op, reads: &[Handle], write: Handle) -> Result<Launched, KernelError> {
        if self.counts.downloading.load(Ordering::SeqCst) > 0 {
            self.counts
                .launched_beside_downloads
                .fetch_add(1, Ordering::SeqCst);
        }
        self.launch_now(op, reads, write)
    }
}

impl EmulatedDevice {
    /// Copies the replica of `handle` into `dst` once its last write is done.
    fn download_now(&self, handle: Handle, dst: AnyMut<'_>) -> Result<(), KernelError> {
        let replica = self.replicas.get(handle)?;
        let (data, written) = {
            let tile = replica.read().unwrap_or_else(|e| e.into_inner());
            (tile.data.clone(), tile.written.clone())
        };
        // After the last write, whatever its outcome (a failed kernel's tile is written
        // back as it is).
        let _ = written.wait();
        let tile = crate::lock(&data);
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
        dst.copy_from(tile.as_ref(), self.copy_pool())
    }

    /// Queues `op` on the compute stream after the last writes of its operands.
    fn launch_now(&self, op: Op, reads: &[Handle], write: Handle) -> Result<Launched, KernelError> {
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
        self.compute.submit(done.clone(), move || {
            let result = run_emulated(op, &inputs, &output, ordered, &counts);
            counts.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })?;
        Ok(Launched::new(done))
    }
}

/// An operand of an emulated kernel, as its replica was when the kernel was queued.
struct Operand {
    handle: Handle,
    data: Arc<Mutex<AnyMat>>,
    /// The replica's last write queued before the kernel.
    written: Event,
    arriving: Arc<AtomicUsize>,
    /// Whether a copy or kernel had been queued into it when the kernel was.
    filled: bool,
}

/// An emulated kernel on the compute stream: waits for the last writes of its operands
/// (when `ordered`), checks that no copy into them is still on its way, and runs `op` with
/// faer on one core; returns its seconds.
fn run_emulated(
    op: Op,
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
    let guards: Vec<_> = inputs.iter().map(|o| crate::lock(&o.data)).collect();
    let views: Vec<AnyRef<'_>> = guards.iter().map(|m| m.as_ref()).collect();
    let mut out = crate::lock(&output.data);
    let start = Instant::now();
    Backend::Faer.run_any(op, &views, out.as_mut(), Par::Seq)?;
    Ok(start.elapsed().as_secs_f64())
}

#[cfg(feature = "cuda")]
pub use cuda::CudaDevice;

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use hetla_kernels::cuda::{GpuContext, GpuKernel, GpuTile};

    /// A kernel queued on a GPU's compute stream.
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
        copy_threads: OnceLock<Arc<CpuCluster>>,
    }

    impl CudaDevice {
        /// Opens GPU `index` with a memory budget for tiles: `budget` bytes, or 90% of the
        /// memory free now when `None`. A budget above the free memory is an error.
        pub fn open(index: usize, budget: Option<usize>) -> Result<Self, KernelError> {
            let gpu = GpuContext::new(index)?;
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
            })
        }

        fn copy_pool(&self) -> Option<&rayon::ThreadPool> {
            self.copy_threads.get().map(|c| c.pool())
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
            self.replicas.put(handle, |existing| match existing {
                Some(tile)
                    if (tile.precision(), tile.rows(), tile.cols()) == (precision, rows, cols) =>
                {
                    self.gpu.upload(src, tile, self.copy_pool()).map(|()| None)
                }
                _ => {
                    let mut tile = self.gpu.alloc(precision, rows, cols)?;
                    self.gpu.upload(src, &mut tile, self.copy_pool())?;
                    Ok(Some(tile))
                }
            })
        }

        fn allocate(
            &self,
            handle: Handle,
            precision: Precision,
            rows: usize,
            cols: usize,
        ) -> Result<(), KernelError> {
            let kind = (precision, rows, cols);
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
            self.gpu.download(&tile, dst, self.copy_pool())
        }

        fn set_copy_threads(&self, threads: Arc<CpuCluster>) {
            let _ = self.copy_threads.set(threads);
        }

        fn release(&self, handle: Handle) {
            // Dropping the tile frees its memory once the stream work on it is done.
            self.replicas.remove(handle);
        }

        fn clear(&self) {
            self.replicas.clear();
        }

        fn launch(&self, op: Op, reads: &[Handle], write: Handle) -> Result<Launched, KernelError> {
            let kernel = self.replicas.with_operands(reads, write, |reads, write| {
                self.gpu.launch(op, reads, write)
            })??;
            Ok(Launched::new(GpuPending(kernel)))
        }
    }
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
