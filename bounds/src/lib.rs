//! # hetla-bounds
//!
//! Lower bounds on the makespan of a task graph on a set of resources, computed from the
//! graph and the durations of its tasks, with no knowledge of the rest of hetla: a bound
//! here holds for any schedule a runtime could produce. It starts with the critical path,
//! the longest chain of dependent tasks, each at its fastest duration; the area bound and
//! the mixed (iterative) bound of DESIGN.md section 6 build on the same inputs.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod critical_path;

pub use critical_path::{CriticalPath, critical_path};

/// Inputs that do not describe a valid task graph with durations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BoundsError {
    /// The durations and the predecessor lists describe different numbers of tasks.
    #[error("{durations} durations were given for {tasks} tasks")]
    LengthMismatch {
        /// Number of durations.
        durations: usize,
        /// Number of predecessor lists.
        tasks: usize,
    },
    /// Tasks must be numbered in a topological order (every predecessor before its task).
    #[error("task {task} lists predecessor {predecessor}, which does not come before it")]
    NotTopological {
        /// The task.
        task: usize,
        /// Its misplaced predecessor.
        predecessor: usize,
    },
    /// A duration that is negative or not finite.
    #[error("task {task} has duration {value}; durations must be finite and >= 0")]
    InvalidDuration {
        /// The task.
        task: usize,
        /// Its duration.
        value: f64,
    },
}
