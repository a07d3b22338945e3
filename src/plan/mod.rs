//! Plans: a factorisation (or a product) built once, then run, simulated, bounded and split over a
//! process grid by the same code (see [`Plan`]). `build.rs` holds the plan and its one constructor,
//! which each family's folder builds (`src/cholesky/plan.rs`...), `choice.rs` the tile choice from
//! a platform's models, `execute.rs` its runs, `bounds.rs` its bounds.

mod bounds;
mod build;
mod choice;
mod execute;
mod new;

pub use bounds::{BoundReport, ClassCount, DistributedBounds};
#[cfg(feature = "mpi")]
pub(crate) use bounds::{kernel_types, most_at_once};
pub(crate) use build::expect_precision;
pub use build::{Algorithm, Outcome, Plan, TileChoice};
pub(crate) use build::{Layout, Schedule, cpu_only_ops, product_plan};
pub(crate) use choice::default_tile_size;
pub(crate) use choice::{Build, SINGLE_TILE_UP_TO, choose_tile};
#[cfg(feature = "mpi")]
pub(crate) use execute::run_error_in;
pub(crate) use execute::{not_for, run_error, tile_work};
