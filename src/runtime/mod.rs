//! The runtime: runs task graphs on a platform's workers with a scheduler, and traces them.
//!
//! - [`platform`]: workers (CPU clusters with pinned pools, devices with a pinned host
//!   thread), memory nodes, the kernel backend and the performance models learned on them;
//! - [`device`]: the device interface, CUDA GPUs and emulated devices;
//! - [`data`]: one handle per tile with an MSI replica state per memory node, and memory
//!   nodes with capacities (LRU eviction, write-back, prefetch);
//! - [`perfmodel`]: history-based duration models, persisted as JSON;
//! - [`scheduler`]: the `Scheduler` trait and the `Mct`, `Eager` and `WorkStealing` policies;
//! - [`planned`]: static allocations (groups of tasks per processor, stealing, releases);
//! - [`execute`]: the real executor (one thread per worker, inside its cluster's pool);
//! - [`sim`]: the simulated executor (same schedulers and data layer, a virtual clock and
//!   a platform model);
//! - [`calibrate`]: kernel timings ahead of runs;
//! - [`trace`]: what ran where and when; Chrome JSON, SVG Gantt chart, summary statistics.
//!
//! A run: the executor interns every task's model key, computes bottom-level priorities,
//! pushes the tasks without predecessors, and starts the workers. A worker pops a task,
//! makes its tiles valid on its memory node, runs the kernel with its cluster's
//! parallelism, records the duration in the model, and releases the successors whose last
//! predecessor this was.

pub mod calibrate;
pub mod data;
pub mod device;
pub mod execute;
pub mod perfmodel;
mod plan;
pub mod planned;
pub mod platform;
pub mod scheduler;
pub mod sim;
pub mod trace;

pub use device::{Device, EmulatedDevice, GpuSelection, MAX_GPUS};
pub use execute::{
    RunError, RunOptions, TaskFailure, WRITE_BACK, Workload, bottom_levels, execute,
};
pub use perfmodel::{KernelKey, PerfModels, ResourceClass, Stats, count_classes};
pub use planned::{Planned, StaticPlan};
pub use platform::{DeviceWorker, ModelStore, Platform, ResourceKind, WorkerInfo};
pub use scheduler::{
    DMDA_BETA, Eager, Estimate, Mct, SchedContext, Scheduler, SchedulerKind, TransferEstimate,
    WorkStealing,
};
pub use trace::{Trace, TraceSummary};
