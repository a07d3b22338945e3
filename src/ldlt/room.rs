//! LDL^T's place in the list of families ([`crate::Family`]).

use super::Ldlt;
use crate::family::room::{About, Grid, Job, Room};
use crate::{Algorithm, matgen};

/// Aasen's symmetric indefinite factorisation in blocks; beside GPUs in block columns (as
/// [`Ldlt::plan`] on a platform with GPUs: its products and interchanges on the GPUs).
pub(crate) const ROOM: Room = Room {
    about: About::new("LDL^T", "n^3/3", false, Grid::None),
    algorithm: |place, s| match place.gpus {
        0 => Algorithm::Ldlt { n: s.n },
        _ => Algorithm::LdltColumns { n: s.n },
    },
    run_algorithms: None,
    defaults: Ldlt::family_defaults,
    default_tile: |on, s, p| Ldlt::new().platform(on.clone()).tile_size_for(s.n, p),
    run: |job, plans| {
        hetla_kernels::with_scalar!(job.precision, T => {
            let a = matgen::random_hermitian::<T>(job.shape.n, job.seed);
            Job::timed(|| Ok(vec![Ldlt::for_job(job).factor_planned(&plans[0], a.as_ref())?.0]))
        })
    },
};
