//! Plans: a factorisation (or a product) built once, then run, simulated, bounded and split over a
//! process grid by the same code (see [`Plan`]). `build.rs` holds the plan and one constructor per
//! algorithm, `choice.rs` the tile choice from a platform's models, `execute.rs` its runs,
//! `bounds.rs` its bounds.

mod bounds;
mod build;
mod choice;
mod execute;

#[cfg(feature = "mpi")]
pub(crate) use bounds::kernel_types;
pub use bounds::{BoundReport, ClassCount, DistributedBounds};
pub use build::{Algorithm, Outcome, Plan, TileChoice};
pub use choice::default_tile_size;
pub(crate) use choice::{Build, SINGLE_TILE_UP_TO, choose_tile};
