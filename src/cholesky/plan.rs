//! Cholesky's plans: the factorisation (with its panels inverted where the backend solves faster
//! so), the inverse from its factor and the solve with it ([`Plan::new`] builds them from their
//! [`Algorithm`]).

use hetla_factorizations::{
    FACTOR, RHS, Tail, TaskGraph, Tiling, backward_substitution, cholesky_inverse,
    cholesky_inverting_panels, forward_substitution,
};
use hetla_kernels::Precision;

use crate::Result;
use crate::plan::{Algorithm, Layout, Plan, cpu_only_ops};

/// The tiled Cholesky factorisation of an `n x n` matrix in tiles of `tile` (the last row and
/// column of tiles ragged; a tile larger than the matrix is the whole matrix), in `precision`.
/// Refuses, before building it, a graph that this machine cannot hold (see [`crate::limits`]).
pub(crate) fn factor(n: usize, tile: usize, precision: Precision) -> Result<Plan> {
    inverting_panels(n, tile, precision, usize::MAX)
}

/// [`Algorithm::Cholesky`](crate::Algorithm::Cholesky) with a [`Op::PanelInverse`] task for each
/// panel of at least `min_solves` solves ([`cholesky_inverting_panels`]): the graph of a backend
/// whose solves run faster through the inverse
/// ([`Backend::solves_by_inverse`](crate::Backend::solves_by_inverse)).
pub(crate) fn inverting_panels(
    n: usize,
    tile: usize,
    precision: Precision,
    min_solves: usize,
) -> Result<Plan> {
    tailed(n, tile, None, precision, min_solves)
}

/// [`inverting_panels`] with the tiles from `tail.from` on of side `tail.tile`, where `tail` is
/// given ([`Tiling::with_tail`]). The limits are checked as if every tile were of the smaller side.
pub(crate) fn tailed(
    n: usize,
    tile: usize,
    tail: Option<Tail>,
    precision: Precision,
    min_solves: usize,
) -> Result<Plan> {
    let smallest = tail.map_or(tile, |t| t.tile.min(tile));
    crate::limits::check_cholesky(n, smallest, 0)?;
    let mut tiling = Tiling::square(n, tile)?;
    if let Some(tail) = tail {
        tiling = tiling.with_tail(tail)?;
    }
    let graph = cholesky_inverting_panels(&tiling, min_solves)?;
    let flops = (n as f64).powi(3) / 3.0;
    let layouts = vec![(FACTOR, Layout::Tiled(tiling))];
    let algorithm = Algorithm::Cholesky { n };
    Ok(Plan::assemble(
        algorithm, precision, tile, layouts, graph, flops,
    ))
}

/// The inverse from a Cholesky factor of order `n` in tiles of `tile` (a tiled TRTRI, then a tiled
/// LAUUM: [`cholesky_inverse`]), in `precision`; 2 n^3 / 3 flops. Its TRTRI and LAUUM steps have no
/// GPU kernels yet: runs keep them on CPU clusters.
pub(crate) fn inverse(n: usize, tile: usize, precision: Precision) -> Result<Plan> {
    // Two Cholesky graphs' worth of tasks, about.
    crate::limits::check_cholesky(n, tile, 0)?;
    crate::limits::check_graph(
        "the inverse's task graph",
        2 * crate::limits::cholesky_tasks(n, tile),
        0,
    )?;
    let tiling = Tiling::square(n, tile)?;
    let graph = cholesky_inverse(&tiling)?;
    let flops = 2.0 * (n as f64).powi(3) / 3.0;
    let layouts = vec![(FACTOR, Layout::Tiled(tiling))];
    let algorithm = Algorithm::CholeskyInverse { n };
    let mut plan = Plan::assemble(algorithm, precision, tile, layouts, graph, flops);
    plan.schedule.restrictions = cpu_only_ops();
    Ok(plan)
}

/// The solve with a Cholesky factor of order `n` in tiles of `tile` of `rhs` right-hand sides
/// (tiled alike), in `precision`: forward then backward substitution.
pub(crate) fn solve(n: usize, rhs: usize, tile: usize, precision: Precision) -> Result<Plan> {
    crate::limits::check_solve(n, rhs, tile)?;
    let l = Tiling::square(n, tile)?;
    let b = Tiling::new(n, rhs, tile)?;
    let mut graph = TaskGraph::new();
    forward_substitution(&mut graph, &l, &b)?;
    backward_substitution(&mut graph, &l, &b)?;
    let flops = 2.0 * (n as f64).powi(2) * rhs as f64;
    let layouts = vec![(FACTOR, Layout::Tiled(l)), (RHS, Layout::Tiled(b))];
    let algorithm = Algorithm::CholeskySolve { n, rhs };
    Ok(Plan::assemble(
        algorithm, precision, tile, layouts, graph, flops,
    ))
}
