//! # hetla-runtime
//!
//! Runs task graphs on a platform's workers with a scheduler, for real or on a modelled machine,
//! and traces them. It depends on the tile kernels, the task graphs and the clusters only; `hetla`
//! builds factorisations and products on it.
//!
//! - **Platforms**: [`Platform`] (CPU clusters with pinned pools, devices with a pinned host
//!   thread, the kernel backend and the [`PerfModels`] learned on them), [`Device`] (CUDA GPUs and
//!   [`EmulatedDevice`]s), [`LinkModel`] (one link type for real and modelled machines).
//! - **Data**: [`DataRegistry`], one handle per tile with a replica state per [`MemoryNode`],
//!   capacities, LRU eviction, write-back and prefetch.
//! - **Scheduling**: the [`Scheduler`] trait and its policies ([`Mct`], [`Dmda`], [`Eager`],
//!   [`WorkStealing`]), chosen by [`SchedulerKind`]; [`StaticPlan`]s run by [`Planned`].
//! - **Executors**: one engine (the steps of a run: push and prefetch, start, finish and release,
//!   flush, written once) driven on wall time by [`execute`] (one thread per worker, inside its
//!   cluster's pool) or on a virtual clock by [`simulate`] (a [`SimPlatform`]'s durations and
//!   links).
//! - **Traces**: [`Trace`], what ran where and when; Chrome JSON and [`TraceSummary`].
//! - **Files**: [`write_atomic`] and its checks, so that no output is half-written.
//!
//! A run: the executor interns every task's model key, computes bottom-level priorities, pushes the
//! tasks without predecessors, and starts the workers. A worker pops a task, makes its tiles valid
//! on its memory node, runs the kernel with its cluster's parallelism, records the duration in the
//! model, and releases the successors whose last predecessor this was.
//!
//! ## Layers
//!
//! Modules import only from the layers below them (`scripts/import-graph.py` checks that no import
//! goes in a circle):
//!
//! ```text
//! execution/ (wall clock)   simulation/ (virtual clock)   the two executors
//!            \                    /
//!             engine.rs                                   the steps of a run, once
//!                |
//!             prepare.rs                                  model table, handles, registry
//!                |
//!             run.rs                                      Workload, RunOptions, failures
//!                |
//! schedulers/  devices/  platform.rs  data.rs  inflight.rs  trace.rs  perfmodel.rs
//! link.rs  workers.rs  files.rs  error.rs  sync.rs        the parts
//! ```

mod data;
mod devices;
mod engine;
mod error;
mod execution;
mod files;
mod inflight;
mod link;
mod perfmodel;
mod platform;
mod prepare;
mod run;
mod schedulers;
mod simulation;
mod sync;
mod trace;
mod tuned;
mod workers;

pub use data::{DataRegistry, HOST, Handle, MemoryNode, NoRoom, Transfer};
pub use devices::{
    Device, DeviceMemory, EmulatedDevice, GpuSelection, KernelCall, Launched, MAX_GPUS,
    MAX_STREAMS, Pending, QUEUE_DEPTH, STREAMS_VAR, parse_streams,
};
pub use error::{Error, IoError, Result};
pub use execution::{Inbox, execute, execute_beside, execute_checked};
pub use files::{check_distinct, check_writable, write_atomic};
pub use link::{LinkModel, LinkRate};
pub use perfmodel::{KernelKey, MIN_SAMPLES, PerfModels, ResourceClass, Stats, count_classes};
pub use platform::{
    COPY_CORES_VAR, DEFAULT_LINK, DeviceWorker, HostCores, ModelStore, PageLock, Platform,
    copy_cores, copy_seconds, reserve_host_cores, wanted_copy_cores,
};
pub use run::{
    DeviceHome, HostMemory, RunError, RunOptions, RunStep, TaskFailure, Workload, WriteBack,
};
pub use schedulers::{
    DMDA_BETA, Dmda, Eager, Estimate, Mct, ModelTable, Planned, SchedContext, Scheduler,
    SchedulerKind, StaticPlan, TaskInfo, TransferEstimate, WorkStealing,
};
pub use simulation::{
    GpuSharing, GridTrace, Locking, MessageEvent, SimMessage, SimOptions, SimPlatform, SimRank,
    SimWork, Staging, simulate, simulate_grid,
};
pub use trace::{
    DeviceTraffic, KernelSummary, LinkBytes, TaskEvent, TransferEvent, WorkerSummary, node_name,
};
pub use trace::{PageLocked, PieceEvent, PieceSummary, Trace, TraceSummary};
pub use tuned::{Tuned, TunedChoice, TunedKey};
pub use workers::{ResourceKind, WorkerId, WorkerInfo};
