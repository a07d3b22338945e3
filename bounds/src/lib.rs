//! # hetla-bounds
//!
//! Lower bounds on the makespan of a task graph on a set of resources, computed from the
//! graph and the durations of its tasks, with no knowledge of the rest of hetla: a bound
//! here holds for any schedule a runtime could produce.
//!
//! An [`Instance`] holds typed tasks with their predecessors and resource [`Class`]es (a
//! count and a duration per task type). Three makespan bounds follow:
//! - [`Instance::critical_path`]: the longest chain of dependent tasks, each at its fastest;
//! - [`Instance::area`]: the LP that shares the work of each task type among the classes;
//! - [`Instance::mixed`]: the area LP per task, strengthened with path constraints added
//!   one at a time until no path is longer than the bound (the iterative bound of Agullo,
//!   Beaumont, Eyraud-Dubois and Kumar, IPDPS 2016, which Cojean et al. (2016) plot in their
//!   Fig. 9).
//!
//! The LPs are solved with microlp. [`communication`] holds the data-movement bounds of
//! matrix multiplication that the GEMM engine measures itself against.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod area;
pub mod communication;
mod critical_path;
mod instance;
mod mixed;

pub use area::AreaBound;
pub use critical_path::{CriticalPath, critical_path};
pub use instance::{Class, Instance};
pub use mixed::{MixedBound, PATH_TOLERANCE};

/// The three makespan bounds of one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    /// The critical path.
    pub critical_path: CriticalPath,
    /// The area bound.
    pub area: AreaBound,
    /// The mixed bound.
    pub mixed: MixedBound,
}

impl Instance {
    /// Computes the critical-path, area and mixed bounds.
    pub fn bounds(&self) -> Result<Bounds, BoundsError> {
        Ok(Bounds {
            critical_path: self.critical_path(),
            area: self.area()?,
            mixed: self.mixed()?,
        })
    }
}

/// Inputs that do not describe a valid task graph with durations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
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
    /// A class lists fewer durations than there are task types.
    #[error("class {class} gives durations for {given} task types; the tasks use {types}")]
    MissingDurations {
        /// The class.
        class: usize,
        /// Durations it lists.
        given: usize,
        /// Task types in use.
        types: usize,
    },
    /// A class duration that is negative or not finite.
    #[error(
        "class {class} runs task type {task_type} in {value}; durations must be finite and >= 0"
    )]
    InvalidClassDuration {
        /// The class.
        class: usize,
        /// The task type.
        task_type: usize,
        /// The duration.
        value: f64,
    },
    /// No class with resources can run this task.
    #[error(
        "task {task} (type {task_type}) cannot run on any class with resources; give it a duration on one"
    )]
    NoClassCanRun {
        /// The task.
        task: usize,
        /// Its type.
        task_type: usize,
    },
    /// An argument of a communication bound out of its domain.
    #[error("{0}")]
    InvalidArgument(String),
    /// The LP solver failed (numerical trouble; the inputs were valid).
    #[error("LP solver: {0}")]
    Solver(String),
}

/// Maps a microlp failure to [`BoundsError::Solver`].
fn solver_error(e: microlp::Error) -> BoundsError {
    BoundsError::Solver(e.to_string())
}

/// The optimal solution of a solve, or the error that stopped it.
fn optimum(
    outcome: Result<microlp::SolveOutcome, microlp::Error>,
) -> Result<microlp::Solution, BoundsError> {
    outcome
        .map_err(solver_error)?
        .into_solution()
        .map_err(|_| BoundsError::Solver("the LP stopped before its optimum".into()))
}
