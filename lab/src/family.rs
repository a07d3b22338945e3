//! The factorisations the laboratory calibrates and tunes ([`Family`]): for each, the plans a run
//! executes, the kernels they call, the options a user who sets nothing gets, and a real run on a
//! platform with its traces.
//!
//! A family is what a user asks for, not one task graph: the inverse is a Cholesky factorisation
//! and then the inverse's graph (TRTRI, LAUUM), timed together as `hetla cholesky --inverse` times
//! them. Its plans are simulated one after the other and its prediction is their sum.

use std::sync::Arc;
use std::time::Instant;

use faer::Mat;
use hetla::{
    Cholesky, ClusterSpec, Ldlt, Lu, Op, Plan, Platform, Precision, Qr, QrTree, Scalar,
    SchedulerKind, Trace, matgen,
};

use crate::{Error, Result};

/// A factorisation the laboratory calibrates and tunes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Tiled Cholesky (n^3/3 flops).
    Cholesky,
    /// Cholesky then the inverse from its factor (n^3 flops together).
    Inverse,
    /// LU with partial pivoting in block columns (2 n^3/3 flops).
    Lu,
    /// Tiled Householder QR of an m x n matrix (4 n^3/3 flops when square).
    Qr,
    /// Aasen's symmetric indefinite factorisation in blocks (n^3/3 flops).
    Ldlt,
}

/// One real run of a family ([`Family::run`]).
#[derive(Debug, Clone)]
pub struct FamilyRun {
    /// Wall-clock seconds of the library's calls (the matrix's copy and checks included, its
    /// generation not).
    pub seconds: f64,
    /// Each graph run, with its plan: one, or the factorisation's and the inverse's for the
    /// inverse.
    pub traces: Vec<(Plan, Trace)>,
}

impl Family {
    /// Every family.
    pub const ALL: [Family; 5] = [
        Family::Cholesky,
        Family::Inverse,
        Family::Lu,
        Family::Qr,
        Family::Ldlt,
    ];

