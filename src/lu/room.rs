//! LU's place in the list of families ([`crate::Family`]).

use super::Lu;
use crate::family::room::{About, Grid, Job, Room};
use crate::{Algorithm, matgen};

/// LU with partial pivoting in block columns; on more than one process row, the tiled LU with its
/// interchanges between process rows.
pub(crate) const ROOM: Room = Room {
    about: About::new("LU", "2 n^3/3", false, Grid::OneRow),
    algorithm: |place, s| match place.grid {
        Some(g) if g.rows() > 1 => Algorithm::LuTiles {
            n: s.n,
            process_rows: g.rows(),
        },
        _ => Algorithm::Lu { n: s.n },
    },
    run_algorithms: None,
    defaults: Lu::family_defaults,
    default_tile: |on, s, _| Lu::new().platform(on.clone()).tile_size_for(s.n),
    run: |job, plans| {
        hetla_kernels::with_scalar!(job.precision, T => {
            let mut a = matgen::random_in::<T>(job.shape.m, job.shape.n, job.seed);
            Job::timed(|| Ok(vec![Lu::for_job(job).factor_planned(&plans[0], a.as_mut())?.0]))
        })
    },
};
