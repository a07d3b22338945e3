//! Cholesky's and the inverse's place in the list of families ([`crate::Family`]).

use std::sync::Arc;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::{Precision, Scalar};
use hetla_runtime::{Platform, SchedulerKind, Trace};

use super::Cholesky;
use crate::family::{Job, Room, Shape};
use crate::{Plan, Result, matgen};

/// Tiled Cholesky.
pub(crate) struct CholeskyRoom;

/// Cholesky, then the inverse from its factor.
pub(crate) struct InverseRoom;

/// The builder a family run of `job` uses.
fn builder(job: &Job<'_>) -> Cholesky {
    let on = job.platform.clone();
    Cholesky::new()
        .platform(on)
        .tile(job.shape.tile)
        .scheduler(job.scheduler)
}

fn defaults() -> (ClusterSpec, SchedulerKind) {
    let c = Cholesky::new();
    (c.cluster_spec().clone(), c.scheduler_kind())
}

fn default_tile(platform: &Arc<Platform>, n: usize, precision: Precision) -> usize {
    Cholesky::new()
        .platform(platform.clone())
        .tile_size_in(n, precision)
}

impl Room for CholeskyRoom {
    fn title(&self) -> &'static str {
        "Cholesky"
    }

    fn flops_formula(&self) -> &'static str {
        "n^3/3"
    }

    fn distributed(&self) -> bool {
        true
    }

    fn plans(&self, s: Shape, precision: Precision, _: usize) -> Result<Vec<Plan>> {
        Ok(vec![Plan::new(
            crate::Algorithm::Cholesky { n: s.n },
            s.tile,
            precision,
        )?])
    }

    fn modelled_plan(&self, _: Option<ProcessGrid>, s: Shape, p: Precision) -> Result<Plan> {
        Plan::new(crate::Algorithm::Cholesky { n: s.n }, s.tile, p)
    }

    fn defaults(&self) -> (ClusterSpec, SchedulerKind) {
        defaults()
    }

    fn default_tile(&self, platform: &Arc<Platform>, _: usize, n: usize, p: Precision) -> usize {
        default_tile(platform, n, p)
    }

    fn run(&self, job: &Job<'_>, plans: &[Plan]) -> Result<(f64, Vec<Trace>)> {
        fn run_in<T: Scalar>(job: &Job<'_>, plan: &Plan) -> Result<(f64, Vec<Trace>)> {
            let mut a = matgen::random_hpd::<T>(job.shape.n, job.seed);
            let (s, trace) = Job::timed(|| builder(job).factor_planned(plan, a.as_mut()))?;
            Ok((s, vec![trace]))
        }
        hetla_kernels::with_scalar!(job.precision, T => run_in::<T>(job, &plans[0]))
    }
}

impl Room for InverseRoom {
    fn title(&self) -> &'static str {
        "Cholesky + inverse"
    }

    fn flops_formula(&self) -> &'static str {
        "n^3"
    }

    fn plans(&self, s: Shape, precision: Precision, _: usize) -> Result<Vec<Plan>> {
        Ok(vec![
            Plan::new(crate::Algorithm::Cholesky { n: s.n }, s.tile, precision)?,
            Plan::new(
                crate::Algorithm::CholeskyInverse { n: s.n },
                s.tile,
                precision,
            )?,
        ])
    }

    fn modelled_plan(&self, _: Option<ProcessGrid>, s: Shape, p: Precision) -> Result<Plan> {
        Plan::new(crate::Algorithm::CholeskyInverse { n: s.n }, s.tile, p)
    }

    fn defaults(&self) -> (ClusterSpec, SchedulerKind) {
        defaults()
    }

    fn default_tile(&self, platform: &Arc<Platform>, _: usize, n: usize, p: Precision) -> usize {
        default_tile(platform, n, p)
    }

    fn run(&self, job: &Job<'_>, _: &[Plan]) -> Result<(f64, Vec<Trace>)> {
        fn run_in<T: Scalar>(job: &Job<'_>) -> Result<(f64, Vec<Trace>)> {
            let a = matgen::random_hpd::<T>(job.shape.n, job.seed);
            Job::timed(|| {
                let (factor, factored) = builder(job).factor_owned_traced(a)?;
                let (_, inverted) = factor.inverse_traced()?;
                Ok(std::iter::once(factored).chain(inverted).collect())
            })
        }
        hetla_kernels::with_scalar!(job.precision, T => run_in::<T>(job))
    }
}
