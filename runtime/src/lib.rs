//! # hetla-runtime
//!
//! Runs task graphs on a platform's workers with a scheduler, for real or on a modelled
//! machine, and traces them. It depends on the tile kernels, the task graphs and the
//! clusters only; `hetla` builds factorisations and products on it.
//!
//! - **Platforms**: [`Platform`] (CPU clusters with pinned pools, devices with a pinned
//!   host thread, the kernel backend and the [`PerfModels`] learned on them), [`Device`]
//!   (CUDA GPUs and [`EmulatedDevice`]s), [`LinkModel`] (one link type for real and
//!   modelled machines).
//! - **Data**: [`DataRegistry`], one handle per tile with a replica state per
//!   [`MemoryNode`], capacities, LRU eviction, write-back and prefetch.
//! - **Scheduling**: the [`Scheduler`] trait and its policies ([`Mct`], also dmda,
//!   [`Eager`], [`WorkStealing`]), chosen by [`SchedulerKind`]; [`StaticPlan`]s run by
//!   [`Planned`].
//! - **Executors**: one engine (the steps of a run: push and prefetch, start, finish and
//!   release, flush, written once) driven on wall time by [`execute`] (one thread per
//!   worker, inside its cluster's pool) or on a virtual clock by [`simulate`] (a
//!   [`SimPlatform`]'s durations and links).
//! - **Traces**: [`Trace`], what ran where and when; Chrome JSON and [`TraceSummary`].
//! - **Files**: [`write_atomic`] and its checks, so that no output is half-written.
//!
//! A run: the executor interns every task's model key, computes bottom-level priorities,
//! pushes the tasks without predecessors, and starts the workers. A worker pops a task,
//! makes its tiles valid on its memory node, runs the kernel with its cluster's
//! parallelism, records the duration in the model, and releases the successors whose last
//! predecessor this was.

/// Locks `m`, also after a panic on another thread: every guarded value in the runtime is
/// updated whole under its lock, so a poisoned one is still consistent.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

mod data;
mod device;
mod engine;
mod error;
mod execute;
mod files;
mod inflight;
mod link;
mod perfmodel;
mod planned;
mod platform;
mod prepare;
mod scheduler;
mod sim;
mod trace;

pub use data::{DataRegistry, HOST, Handle, MemoryNode, NoRoom, Transfer};
pub use error::{Error, IoError, Result};
pub use files::{check_distinct, check_writable, write_atomic};
pub use link::{LinkModel, LinkRate};
pub use sim::{
    GridTrace, MessageEvent, SimMessage, SimOptions, SimPlatform, SimRank, SimWork, simulate,
    simulate_grid,
};
pub use trace::{KernelSummary, LinkBytes, TaskEvent, TransferEvent, WorkerSummary, node_name};

pub use device::{Device, EmulatedDevice, GpuSelection, Launched, MAX_GPUS, Pending, QUEUE_DEPTH};
pub use execute::{
    Inbox, RunError, RunOptions, RunStep, TaskFailure, Workload, WriteBack, bottom_levels, execute,
    execute_beside,
};
pub use perfmodel::{KernelKey, MIN_SAMPLES, PerfModels, ResourceClass, Stats, count_classes};
pub use planned::{Planned, StaticPlan};
pub use platform::{
    DEFAULT_LINK, DeviceWorker, HostCores, ModelStore, Platform, ResourceKind, TileChoice,
    WorkerId, WorkerInfo, copy_seconds, reserve_host_cores,
};
pub use scheduler::{
    DMDA_BETA, Eager, Estimate, Mct, ModelTable, SchedContext, Scheduler, SchedulerKind, TaskInfo,
    TransferEstimate, WorkStealing,
};
pub use trace::{Trace, TraceSummary};
