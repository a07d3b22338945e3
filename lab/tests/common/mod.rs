//! Helpers shared by the laboratory's integration tests.
#![allow(dead_code)] // Each test file uses some of them.

use hetla::{BoundReport, ClusterSpec, Plan, Precision, Trace};
use hetla_lab::{Modelled, PlatformModel, Result, SimReport};
use hetla_runtime::SimOptions;

/// `count` clusters of `size` cores.
pub fn grid(count: usize, size: usize) -> ClusterSpec {
    ClusterSpec::Grid { count, size }
}

/// The Cholesky plan of order `n` in tiles of `tile`, in `precision`, on `model` with clusters
/// `spec` and `gpus` GPUs: the plan and the modelled machine.
fn cholesky_on<'a>(
    model: &'a PlatformModel,
    spec: &'a ClusterSpec,
    gpus: usize,
    (n, tile, precision): (usize, usize, Precision),
) -> Result<(Plan, Modelled<'a>)> {
    let plan = Plan::new(hetla::Algorithm::Cholesky { n }, tile, precision)?;
    Ok((plan, Modelled::new(model, spec, gpus).precision(precision)))
}

/// The Cholesky plan of order `n` in tiles of `tile`, in `precision`, simulated on `model` with
/// clusters `spec` and `gpus` GPUs.
pub fn simulate_cholesky(
    model: &PlatformModel,
    spec: &ClusterSpec,
    gpus: usize,
    n: usize,
    tile: usize,
    precision: Precision,
    options: &SimOptions,
) -> Result<(SimReport, Trace)> {
    let (plan, machine) = cholesky_on(model, spec, gpus, (n, tile, precision))?;
    hetla_lab::simulate(&plan, &machine, options)
}

/// The bounds of the Cholesky plan of order `n` in tiles of `tile`, in double precision, on `model`
/// with clusters `spec` and `gpus` GPUs.
pub fn cholesky_bounds(
    model: &PlatformModel,
    spec: &ClusterSpec,
    gpus: usize,
    (n, tile): (usize, usize),
) -> Result<BoundReport> {
    let (plan, machine) = cholesky_on(model, spec, gpus, (n, tile, Precision::D))?;
    hetla_lab::bounds(&plan, &machine)
}
