//! QR's place in the list of families ([`crate::Family`]).

use std::sync::Arc;

use hetla_clusters::ClusterSpec;
use hetla_factorizations::ProcessGrid;
use hetla_kernels::{Precision, Scalar};
use hetla_runtime::{Platform, SchedulerKind, Trace};

use super::{DEFAULT_QR_INNER_BLOCK, Qr, QrTree};
use crate::family::{Job, Room, Shape};
use crate::{Plan, Result, matgen};

/// Tiled Householder QR of an m x n matrix.
pub(crate) struct QrRoom;

impl Room for QrRoom {
    fn title(&self) -> &'static str {
        "QR"
    }

    fn flops_formula(&self) -> &'static str {
        "2 m n^2 - 2 n^3/3"
    }

    fn takes_rows(&self) -> bool {
        true
    }

    fn distributed(&self) -> bool {
        true
    }

    fn on_one_process_row(&self) -> bool {
        true
    }

    /// The reduction tree a run on `workers` workers resolves.
    fn plans(&self, s: Shape, precision: Precision, workers: usize) -> Result<Vec<Plan>> {
        let tiles = |x: usize| x.div_ceil(s.tile.max(1));
        let tree = QrTree::Auto.for_shape(tiles(s.m), tiles(s.n), workers);
        Ok(vec![Plan::new(
            crate::Algorithm::Qr {
                m: s.m,
                n: s.n,
                rhs: 0,
                tree,
            },
            s.tile,
            precision,
        )?])
    }

    /// On one process row, LAPACK's blocked QR in block columns (`hetla qr --grid`'s, inner blocks
    /// of [`DEFAULT_QR_INNER_BLOCK`]); on more, the tiled QR with its tree over the process column.
    fn modelled_plan(&self, grid: Option<ProcessGrid>, s: Shape, p: Precision) -> Result<Plan> {
        let Shape { m, n, tile } = s;
        match grid {
            Some(g) if g.rows() > 1 => Plan::new(
                crate::Algorithm::Qr {
                    m,
                    n,
                    rhs: 0,
                    tree: QrTree::Domains(g.rows()),
                },
                tile,
                p,
            ),
            Some(_) => Plan::new(
                crate::Algorithm::QrColumns {
                    m,
                    n,
                    rhs: 0,
                    inner: DEFAULT_QR_INNER_BLOCK,
                },
                tile,
                p,
            ),
            None => Plan::new(
                crate::Algorithm::Qr {
                    m,
                    n,
                    rhs: 0,
                    tree: QrTree::Auto,
                },
                tile,
                p,
            ),
        }
    }

    fn defaults(&self) -> (ClusterSpec, SchedulerKind) {
        let qr = Qr::new();
        (qr.cluster_spec().clone(), qr.scheduler_kind())
    }

    fn default_tile(&self, platform: &Arc<Platform>, m: usize, n: usize, _: Precision) -> usize {
        Qr::new().platform(platform.clone()).tile_size_for(m, n)
    }

    fn run(&self, job: &Job<'_>, plans: &[Plan]) -> Result<(f64, Vec<Trace>)> {
        fn run_in<T: Scalar>(job: &Job<'_>, plan: &Plan) -> Result<(f64, Vec<Trace>)> {
            let Shape { m, n, tile } = job.shape;
            let mut a = matgen::random_in::<T>(m, n, job.seed);
            let qr = Qr::new().platform(job.platform.clone()).tile(tile);
            let qr = qr.scheduler(job.scheduler);
            let (s, trace) = Job::timed(|| qr.factor_planned(plan, a.as_mut()))?;
            Ok((s, vec![trace]))
        }
        hetla_kernels::with_scalar!(job.precision, T => run_in::<T>(job, &plans[0]))
    }
}