    /// Its name on the command line ("cholesky", "inverse", "lu", "qr", "ldlt").
    pub fn name(self) -> &'static str {
        match self {
            Family::Cholesky => "cholesky",
            Family::Inverse => "inverse",
            Family::Lu => "lu",
            Family::Qr => "qr",
            Family::Ldlt => "ldlt",
        }
    }

    /// Its name in reports ("Cholesky", "LU").
    pub fn title(self) -> &'static str {
        match self {
            Family::Cholesky => "Cholesky",
            Family::Inverse => "Cholesky + inverse",
            Family::Lu => "LU",
            Family::Qr => "QR",
            Family::Ldlt => "LDL^T",
        }
    }

    /// Refuses rows (`m`) for a family that factors square matrices only (QR alone takes them).
    pub fn check_rows(self, m: Option<usize>, n: usize) -> Result<usize> {
        match (self, m) {
            (_, None) => Ok(n),
            (Family::Qr, Some(m)) => Ok(m),
            (_, Some(_)) => Err(Error::InvalidOption {
                option: "m",
                reason: format!(
                    "rows of a non-square matrix are QR's; {} factors square matrices of order --n",
                    self.title()
                ),
            }),
        }
    }

    /// The plans a run of an `m x n` matrix (m = n but for QR) in tiles of `tile` executes, in
    /// order, on a platform of `workers` workers (QR's reduction tree depends on them, as a run's
    /// does).
    pub fn plans(
        self,
        m: usize,
        n: usize,
        tile: usize,
        precision: Precision,
        workers: usize,
    ) -> hetla::Result<Vec<Plan>> {
        Ok(match self {
            Family::Cholesky => vec![Plan::cholesky(n, tile, precision)?],
            Family::Inverse => vec![
                Plan::cholesky(n, tile, precision)?,
                Plan::cholesky_inverse(n, tile, precision)?,
            ],
            Family::Lu => vec![Plan::lu(n, tile, precision)?],
            Family::Qr => {
                let tiles = |x: usize| x.div_ceil(tile.max(1));
                let tree = QrTree::Auto.for_shape(tiles(m), tiles(n), workers);
                vec![Plan::qr(m, n, tile, tree, precision)?]
            }
            Family::Ldlt => vec![Plan::ldlt(n, tile, precision)?],
        })
    }

    /// The flops of an `m x n` matrix's run in `precision` (its plans' together).
    pub fn flops(self, m: usize, n: usize, precision: Precision) -> hetla::Result<f64> {
        // One tile: the counts are the plans', whatever the tiling.
        let plans = self.plans(m, n, m.max(n).max(1), precision, 1)?;
        Ok(plans.iter().map(Plan::flops).sum())
    }

    /// The kernels the family's plans are modelled by (their tasks' keys' operations, those of 6 x
    /// 6 tiles, which have every one): what a platform model needs rates of. A general product's
    /// tasks are keyed as GEMM's.
    pub fn ops(self, precision: Precision) -> hetla::Result<Vec<Op>> {
        let mut ops: Vec<Op> = self
            .plans(6, 6, 1, precision, 1)?
            .iter()
            .flat_map(Plan::keyed_ops)
            .collect();
        ops.sort_by_key(|op| op.name());
        ops.dedup();
        Ok(ops)
    }

    /// The cluster spec a user who gives none gets (Cholesky's `auto`; a cluster per core for the
    /// families whose panels are narrow steps on the critical path).
    pub fn default_clusters(self) -> ClusterSpec {
        match self {
            Family::Cholesky | Family::Inverse => Cholesky::new().cluster_spec().clone(),
            Family::Lu => Lu::new().cluster_spec().clone(),
            Family::Qr => Qr::new().cluster_spec().clone(),
            Family::Ldlt => Ldlt::new().cluster_spec().clone(),
        }
    }

    /// The scheduler a user who gives none gets.
    pub fn default_scheduler(self) -> SchedulerKind {
        match self {
            Family::Cholesky | Family::Inverse => Cholesky::new().scheduler_kind(),
            Family::Lu => Lu::new().scheduler_kind(),
            Family::Qr => Qr::new().scheduler_kind(),
            Family::Ldlt => Ldlt::new().scheduler_kind(),
        }
    }

    /// The tile a user who gives none gets for an `m x n` matrix on `platform` (Cholesky's is
    /// chosen from the platform's models and may time their candidates first).
    pub fn default_tile(
        self,
        platform: &Arc<Platform>,
        m: usize,
        n: usize,
        precision: Precision,
    ) -> usize {
        let on = platform.clone();
        match self {
            Family::Cholesky | Family::Inverse => {
                Cholesky::new().platform(on).tile_size_in(n, precision)
            }
            Family::Lu => Lu::new().platform(on).tile_size_for(n),
            Family::Qr => Qr::new().platform(on).tile_size_for(m, n),
            Family::Ldlt => Ldlt::new().platform(on).tile_size_for(n),
        }
    }

    /// Factors a random `m x n` matrix of the family's kind (SPD for Cholesky and the inverse,
    /// symmetric indefinite for LDL^T, general otherwise; seeded by `seed`) on `platform` in tiles
    /// of `tile` with `scheduler`, in `precision`, and times the library's calls.
    pub fn run(
        self,
        platform: &Arc<Platform>,
        (m, n): (usize, usize),
        tile: usize,
        scheduler: SchedulerKind,
        precision: Precision,
        seed: u64,
    ) -> Result<FamilyRun> {
        hetla_kernels::with_scalar!(precision, T => self.run_in::<T>(platform, (m, n), tile, scheduler, seed))
    }

    fn run_in<T: Scalar>(
        self,
        platform: &Arc<Platform>,
        (m, n): (usize, usize),
        tile: usize,
        scheduler: SchedulerKind,
        seed: u64,
    ) -> Result<FamilyRun> {
        let on = platform.clone();
        let workers = platform.workers().len();
        let plans = self.plans(m, n, tile, T::PRECISION, workers)?;
        let mut a = self.matrix::<T>(m, n, seed);
        let start = Instant::now();
        let traced = match self {
            Family::Cholesky => {
                let cholesky = Cholesky::new().platform(on).tile(tile).scheduler(scheduler);
                cholesky.factor_planned(&plans[0], a.as_mut())?
            }
            Family::Inverse => {
                let cholesky = Cholesky::new().platform(on).tile(tile).scheduler(scheduler);
                let (factor, factored) = cholesky.factor_owned_traced(a)?;
                let (_, inverted) = factor.inverse_traced()?;
                let seconds = start.elapsed().as_secs_f64();
                let mut plans = plans.into_iter();
                let mut traces = vec![(plans.next().expect("two plans"), factored)];
                traces.extend(plans.zip(inverted));
                return Ok(FamilyRun { seconds, traces });
            }
            Family::Lu => {
                let lu = Lu::new().platform(on).tile(tile).scheduler(scheduler);
                lu.factor_planned(&plans[0], a.as_mut())?.0
            }
            Family::Qr => {
                let qr = Qr::new().platform(on).tile(tile).scheduler(scheduler);
                qr.factor_planned(&plans[0], a.as_mut())?
            }
            Family::Ldlt => {
                let ldlt = Ldlt::new().platform(on).tile(tile).scheduler(scheduler);
                ldlt.factor_planned(&plans[0], a.as_ref())?.0
            }
        };
        let seconds = start.elapsed().as_secs_f64();
        let plan = plans.into_iter().next().expect("one plan");
        Ok(FamilyRun {
            seconds,
            traces: vec![(plan, traced)],
        })
    }

    /// A random matrix of the family's kind.
    fn matrix<T: Scalar>(self, m: usize, n: usize, seed: u64) -> Mat<T> {
        match self {
            Family::Cholesky | Family::Inverse => matgen::random_hpd::<T>(n, seed),
            Family::Lu | Family::Qr => matgen::random_in::<T>(m, n, seed),
            Family::Ldlt => {
                // Hermitian with a real diagonal, indefinite: a random matrix's lower triangle.
                let r: Mat<T> = matgen::random_in(n, n, seed);
                Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
                    std::cmp::Ordering::Greater => r[(i, j)],
                    std::cmp::Ordering::Equal => T::from_f64(r[(i, i)].to_c64().re),
                    std::cmp::Ordering::Less => {
                        let z = r[(j, i)].to_c64();
                        T::from_parts(z.re, -z.im)
                    }
                })
            }
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Family {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let s = s.to_ascii_lowercase();
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown factorisation {s:?}; expected cholesky, inverse, lu, qr or ldlt")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_rows_are_qr_s_alone() {
        for f in Family::ALL {
            assert_eq!(f.name().parse::<Family>().unwrap(), f);
        }
        assert!("potrf".parse::<Family>().is_err());
        assert_eq!(Family::Qr.check_rows(Some(9), 4).unwrap(), 9);
        assert_eq!(Family::Lu.check_rows(None, 4).unwrap(), 4);
        assert!(Family::Lu.check_rows(Some(9), 4).is_err());
    }

    #[test]
    fn the_inverse_runs_cholesky_s_kernels_and_its_own() {
        let ops = Family::Inverse.ops(Precision::D).unwrap();
        for op in [Op::Potrf, Op::GemmNt, Op::Trtri, Op::Lauum] {
            assert!(ops.contains(&op), "{op} in {ops:?}");
        }
        assert!(
            !Family::Cholesky
                .ops(Precision::D)
                .unwrap()
                .contains(&Op::Trtri)
        );
    }

    /// A real run of each family on a small matrix: traced, its tasks' keys those of its plans.
    #[test]
    fn every_family_runs_and_is_traced() {
        let platform = Arc::new(
            Platform::new(
                &ClusterSpec::Grid { count: 2, size: 1 },
                hetla::Backend::Faer,
            )
            .unwrap(),
        );
        for f in Family::ALL {
            let run = f
                .run(
                    &platform,
                    (256, 256),
                    64,
                    SchedulerKind::Mct,
                    Precision::D,
                    1,
                )
                .unwrap();
            assert!(run.seconds > 0.0);
            let (plan, trace) = run.traces.last().unwrap();
            assert_eq!(trace.tasks.len(), plan.graph().len(), "{f}");
        }
    }
}
