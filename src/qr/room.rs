//! QR's place in the list of families ([`crate::Family`]).

use super::{Qr, QrTree};
use crate::family::room::{About, Grid, Job, Room, Shape};
use crate::{Algorithm, matgen};

/// Tiled Householder QR of an m x n matrix; on one process row, and beside GPUs for m >= n (as
/// [`Qr::plan`] on a platform with GPUs: MAGMA's hybrid), LAPACK's blocked QR in block columns
/// (inner blocks of [`Qr::DEFAULT_INNER_BLOCK`]), on more process rows the tiled QR with its tree
/// over the process column. A run resolves its tree for its platform's workers.
pub(crate) const ROOM: Room = Room {
    about: About::new("QR", "2 m n^2 - 2 n^3/3", true, Grid::OneRow),
    algorithm: |place, s| {
        let tiled = |tree| Algorithm::Qr {
            m: s.m,
            n: s.n,
            rhs: 0,
            tree,
        };
        match place.grid {
            Some(g) if g.rows() > 1 => tiled(QrTree::Domains(g.rows())),
            Some(_) => columns(s),
            None if place.gpus > 0 && s.m >= s.n => columns(s),
            None => tiled(QrTree::Auto),
        }
    },
    // Beside GPUs the block columns a run there executes (`hetla calibrate --gpus` times their
    // panels and applications on the devices inside such runs).
    run_algorithms: Some(|place, s, workers| {
        if place.gpus > 0 && s.m >= s.n {
            return vec![columns(s)];
        }
        let tiles = |x: usize| x.div_ceil(s.tile.max(1));
        let tree = QrTree::Auto.for_shape(tiles(s.m), tiles(s.n), workers);
        vec![Algorithm::Qr {
            m: s.m,
            n: s.n,
            rhs: 0,
            tree,
        }]
    }),
    defaults: Qr::family_defaults,
    default_tile: |on, s, _| Qr::new().platform(on.clone()).tile_size_for(s.m, s.n),
    run: |job, plans| {
        hetla_kernels::with_scalar!(job.precision, T => {
            let mut a = matgen::random_in::<T>(job.shape.m, job.shape.n, job.seed);
            Job::timed(|| Ok(vec![Qr::for_job(job).factor_planned(&plans[0], a.as_mut())?]))
        })
    },
};

/// LAPACK's blocked QR of the shape in block columns, inner blocks of [`Qr::DEFAULT_INNER_BLOCK`].
fn columns(s: Shape) -> Algorithm {
    Algorithm::QrColumns {
        m: s.m,
        n: s.n,
        rhs: 0,
        inner: Qr::DEFAULT_INNER_BLOCK,
    }
}
