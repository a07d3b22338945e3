//! The triangular inverse's place in the list of families ([`crate::Family`]).

use super::{TriangularInverse, random_lower};
use crate::Algorithm;
use crate::family::room::{About, Grid, Job, Room};

/// The inverse of a lower triangular matrix.
pub(crate) const ROOM: Room = Room {
    about: About::new("Triangular inverse", "n^3/3", false, Grid::None),
    algorithm: |_, s| Algorithm::TriangularInverse { n: s.n },
    run_algorithms: None,
    defaults: TriangularInverse::family_defaults,
    default_tile: |on, s, p| {
        TriangularInverse::new()
            .platform(on.clone())
            .tile_size_for(s.n, p)
    },
    run: |job, plans| {
        hetla_kernels::with_scalar!(job.precision, T => {
            let mut l = random_lower::<T>(job.shape.n, job.seed);
            let inverse = TriangularInverse::for_job(job);
            Job::timed(|| Ok(vec![inverse.invert_planned(&plans[0], l.as_mut())?]))
        })
    },
};
