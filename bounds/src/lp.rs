//! The linear programs' solutions, from microlp.

use crate::error::BoundsError;

/// Maps a microlp failure to [`BoundsError::Solver`].
fn solver_error(e: microlp::Error) -> BoundsError {
    BoundsError::Solver(e.to_string())
}

/// The optimal solution of a solve, or the error that stopped it.
pub(crate) fn optimum(
    outcome: Result<microlp::SolveOutcome, microlp::Error>,
) -> Result<microlp::Solution, BoundsError> {
    outcome
        .map_err(solver_error)?
        .into_solution()
        .map_err(|_| BoundsError::Solver("the LP stopped before its optimum".into()))
}
