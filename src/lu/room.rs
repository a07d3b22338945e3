//! LU's place in the list of families ([`crate::Family`]).

use std::sync::Arc;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::{Precision, Scalar};
use hetla_runtime::{Platform, SchedulerKind, Trace};

use super::Lu;
use crate::family::{Job, Room, Shape};
use crate::{Plan, Result, matgen};

/// LU with partial pivoting in block columns.
pub(crate) struct LuRoom;

impl Room for LuRoom {
    fn title(&self) -> &'static str {
        "LU"
    }

    fn flops_formula(&self) -> &'static str {
        "2 n^3/3"
    }

    fn distributed(&self) -> bool {
        true
    }

    fn on_one_process_row(&self) -> bool {
        true
    }

    fn plans(&self, s: Shape, precision: Precision, _: usize) -> Result<Vec<Plan>> {
        Ok(vec![Plan::new(
            crate::Algorithm::Lu { n: s.n },
            s.tile,
            precision,
        )?])
    }

    /// On more than one process row, the tiled LU with its interchanges between process rows.
    fn modelled_plan(&self, grid: Option<ProcessGrid>, s: Shape, p: Precision) -> Result<Plan> {
        match grid {
            Some(g) if g.rows() > 1 => Plan::new(
                crate::Algorithm::LuTiles {
                    n: s.n,
                    process_rows: g.rows(),
                },
                s.tile,
                p,
            ),
            _ => Plan::new(crate::Algorithm::Lu { n: s.n }, s.tile, p),
        }
    }

    fn defaults(&self) -> (ClusterSpec, SchedulerKind) {
        let lu = Lu::new();
        (lu.cluster_spec().clone(), lu.scheduler_kind())
    }

    fn default_tile(&self, platform: &Arc<Platform>, _: usize, n: usize, _: Precision) -> usize {
        Lu::new().platform(platform.clone()).tile_size_for(n)
    }

    fn run(&self, job: &Job<'_>, plans: &[Plan]) -> Result<(f64, Vec<Trace>)> {
        fn run_in<T: Scalar>(job: &Job<'_>, plan: &Plan) -> Result<(f64, Vec<Trace>)> {
            let Shape { m, n, tile } = job.shape;
            let mut a = matgen::random_in::<T>(m, n, job.seed);
            let lu = Lu::new().platform(job.platform.clone()).tile(tile);
            let lu = lu.scheduler(job.scheduler);
            let (s, (trace, _, _)) = Job::timed(|| lu.factor_planned(plan, a.as_mut()))?;
            Ok((s, vec![trace]))
        }
        hetla_kernels::with_scalar!(job.precision, T => run_in::<T>(job, &plans[0]))
    }
}
