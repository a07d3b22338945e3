//! The product planned and simulated on a modelled machine: the same planning as a real run
//! ([`Gemm::plan_on`]), with each worker's tile rate from the platform model, the plan simulated
//! (`simulate::simulate_plan`, as a Cholesky plan is) and reported as a real run is
//! ([`Gemm::report`]).

use hetla::gemm::{GemmReport, Machine};
use hetla::{Gemm, Op};
use hetla_runtime::{HOST, KernelKey, MemoryNode, SimOptions, Trace, WriteBack};

use crate::model::Modelled;
use crate::simulate::simulate_plan;
use crate::{Error, Result};

/// Simulates C <- alpha op(A) op(B) + beta C of shape (m, n, k) as `gemm` configures it on
/// `machine` (in its precision): the report of the simulated run.
pub fn simulate_gemm(
    gemm: &Gemm,
    machine: &Modelled<'_>,
    shape: (usize, usize, usize),
    options: &SimOptions,
) -> Result<GemmReport> {
    simulate_gemm_traced(gemm, machine, shape, options).map(|(report, _)| report)
}

/// [`simulate_gemm`], with the simulated run's trace.
pub fn simulate_gemm_traced(
    gemm: &Gemm,
    machine: &Modelled<'_>,
    (m, n, k): (usize, usize, usize),
    options: &SimOptions,
) -> Result<(GemmReport, Trace)> {
    let (model, precision) = (machine.model, machine.precision);
    model.check_precision(precision)?;
    let platform = machine.sim_platform()?;
    if m == 0 || n == 0 || k == 0 {
        return Err(Error::InvalidOption {
            option: "m/n/k",
            reason: "a simulated product needs m, n and k of at least 1".into(),
        });
    }
    let workers = platform.workers.clone();
    let tile_seconds = |w: usize, tile: usize| {
        let key = KernelKey::square(Op::GemmNt, tile).in_precision(precision);
        model.duration(&key, tile, &workers[w].class)
    };
    let copy_seconds = |node: MemoryNode, bytes: usize| platform.copy_seconds(HOST, node, bytes);
    let mut known_tiles = model.tiles();
    known_tiles.retain(|&t| {
        workers
            .iter()
            .all(|w| model.rate(Op::GemmNt, t, precision, &w.class).is_some())
    });
    let planning = Machine {
        workers: &workers,
        capacities: platform.capacities.clone(),
        tile_seconds: &tile_seconds,
        copy_seconds: &copy_seconds,
        known_tiles,
        precision,
    };
    let planned = gemm.plan_on(&planning, (m, n, k))?;
    // The strategy's scheduler, static plan and placement; the caller's restrictions, beta and
    // write-back.
    let mut options = options.clone();
    if gemm.write_back() == WriteBack::Resident {
        options.run.write_back = WriteBack::Resident;
    }
    let trace = simulate_plan(planned.plan(), machine, &platform, &options)?;
    Ok((gemm.report(&planning, &planned, &trace), trace))
}
