//! Devices: workers with a memory node of their own, holding tile replicas, and kernels that run on
//! those replicas. Two kinds stand behind the one [`Device`] interface:
//!
//! - [`CudaDevice`] (feature `cuda`): a GPU through cuBLAS/cuSOLVER (`hetla_kernels::cuda`),
//!   replicas in device memory, copies on the GPU's copy streams through page-locked staging
//!   buffers;
//! - [`EmulatedDevice`]: replicas in separate host memory, the CPU kernels (faer, one core), and
//!   transfers that are real copies. It runs everywhere, so tests check with real numbers that
//!   replicas, transfers, eviction and write-back keep every tile right.
//!
//! Both are asynchronous in the same way: an upload packs the host tile and queues the copy on a
//! copy stream; [`Device::launch`] queues a kernel on a compute stream and returns a [`Launched`]
//! ticket at once; the kernel waits, on the device, for the copies into its operands (CUDA events;
//! the emulated device's events and stream threads do the same), and its ticket gives its duration
//! on the device. A device with several compute streams ([`STREAMS_VAR`] sets the count for every
//! device a platform opens; [`EmulatedDevice::with_compute_streams`]) runs independent kernels at
//! once: a step's panel work on its first stream, the priority one, the rest in turn on the others;
//! the kernels a worker keeps in flight are ready tasks, independent of each other (the graph's
//! edges, read-after-write and write-after-read alike, hold a task back until its predecessors
//! ended), so only the copies into their operands order them. A device worker keeps up to
//! [`Device::queue_depth`] kernels in flight, finishes those that have ended, and otherwise waits
//! for the oldest. The emulated device checks, in each kernel, that no copy into an operand is
//! still on its way (a kernel that would read a tile before its upload arrived fails and is
//! counted), can delay its uploads to make such a race likely, and counts the kernels in flight.
//!
//! The runtime's data layer decides what moves ([`crate::data::DataRegistry`]); the executor
//! carries the copies out through this interface, by data handle: `upload` makes (or refreshes) the
//! device's replica of a handle from a host tile, `download` writes it back into a host tile,
//! `release` frees it, and `launch` queues an operation on replicas. A device holds the replicas of
//! one run at a time; the executor clears it at the end.
//!
//! Files: `device.rs` (the interface), `selection.rs` (which GPUs a platform opens), `replicas.rs`
//! (the replicas of a device by handle), `streams.rs` (the emulated streams and events),
//! `emulated.rs` and `cuda.rs` (the two devices).

#[cfg(feature = "cuda")]
mod cuda;
mod device;
mod emulated;
mod replicas;
mod selection;
mod streams;

pub use device::{Device, DeviceMemory, KernelCall, Launched, Pending, QUEUE_DEPTH};
pub use emulated::EmulatedDevice;
pub use selection::{GpuSelection, MAX_GPUS, MAX_STREAMS, STREAMS_VAR, parse_streams};
