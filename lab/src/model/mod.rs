//! Modelled platforms: what the resources of a machine can do, described by kernel rates, memory
//! sizes and links instead of measured on it, so that bounds and simulations can be computed for
//! machines that are not at hand.
//!
//! A [`PlatformModel`] has CPU packages of cores and, optionally, identical GPUs. CPU rates are
//! given per (operation, tile size) as the Gflop/s of one core and the speedups of some cluster
//! sizes over one core. A size between two measured ones (one core counting as speedup 1) gets the
//! linear interpolation of their speedups (`knl` measures 2 to 64 cores); with a single measured
//! size, or beyond the largest, Amdahl's law S(c) = c / (1 + s (c - 1)) with the serial fraction s
//! fitted by least squares (through the point exactly when there is one, as for `sirocco`'s 10-core
//! cluster). GPU rates are Gflop/s per (operation, tile size). A task's duration is its flop count
//! (leading terms: POTRF m^3/3, TRSM m n^2, SYRK k n^2, GEMM 2 m n k, so b^3/3, b^3, b^3 and 2 b^3
//! on square tiles, as Cojean et al. (2016) counts them) over the rate at the run's tile size;
//! ragged edge tiles use the same rate.
//!
//! Each GPU has a memory size (its memory node's capacity in simulations) and a link to host memory
//! with a latency and a bandwidth per direction (a copy of b bytes takes latency + b / bandwidth);
//! copies between GPUs use a peer link when the model has one, and are staged through host memory
//! otherwise.
//!
//! Like StarPU, and by the rule real platforms follow (`hetla::runtime::reserve_host_cores`), a run
//! with g GPUs dedicates one core to each GPU's host thread: the last g cores are taken out before
//! the clusters are formed (with `sirocco`'s 4 GPUs, 20 of its 24 cores remain for clusters).
//!
//! Models are written in TOML (see [`PlatformModel::from_toml`]); presets are built in
//! ([`PlatformModel::preset`]).

mod measured;
mod platform;
mod presets;
#[cfg(test)]
mod tests;

pub use measured::{Calibration, calibration_sizes};
pub use platform::{
    CpuKernelRate, CpuModel, GpuKernelRate, GpuModel, LoadedReduction, MAX_MODEL_CORES, Modelled,
    OutsideGraph, PRESETS, PageableCopies, PlatformModel, Speedup, StagingRate, TensorRate,
};
