//! # hetla-bounds
//!
//! Lower bounds on the makespan of a task graph on a set of resources, computed from the graph and
//! the durations of its tasks, with no knowledge of the rest of hetla: a bound here holds for any
//! schedule a runtime could produce.
//!
//! An [`Instance`] holds typed tasks with their predecessors and resource [`Class`]es (a count and
//! a duration per task type). Three makespan bounds follow:
//! - [`Instance::critical_path`]: the longest chain of dependent tasks, each at its fastest;
//! - [`Instance::area`]: the LP that shares the work of each task type among the classes;
//! - [`Instance::mixed`]: the area LP per task, strengthened with path constraints added one at a
//!   time until no path is longer than the bound (the iterative bound of Agullo, Beaumont,
//!   Eyraud-Dubois and Kumar, IPDPS 2016, which Cojean et al. (2016) plot in their Fig. 9).
//!
//! The LPs are solved with microlp. [`communication`] holds the data-movement bounds of matrix
//! multiplication that the GEMM engine measures itself against.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod all;
mod area;
pub mod communication;
mod critical_path;
mod error;
mod instance;
mod lp;
mod mixed;

pub use all::Bounds;
pub use area::AreaBound;
pub use critical_path::{CriticalPath, critical_path};
pub use error::BoundsError;
pub use instance::{Class, Instance};
pub use mixed::{MixedBound, PATH_TOLERANCE};
