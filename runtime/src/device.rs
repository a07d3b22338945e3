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
//! The runtime's data layer decides what moves ([`crate::data::DataRegistry`]); the
//! executor carries the copies out through this interface, by data handle: `upload` makes
//! (or refreshes) the device's replica of a handle from a host tile, `download` writes it
//! back into a host tile, `release` frees it, and `run` executes an operation on replicas.
//! A device holds the replicas of one run at a time; the executor clears it at the end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use faer::{Mat, MatMut, MatRef};
use hetla_kernels::{Backend, KernelError, Op, Par};

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

/// A device worker's memory and kernels, addressed by data handle.
pub trait Device: Send + Sync {
    /// The device name its performance models are kept under ("NVIDIA H100 80GB HBM3",
    /// "emulated").
    fn name(&self) -> &str;
    /// Bytes of tiles its memory node may hold (the data layer never exceeds it).
    fn budget(&self) -> usize;
    /// Makes the replica of `handle` a copy of the host tile `src`. May return before the
    /// copy ends; a later `run` or `download` of the handle waits for it.
    fn upload(&self, handle: Handle, src: MatRef<'_, f64>) -> Result<(), KernelError>;
    /// Gives `handle` a `rows x cols` replica (zeros when new) that a kernel will
    /// overwrite unread; an existing replica of that shape is kept as it is.
    fn allocate(&self, handle: Handle, rows: usize, cols: usize) -> Result<(), KernelError>;
    /// Waits until every upload queued so far has arrived (for timing kernels alone).
    fn wait_uploads(&self) -> Result<(), KernelError>;
    /// Copies the replica of `handle` into the host tile `dst`; returns when it is there.
    fn download(&self, handle: Handle, dst: MatMut<'_, f64>) -> Result<(), KernelError>;
    /// Frees the replica of `handle` (nothing when there is none).
    fn release(&self, handle: Handle);
    /// Frees every replica.
    fn clear(&self);
    /// Runs `op` on the replicas `reads` (in [`Op`]'s operand order) and `write`; returns
    /// when the kernel has finished.
    fn run(&self, op: Op, reads: &[Handle], write: Handle) -> Result<(), KernelError>;
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

/// A device emulated in host memory: its own copies of the tiles, the faer kernels on one
/// core (the worker's host thread), and real copies as transfers.
pub struct EmulatedDevice {
    budget: usize,
    replicas: Replicas<Mat<f64>>,
    /// Bytes of the replicas held now, and the most ever held.
    held: AtomicUsize,
    peak: AtomicUsize,
}

impl EmulatedDevice {
    /// An emulated device whose memory node holds at most `budget` bytes of tiles.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            replicas: Replicas::new(),
            held: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// The most bytes of replicas this device ever held at once: what its memory would
    /// have needed (tests check it against the budget).
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    fn hold(&self, bytes: usize) {
        let now = self.held.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }
}

fn mat_bytes(m: &Mat<f64>) -> usize {
    m.nrows() * m.ncols() * size_of::<f64>()
}

impl Device for EmulatedDevice {
    fn name(&self) -> &str {
        "emulated"
    }

    fn budget(&self) -> usize {
        self.budget
    }

    fn upload(&self, handle: Handle, src: MatRef<'_, f64>) -> Result<(), KernelError> {
        self.replicas.put(handle, |existing| match existing {
            Some(tile) if (tile.nrows(), tile.ncols()) == (src.nrows(), src.ncols()) => {
                tile.copy_from(src);
                Ok(None)
            }
            Some(tile) => {
                self.held.fetch_sub(mat_bytes(tile), Ordering::SeqCst);
                self.hold(src.nrows() * src.ncols() * size_of::<f64>());
                Ok(Some(src.to_owned()))
            }
            None => {
                self.hold(src.nrows() * src.ncols() * size_of::<f64>());
                Ok(Some(src.to_owned()))
            }
        })
    }

    fn allocate(&self, handle: Handle, rows: usize, cols: usize) -> Result<(), KernelError> {
        self.replicas.put(handle, |existing| match existing {
            Some(tile) if (tile.nrows(), tile.ncols()) == (rows, cols) => Ok(None),
            Some(tile) => {
                self.held.fetch_sub(mat_bytes(tile), Ordering::SeqCst);
                self.hold(rows * cols * size_of::<f64>());
                Ok(Some(Mat::zeros(rows, cols)))
            }
            None => {
                self.hold(rows * cols * size_of::<f64>());
                Ok(Some(Mat::zeros(rows, cols)))
            }
        })
    }

    fn wait_uploads(&self) -> Result<(), KernelError> {
        // Uploads are synchronous copies.
        Ok(())
    }

    fn download(&self, handle: Handle, mut dst: MatMut<'_, f64>) -> Result<(), KernelError> {
        let replica = self.replicas.get(handle)?;
        let tile = replica.read().unwrap_or_else(|e| e.into_inner());
        if (tile.nrows(), tile.ncols()) != (dst.nrows(), dst.ncols()) {
            return Err(KernelError::Gpu {
                message: format!(
                    "replica of handle {handle} is {}x{}, the host tile {}x{}",
                    tile.nrows(),
                    tile.ncols(),
                    dst.nrows(),
                    dst.ncols()
                ),
            });
        }
        dst.copy_from(tile.as_ref());
        Ok(())
    }

    fn release(&self, handle: Handle) {
        if let Some(tile) = self.replicas.remove(handle) {
            let bytes = mat_bytes(&tile.read().unwrap_or_else(|e| e.into_inner()));
            self.held.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    fn clear(&self) {
        self.replicas.clear();
        self.held.store(0, Ordering::SeqCst);
    }

    fn run(&self, op: Op, reads: &[Handle], write: Handle) -> Result<(), KernelError> {
        self.replicas.with_operands(reads, write, |reads, write| {
            let views: Vec<MatRef<'_, f64>> = reads.iter().map(|m| m.as_ref()).collect();
            Backend::Faer.run(op, &views, write.as_mut(), Par::Seq)
        })?
    }
}

#[cfg(feature = "cuda")]
pub use cuda::CudaDevice;

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use hetla_kernels::cuda::{GpuContext, GpuTile};

    /// A CUDA GPU: replicas in device memory, kernels through cuBLAS/cuSOLVER.
    pub struct CudaDevice {
        gpu: GpuContext,
        budget: usize,
        replicas: Replicas<GpuTile>,
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
            })
        }
    }

    impl Device for CudaDevice {
        fn name(&self) -> &str {
            self.gpu.name()
        }

        fn budget(&self) -> usize {
            self.budget
        }

        fn upload(&self, handle: Handle, src: MatRef<'_, f64>) -> Result<(), KernelError> {
            self.replicas.put(handle, |existing| match existing {
                Some(tile) if (tile.rows(), tile.cols()) == (src.nrows(), src.ncols()) => {
                    self.gpu.upload(src, tile).map(|()| None)
                }
                _ => {
                    let mut tile = self.gpu.alloc(src.nrows(), src.ncols())?;
                    self.gpu.upload(src, &mut tile)?;
                    Ok(Some(tile))
                }
            })
        }

        fn allocate(&self, handle: Handle, rows: usize, cols: usize) -> Result<(), KernelError> {
            self.replicas.put(handle, |existing| match existing {
                Some(tile) if (tile.rows(), tile.cols()) == (rows, cols) => Ok(None),
                _ => self.gpu.alloc_zeroed(rows, cols).map(Some),
            })
        }

        fn wait_uploads(&self) -> Result<(), KernelError> {
            self.gpu.wait_uploads()
        }

        fn download(&self, handle: Handle, dst: MatMut<'_, f64>) -> Result<(), KernelError> {
            let replica = self.replicas.get(handle)?;
            let tile = replica.read().unwrap_or_else(|e| e.into_inner());
            self.gpu.download(&tile, dst)
        }

        fn release(&self, handle: Handle) {
            // Dropping the tile frees its memory once the stream work on it is done.
            self.replicas.remove(handle);
        }

        fn clear(&self) {
            self.replicas.clear();
        }

        fn run(&self, op: Op, reads: &[Handle], write: Handle) -> Result<(), KernelError> {
            self.replicas
                .with_operands(reads, write, |reads, write| self.gpu.run(op, reads, write))?
        }
    }
}
