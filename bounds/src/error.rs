//! What can be wrong with a bound's inputs, or its solve.

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
    /// An occupancy outside (0, 1].
    #[error(
        "class {class} runs task type {task_type} at occupancy {value}; occupancies must be above 0 and at most 1"
    )]
    InvalidOccupancy {
        /// The class.
        class: usize,
        /// The task type.
        task_type: usize,
        /// The occupancy.
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
