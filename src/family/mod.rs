//! The factorisation families ([`Family`]): the one list of what a user can ask hetla to factor, by
//! which every crate names them (the tuned defaults, the laboratory, the command line's
//! `--factorization`, the reports).
//!
//! A family is what a user asks for, not one task graph: the inverse is a Cholesky factorisation
//! and then the inverse's graph (TRTRI, LAUUM), timed together as `hetla cholesky --inverse` times
//! them. Each family lives in its own folder (src/cholesky, src/lu, src/qr, src/ldlt, src/trtri)
//! and gives the rest of the system what it needs as one constant of type [`Room`] there (its
//! `room.rs`): its title and flop count, the algorithms a run executes (on one node or, simulated,
//! on a process grid), the options a user who sets nothing gets, and a real run of a random matrix
//! of its kind. The enum is generated from one list (`families!` in `list.rs`, which knows nothing
//! else, so that every layer can name a family); adding a family is its folder, its room, one line
//! in that list and its arm in [`Family::room`] (the compiler asks for it). The commands that take
//! any family (simulate, sweep, bound, tune, calibrate) then serve it without naming it.

use std::sync::Arc;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::{Op, Precision};
use hetla_runtime::{Platform, SchedulerKind, Trace};

use crate::{Error, Plan, Result};

mod list;
pub(crate) mod room;

