//! Cholesky's and the inverse's places in the list of families ([`crate::Family`]).

use super::Cholesky;
use crate::family::room::{About, Grid, Job, Room};
use crate::{Algorithm, matgen};

/// Tiled Cholesky.
pub(crate) const CHOLESKY: Room = Room {
    about: About::new("Cholesky", "n^3/3", false, Grid::Any),
    algorithm: |_, s| Algorithm::Cholesky { n: s.n },
    run_algorithms: None,
    defaults: Cholesky::family_defaults,
    default_tile: |on, s, p| Cholesky::new().platform(on.clone()).tile_size_in(s.n, p),
    run: |job, plans| {
        hetla_kernels::with_scalar!(job.precision, T => {
            let mut a = matgen::random_hpd::<T>(job.shape.n, job.seed);
            Job::timed(|| Ok(vec![Cholesky::for_job(job).factor_planned(&plans[0], a.as_mut())?]))
        })
    },
};

/// Cholesky, then the inverse from its factor (Cholesky's defaults).
pub(crate) const INVERSE: Room = Room {
    about: About::new("Cholesky + inverse", "n^3", false, Grid::None),
    algorithm: |_, s| Algorithm::CholeskyInverse { n: s.n },
    run_algorithms: Some(|_, s, _| {
        let n = s.n;
        vec![Algorithm::Cholesky { n }, Algorithm::CholeskyInverse { n }]
    }),
    run: |job, plans| {
        hetla_kernels::with_scalar!(job.precision, T => {
            let a = matgen::random_hpd::<T>(job.shape.n, job.seed);
            Job::timed(|| {
                // The factorisation by the family's own plan (a platform's default plan may add
                // panel inverses), so that its trace is that plan's tasks.
                let builder = Cholesky::for_job(job);
                let (factor, factored) = builder.factor_owned_planned(&plans[0], a)?;
                let (_, inverted) = factor.inverse_traced()?;
                Ok(std::iter::once(factored).chain(inverted).collect())
            })
        })
    },
    ..CHOLESKY
};
