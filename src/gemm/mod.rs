//! The general matrix product C <- alpha op(A) op(B) + beta C on a heterogeneous node: model-driven
//! tiling, static and dynamic allocation, and the data it moves measured against lower bounds.
//!
//! One call ([`Gemm::run`] on a real [`Platform`](crate::Platform), `hetla_lab::simulate_gemm` on a
//! modelled one) goes through the same steps:
//! 1. **Machine.** The run's workers with, for each, the seconds of one T x T x T GEMM tile at
//!    candidate tile sizes (calibrated models, or the platform model's rates), the capacity of each
//!    memory node and the host-device link.
//! 2. **Tile size** (unless given): for each candidate T, Anastasiadis's (2024) data-reuse pipeline
//!    model (its Eq. 2.5) on each memory node's share of the r x s x t subkernels, shares in
//!    proportion to speed (the heterogeneous split that makes all finish together, Ballard et al.
//!    (2011)): a node's time is `max(t_h2d, t_exec) k_in + t_exec (k - k_in) + t_in + t_out`, where
//!    k_in counts the tiles it must fetch (A and B strips of a square zone: 2 sqrt(area) t, plus
//!    its C tiles) beyond the first subkernel's. The predicted time is the slowest node's; the
//!    smallest wins (ties to the larger tile). Ragged tiles count as full ones, which penalises
//!    padding, as Anastasiadis's (2024) C_padding does.
//! 3. **Strategy** (see [`Strategy`]); `auto` picks, from the same model, `dmda` without devices
//!    (no copies to save), `max-reuse` when some device cannot hold its PERI-SUM share's working
//!    set (A and B strips and C zone), else `peri-sum` with EffectiveSteal (Eyraud-Dubois and
//!    Lambert's (2018) best).
//! 4. **Run** on the runtime (real threads or the simulator), with the static plan or MCT. Device
//!    workers overlap copies and kernels (uploads on their own stream, prefetch of the next two
//!    planned tasks), reuse resident tiles, and evict LRU (or, for max-reuse, exactly what the plan
//!    releases).
//! 5. **Accounting**: bytes per link and per device from the trace, against lower bounds: for each
//!    device that performed G tile updates, at least max(3 G^{2/3}, G sqrt(27/(8m)) - m) tiles
//!    (Loomis-Whitney: the A, B and C tiles G updates touch, all starting in host memory; and
//!    Dongarra et al.'s (2007) bound with m tile buffers). The report also gives the bound for the
//!    work split that equalises finish times and, for static partitions, the PERI-SUM bound of the
//!    planned shares.
//!
//! Placements: an operand marked [`Placement::Device`] is copied to that device before the clock
//! starts (not timed, not counted); A and B stay valid on the host too, C's only valid copy is then
//! the device's. The result is always written back into the caller's C (inside the timed run).
//! Bounds that assume host-resident operands are then reported as 0 for what was placed.

mod cost;
mod options;
mod partition;
mod plan;
mod report;
mod run;
mod strategy;

pub use cost::Machine;
pub use options::{Gemm, Placement};
pub use partition::Discretisation;
pub use plan::GemmPlan;
pub use report::{BytesMoved, GemmReport};
pub use strategy::Strategy;