pub use list::Family;
use room::{Grid, Job, Place, Room, Shape};

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
    /// The family's [`Room`] (the compiler asks for a new family's arm).
    fn room(self) -> &'static Room {
        match self {
            Family::Cholesky => &crate::cholesky::room::CHOLESKY,
            Family::Inverse => &crate::cholesky::room::INVERSE,
            Family::Lu => &crate::lu::room::ROOM,
            Family::Qr => &crate::qr::room::ROOM,
            Family::Ldlt => &crate::ldlt::room::ROOM,
            Family::Trtri => &crate::trtri::room::ROOM,
        }
    }

    /// Its name in reports ("Cholesky", "LU").
    pub fn title(self) -> &'static str {
        self.room().about.title
    }

    /// Its flop count as a formula ("n^3/3"; QR's of its rows m and columns n).
    pub fn flops_formula(self) -> &'static str {
        self.room().about.flops
    }

    /// Whether it factors non-square matrices (QR alone).
    pub fn takes_rows(self) -> bool {
        self.room().about.takes_rows
    }

    /// Whether N nodes alone mean a 1 x N process grid for it (LU and QR, whose distributed runs
    /// are fastest on one process row); else a grid as square as N allows.
    pub fn on_one_process_row(self) -> bool {
        self.room().about.grid == Grid::OneRow
    }

    /// The rows of its matrix: `m` when given (refused, before any work, for a family that factors
    /// square matrices only), else `n`.
    pub fn check_rows(self, m: Option<usize>, n: usize) -> Result<usize> {
        match m {
            None => Ok(n),
            Some(m) if self.takes_rows() => Ok(m),
            Some(_) => Err(Error::InvalidOption {
                option: "m",
                reason: format!(
                    "rows of a non-square matrix are QR's; {} factors square matrices of order --n",
                    self.title()
                ),
            }),
        }
    }

    /// Refuses, before any work, a distributed run on `grid` of a family that has none (Cholesky,
    /// LU and QR run on any grid; the others on one node).
    pub fn check_grid(self, grid: Option<ProcessGrid>) -> Result<()> {
        match grid {
            Some(_) if self.room().about.grid == Grid::None => Err(Error::InvalidOption {
                option: "factorization",
                reason: format!(
                    "distributed {} is not built yet: run it on one node (no --nodes or --grid)",
                    self.title()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The plans a run of an `m x n` matrix (m = n but for QR) in tiles of `tile` executes, in
    /// order, on a platform of `workers` workers beside `gpus` GPUs (QR's reduction tree depends on
    /// the workers, as a run's does; beside GPUs QR runs in block columns).
    pub fn plans(
        self,
        m: usize,
        n: usize,
        tile: usize,
        precision: Precision,
        (workers, gpus): (usize, usize),
    ) -> Result<Vec<Plan>> {
        let m = self.check_rows(Some(m).filter(|&m| m != n), n)?;
        let (shape, room) = (Shape { m, n, tile }, self.room());
        let place = Place { grid: None, gpus };
        let algorithms = match room.run_algorithms {
            Some(algorithms) => algorithms(place, shape, workers),
            None => vec![(room.algorithm)(place, shape)],
        };
        (algorithms.into_iter())
            .map(|algorithm| Plan::new(algorithm, tile, precision))
            .collect()
    }

    /// The plan a modelled command (`hetla simulate`, `bound`, `sweep`) builds of an `m x n` matrix
    /// (`m`: n when not given) in tiles of `tile`: the family's own graph (the inverse's alone, the
    /// factorisation being Cholesky's run before it), on `grid` the one its distributed run
    /// executes (QR's on one process row is LAPACK's blocked QR in block columns; LU's on more than
    /// one process row the tiled LU), and beside `gpus` GPUs the one a run there executes (QR's in
    /// block columns, MAGMA's hybrid, for m >= n).
    pub fn modelled_plan(
        self,
        (grid, gpus): (Option<ProcessGrid>, usize),
        (m, n, tile): (Option<usize>, usize, usize),
        precision: Precision,
    ) -> Result<Plan> {
        let m = self.check_rows(m, n)?;
        self.check_grid(grid)?;
        let algorithm = (self.room().algorithm)(Place { grid, gpus }, Shape { m, n, tile });
        Plan::new(algorithm, tile, precision)
    }

    /// The flops of an `m x n` matrix's run in `precision` (its plans' together).
    pub fn flops(self, m: usize, n: usize, precision: Precision) -> Result<f64> {
        // One tile: the counts are the plans', whatever the tiling.
        let plans = self.plans(m, n, m.max(n).max(1), precision, (1, 0))?;
        Ok(plans.iter().map(Plan::flops).sum())
    }

    /// The kernels the family's plans are modelled by (their tasks' keys' operations, those of 6 x
    /// 6 tiles, which have every one): what a platform model needs rates of.
    pub fn ops(self, precision: Precision) -> Result<Vec<Op>> {
        self.run_ops(precision, 0)
    }

    /// The kernels a run beside `gpus` GPUs executes (its plans' operations, as [`Family::ops`]):
    /// QR's panels and block reflectors in block columns beside GPUs, its tiled kernels without.
    pub fn run_ops(self, precision: Precision, gpus: usize) -> Result<Vec<Op>> {
        let mut ops: Vec<Op> = self
            .plans(6, 6, 1, precision, (1, gpus))?
            .iter()
            .flat_map(Plan::ops)
            .collect();
        ops.sort_by_key(|op| op.name());
        ops.dedup();
        Ok(ops)
    }

    /// Its operations a GPU may run in the plans a run beside `gpus` GPUs executes
    /// ([`Plan::gpu_ops`]: QR's and LDL^T's in block columns beside GPUs; the tiled ones keep their
    /// kernels on CPU clusters).
    pub fn gpu_ops(self, precision: Precision, gpus: usize) -> Result<Vec<Op>> {
        let mut ops: Vec<Op> = (self.plans(6, 6, 1, precision, (1, gpus))?.iter())
            .flat_map(Plan::gpu_ops)
            .collect();
        ops.sort_by_key(|op| op.name());
        ops.dedup();
        Ok(ops)
    }

    /// The cluster spec a user who gives none gets (Cholesky's `auto`; a cluster per core for the
    /// families whose panels are narrow steps on the critical path).
    pub fn default_clusters(self) -> ClusterSpec {
        (self.room().defaults)().0
    }

    /// The scheduler a user who gives none gets.
    pub fn default_scheduler(self) -> SchedulerKind {
        (self.room().defaults)().1
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
        (self.room().default_tile)(platform, Shape { m, n, tile: 0 }, precision)
    }

    /// Factors a random `m x n` matrix of the family's kind (SPD for Cholesky and the inverse,
    /// Hermitian indefinite for LDL^T, general otherwise: [`crate::matgen`]'s, from `seed`) on
    /// `platform` in tiles of `tile` with `scheduler`, in `precision`, and times the library's
    /// calls: what `hetla tune` and `hetla calibrate` measure. The plans are those of
    /// [`Family::plans`] for the platform's workers and GPUs.
    pub fn run(
        self,
        platform: &Arc<Platform>,
        (m, n): (usize, usize),
        tile: usize,
        scheduler: SchedulerKind,
        precision: Precision,
        seed: u64,
    ) -> Result<FamilyRun> {
        let on = (platform.workers().len(), platform.devices().len());
        let plans = self.plans(m, n, tile, precision, on)?;
        let job = Job {
            platform,
            shape: Shape { m, n, tile },
            scheduler,
            precision,
            seed,
        };
        let (seconds, traces) = (self.room().run)(&job, &plans)?;
        Ok(FamilyRun {
            seconds,
            traces: plans.into_iter().zip(traces).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_serialise_alike_and_rows_are_qr_s_alone() {
        for f in Family::ALL {
            assert_eq!(f.name().parse::<Family>().unwrap(), f);
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.name())
            );
        }
        assert!("potrf".parse::<Family>().is_err());
        assert_eq!(Family::Qr.check_rows(Some(9), 4).unwrap(), 9);
        assert_eq!(Family::Lu.check_rows(None, 4).unwrap(), 4);
        assert!(Family::Lu.check_rows(Some(9), 4).is_err());
        assert!(
            Family::Ldlt
                .check_grid(Some(ProcessGrid::new(1, 2).unwrap()))
                .is_err()
        );
        assert!(
            Family::Lu
                .check_grid(Some(ProcessGrid::new(2, 1).unwrap()))
                .is_ok()
        );
    }

    #[test]
    fn the_inverse_runs_cholesky_s_kernels_and_its_own() {
        let ops = Family::Inverse.ops(Precision::D).unwrap();
        for op in [Op::Potrf, Op::GemmNt, Op::Trtri, Op::Lauum] {
            assert!(ops.contains(&op), "{op} in {ops:?}");
        }
        let cholesky = Family::Cholesky.ops(Precision::D).unwrap();
        assert!(!cholesky.contains(&Op::Trtri));
    }
}
