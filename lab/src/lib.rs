//! # hetla-lab
//!
//! hetla's laboratory: what researchers (and the `hetla` command line) use to study runs on
//! machines that are not at hand, beside the library that runs them on this one.
//!
//! - **Modelled platforms** ([`PlatformModel`]): kernel rates, memories and links of a machine,
//!   built in ([`PRESETS`]: sirocco, knl, a100x8) or read from a TOML platform file; [`Modelled`]
//!   is one with its CPU clusters and GPUs chosen.
//! - **Calibration into platform files** ([`calibrate_links`], [`record_in_run`]; the kernels alone
//!   are timed by [`hetla::calibrate`]).
//! - **Simulated runs** of a [`Plan`](hetla::Plan) on a modelled machine, one node ([`simulate`])
//!   or several ([`simulate_grid`]), each reported beside the bounds of the same graph and
//!   durations; [`bounds`] alone; the product ([`simulate_gemm`]).
//!
//! Simulations run the runtime's own schedulers and data layer on a virtual clock
//! (`hetla-runtime`'s simulated executor), so a simulated run is scheduled as a real one.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod calibrate;
mod error;
mod gemm;
mod model;
mod simulate;

pub use calibrate::{
    CHOLESKY_OPS, IN_RUN_TILES, calibrate_links, in_run_steps, link_steps, record_in_run,
};
pub use error::{Error, Result};
pub use gemm::{simulate_gemm, simulate_gemm_traced};
pub use model::{
    Calibration, CpuKernelRate, CpuModel, GpuKernelRate, GpuModel, LoadedReduction,
    MAX_MODEL_CORES, Modelled, PRESETS, PlatformModel, Speedup, calibration_sizes,
};
pub use simulate::{
    GridSimReport, NodeBusy, SimReport, WorkerBusy, bounds, parse_network, simulate, simulate_grid,
};
