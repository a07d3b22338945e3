//! LDL^T's place in the list of families ([`crate::Family`]).

use std::sync::Arc;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::{Precision, Scalar};
use hetla_runtime::{Platform, SchedulerKind, Trace};

use super::Ldlt;
use crate::family::{Job, Room, Shape};
use crate::{Plan, Result, matgen};

/// Aasen's symmetric indefinite factorisation in blocks.
pub(crate) struct LdltRoom;

impl Room for LdltRoom {
    fn title(&self) -> &'static str {
        "LDL^T"
    }

    fn flops_formula(&self) -> &'static str {
        "n^3/3"
    }

    fn plans(&self, s: Shape, precision: Precision, _: usize) -> Result<Vec<Plan>> {
        Ok(vec![Plan::new(
            crate::Algorithm::Ldlt { n: s.n },
            s.tile,
            precision,
        )?])
    }

    fn modelled_plan(&self, _: Option<ProcessGrid>, s: Shape, p: Precision) -> Result<Plan> {
        Plan::new(crate::Algorithm::Ldlt { n: s.n }, s.tile, p)
    }

    fn defaults(&self) -> (ClusterSpec, SchedulerKind) {
        let ldlt = Ldlt::new();
        (ldlt.cluster_spec().clone(), ldlt.scheduler_kind())
    }

    fn default_tile(&self, platform: &Arc<Platform>, _: usize, n: usize, _: Precision) -> usize {
        Ldlt::new().platform(platform.clone()).tile_size_for(n)
    }

    fn run(&self, job: &Job<'_>, plans: &[Plan]) -> Result<(f64, Vec<Trace>)> {
        fn run_in<T: Scalar>(job: &Job<'_>, plan: &Plan) -> Result<(f64, Vec<Trace>)> {
            let Shape { n, tile, .. } = job.shape;
            let a = matgen::random_hermitian::<T>(n, job.seed);
            let ldlt = Ldlt::new().platform(job.platform.clone()).tile(tile);
            let ldlt = ldlt.scheduler(job.scheduler);
            let (s, (trace, _)) = Job::timed(|| ldlt.factor_planned(plan, a.as_ref()))?;
            Ok((s, vec![trace]))
        }
        hetla_kernels::with_scalar!(job.precision, T => run_in::<T>(job, &plans[0]))
    }
}
