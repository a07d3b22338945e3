//! Plans: a factorisation (or a product) built once, then run, simulated, bounded and split
//! over a process grid by the same code.
//!
//! A [`Plan`] is what every command needs to know of one call, decided in one place:
//!
//! - the [`Algorithm`] and its shape, the precision, the tile size and, when the platform's
//!   models chose it, why ([`TileChoice`]);
//! - the task graph (built by `hetla-factorizations` in sequential order, its flops in the
//!   precision's real flops), each task's kernel key, each matrix's layout and so each
//!   tile's bytes, and the flops the rates are reported against (n^3/3 for Cholesky);
//! - what the algorithm imposes on a run (a static plan and the operands' placement, for
//!   the product's strategies);
//! - its correctness check ([`Plan::residual`]).
//!
//! The same plan is then run on a [`Platform`](crate::Platform) (the tiles where the
//! caller's matrices are, `crate::tiles`), bounded ([`Plan::bounds`] and the bounds of a
//! run it made, [`Plan::run_bounds`]), simulated on a modelled machine (`hetla-lab`) and
//! split over a process grid ([`Plan::split`]) for a distributed run or its simulation.
//! Adding a factorisation is a graph builder in `hetla-factorizations`, its kernels in
//! `hetla-kernels`, a constructor and a check here, and a driver (see
//! docs/architecture.md); every command then serves it.

mod bounds;
mod build;
mod choice;
mod execute;

#[cfg(feature = "mpi")]
pub(crate) use bounds::kernel_types;
pub use bounds::{BoundReport, ClassCount, DistributedBounds};
pub use build::{Algorithm, Plan, TileChoice};
pub use choice::default_tile_size;
pub(crate) use choice::{SINGLE_TILE_UP_TO, choose_cholesky_tile};
