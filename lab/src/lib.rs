//! # hetla-lab
//!
//! hetla's laboratory: what researchers (and the `hetla` command line) use to study runs on
//! machines that are not at hand, beside the library that runs them on this one.
//!
//! - **Modelled platforms** ([`PlatformModel`]): kernel rates, memories and links of a machine,
//!   built in ([`PRESETS`]: sirocco, knl, a100x8, h200, h100, xeon16, xeon16-target) or read from a
//!   TOML platform file; [`Modelled`] is one with its CPU clusters and GPUs chosen.
//! - **Calibration into platform files** ([`calibrate_links`], [`calibrate_packing`],
//!   [`record_in_run`]; the kernels alone are timed by `hetla::KernelCalibration`).
//! - **Simulated runs** of a [`Plan`](hetla::Plan) on a modelled machine, one node ([`simulate`])
//!   or several ([`simulate_grid`]), each reported beside the bounds of the same graph and
//!   durations; [`bounds`] alone; the product ([`simulate_gemm`]).
//!
//! Simulations run the runtime's own schedulers and data layer on a virtual clock
//! (`hetla-runtime`'s simulated executor), so a simulated run is scheduled as a real one.
//!
//! ```
//! use hetla::{ClusterSpec, Plan, Precision};
//! use hetla_lab::{Modelled, PlatformModel, SimOptions};
//!
//! // Cojean et al.'s sirocco: 2 clusters of 10 cores and 4 K40m GPUs.
//! let sirocco = PlatformModel::preset("sirocco").expect("a built-in preset");
//! let clusters: ClusterSpec = "2x10".parse()?;
//! let plan = Plan::new(hetla::Algorithm::Cholesky { n: 9600 }, 960, Precision::D)?;
//! let machine = Modelled::new(&sirocco, &clusters, 4);
//! let (report, _trace) = hetla_lab::simulate(&plan, &machine, &SimOptions::default())?;
//! assert!(report.makespan_ms >= report.bounds.mixed_ms);
//! println!("{:.0} Gflop/s, mixed bound {:.0}", report.gflops, report.bounds.mixed_gflops);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod calibrate;
mod error;
mod gemm;
mod model;
mod simulate;
mod tune;

pub use calibrate::{
    CHOLESKY_OPS, IN_RUN_TILES, InRun, calibrate_links, calibrate_packing, in_run_order,
    in_run_steps, link_steps, measure_device_copies, measure_launch, measure_locking,
    measure_pageable, measure_tensor, record_in_run,
};
pub use error::{Error, Result};
pub use gemm::{simulate_gemm, simulate_gemm_traced};
pub use hetla::{Family, FamilyRun};
pub use model::{
    Calibration, CpuKernelRate, CpuModel, GpuKernelRate, GpuModel, LoadedReduction,
    MAX_MODEL_CORES, Modelled, OutsideGraph, PRESETS, PageableCopies, PlatformModel, Speedup,
    StagingRate, TensorRate, calibration_sizes,
};
// What simulations take besides a plan and a modelled machine: their options (scheduler, noise),
// a network's rate and a process grid.
pub use hetla_factorizations::ProcessGrid;
pub use hetla_runtime::{HostMemory, LinkRate, RunOptions, SimOptions, WriteBack};
pub use simulate::{
    GridSimReport, NodeBusy, SimReport, WorkerBusy, bounds, parse_network, simulate, simulate_grid,
};
pub use tune::{
    Candidate, CandidateBounds, MAX_TILES_PER_SIDE, MIN_TILES_PER_SIDE, Question,
    THIS_MACHINE_RUNS, THIS_MACHINE_TILES, TuneSpace, predict, this_machine, tune, with_bounds,
};
