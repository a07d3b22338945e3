//! # hetla
//!
//! Dense symmetric positive definite factorisation (tiled Cholesky) and matrix products on
//! a heterogeneous node. A matrix is cut into b x b tiles ([`TiledMatrix`]), the tiled
//! algorithm is a task graph of tile kernels (`hetla-factorizations`), and the [`runtime`]
//! (`hetla-runtime`) runs the graph on a [`Platform`] of CPU core clusters
//! (`hetla-clusters`) and GPUs, placing each task with a scheduler (MCT by default, or
//! dmda) and performance models, with CPU kernels from faer or OpenBLAS and GPU kernels
//! from cuBLAS/cuSOLVER (`hetla-kernels`).
//!
//! - [`solve_spd`], [`Cholesky`] and [`Factor`]: factor and solve;
//! - [`Gemm`]: the multi-GPU product with its allocation strategies and communication
//!   bounds;
//! - [`bounds`], [`graph_bounds`]: makespan lower bounds beside every run;
//! - [`model`], [`simulation`]: modelled machines (presets and platform files) and
//!   simulated runs on them, with the same schedulers as real runs;
//! - `distributed` (feature `mpi`): symmetric matrices over MPI ranks, 2D block-cyclic.
//!
//! ```
//! use faer::Mat;
//! let a = hetla::matgen::random_spd(100, 1);
//! let b = Mat::<f64>::ones(100, 2);
//! let x = hetla::solve_spd(a.as_ref(), b.as_ref())?;
//! assert!(hetla::check::solve_backward_error(a.as_ref(), x.as_ref(), b.as_ref(), faer::Par::Seq) < 1e-13);
//! # Ok::<(), hetla::Error>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod calibrate;
pub mod check;
mod cholesky;
#[cfg(feature = "mpi")]
pub mod distributed;
mod error;
pub mod gemm;
pub mod graph_bounds;
pub mod limits;
pub mod matgen;
pub mod mixed;
pub mod model;
mod rank_plan;
pub mod simulation;
pub mod tile_choice;
mod tile_work;
mod tiled;

pub use cholesky::{Cholesky, Factor, default_tile_size, solve_spd};
pub use error::{Error, Result};
pub use gemm::{Gemm, GemmReport, Placement, Strategy};
pub use hetla_bounds as bounds;
pub use hetla_clusters::{ClusterSpec, Topology};
pub use hetla_factorizations as factorizations;
pub use hetla_kernels::{Backend, Op, Par, Precision, Scalar, c32, c64};
pub use mixed::{Refinable, Refinement, RefinementPath, solve_spd_mixed};
pub use runtime::{Platform, SchedulerKind, Trace};
pub use tiled::{TiledMatrix, mat_from_slice};

/// What a user of hetla needs of its runtime (crate `hetla-runtime`, whose whole API
/// serves those who schedule their own task graphs): platforms and devices, schedulers,
/// run options, performance models, traces and simulation options.
pub mod runtime {
    /// Tiles of a precision known at run time only, as devices and workloads move them.
    pub use hetla_kernels::{AnyMat, AnyMut, AnyRef};
    pub use hetla_runtime::{
        DEFAULT_LINK, DMDA_BETA, Device, EmulatedDevice, Error, GpuSelection, HOST, Handle,
        KernelKey, KernelSummary, Launched, LinkBytes, MAX_GPUS, MemoryNode, ModelStore, NoRoom,
        Pending, PerfModels, Platform, QUEUE_DEPTH, ResourceClass, ResourceKind, Result, RunError,
        RunOptions, RunStep, SchedulerKind, SimOptions, Stats, TaskEvent, TaskFailure, Trace,
        TraceSummary, TransferEvent, WorkerSummary, Workload, WriteBack, execute,
    };
}

/// Output files written whole or not at all (see [`write_atomic`](hetla_runtime::write_atomic)).
pub mod output {
    pub use hetla_runtime::{check_distinct, check_writable, write_atomic};
}
