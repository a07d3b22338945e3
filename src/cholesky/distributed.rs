//! The distributed Cholesky factorisation of a [`DistributedMatrix`], in place, and the distributed
//! solve with its factor ([`DistributedRhs`]).
//!
//! Every rank builds the same tiled task graph and keeps the tasks that write a tile it owns
//! ("owner computes", [`task_rank`](hetla_factorizations::task_rank)). It runs them on its own
//! hetla runtime (its clusters and GPUs, scheduled as on one node), while the calling thread moves
//! the tiles between ranks (the engine of `distributed/exchange.rs`, its module documentation says
//! how). The factorisation is one such run; the solve is two, the forward substitution L Y = B and
//! then the backward one L^T X = Y ([`Plan::distributed_substitution`]): each update runs on the
//! rank that holds its tile of L, into a partial sum there when the tile of B it updates lives
//! elsewhere, so that only B's tiles, the partial sums and L's diagonal tiles travel (O(n x nrhs)
//! words, not L's O(n^2)). Each sends one version of a tile to a rank, which is what one run
//! carries.

use hetla_factorizations::{FACTOR, ProcessGrid, Substitution};
use hetla_kernels::Precision;
use mpi::traits::Communicator;

use crate::distributed::exchange::{Panels, Share, agree_within, max_within, run_share, waiting};
use crate::distributed::matrix::{DistributedMatrix, DistributedRhs, non_finite};
use crate::distributed::run::{DistributedRun, DistributedSolve, substitutions};
use crate::distributed::wire::Wire;
use crate::{Cholesky, Plan, Result};

impl Cholesky {
    /// The tile of a distributed matrix of order `n` in `precision` on `grid` for this builder's
    /// runs: the one given, else the one rank 0 resolves as a run on one node would
    /// ([`Cholesky::tile_size_in`]: its platform's models, else the default tile), at most
    /// [`ProcessGrid::largest_tile`] (one node takes a matrix of order 512 or less as one tile,
    /// which would leave every rank but one idle); the same on every rank (each rank's models may
    /// differ). Collective: every rank calls it before building the matrix
    /// ([`DistributedMatrix::random_spd`] and the others take the tile).
    pub fn distributed_tile_in<C: Communicator>(
        &self,
        comm: &C,
        (n, grid): (usize, ProcessGrid),
        precision: Precision,
    ) -> Result<usize> {
        let mine = match comm.rank() {
            0 => self.tile_size_in(n, precision).min(grid.largest_tile(n)) as u64,
            _ => 0,
        };
        let agreed = max_within(comm, &[mine], waiting(&self.run), "the choice of the tile")?;
        Ok(agreed[0] as usize)
    }

    /// Factors the distributed matrix `a` in place (`a`'s tiles become L's), in its precision:
    /// collective, every rank of `comm` calls it with its part of `a` (see the module
    /// documentation). The tile size is `a`'s; each rank runs its tasks on this builder's platform
    /// (clusters, backend, GPUs) with its scheduler. A NaN or an infinity on any rank is refused on
    /// every rank before any work (that rank names the tile and the entry); on an error found
    /// during the run (a pivot that is not positive), `a`'s tiles are partly overwritten.
    pub fn factor_distributed<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        a: &mut DistributedMatrix<T>,
    ) -> Result<DistributedRun> {
        let tiling = a.tiling;
        let mut problem = None;
        if let Some(b) = self.tile.filter(|&b| b != tiling.tile()) {
            problem = Some(format!(
                "the tile size {b} is not the distributed matrix's ({})",
                tiling.tile()
            ));
        }
        if let Some(nan) = non_finite("A", a) {
            problem.get_or_insert(nan);
        }
        let platform = self.resolve_platform();
        if let Err(e) = &platform {
            problem.get_or_insert(format!("no platform: {e}"));
        }
        let share = Plan::new(
            crate::Algorithm::Cholesky { n: tiling.rows() },
            tiling.tile(),
            T::PRECISION,
        )
        .and_then(|plan| Share::new(plan, a.grid, a.rank));
        if let Err(e) = &share {
            problem.get_or_insert(e.to_string());
        }
        agree_within(comm, problem, waiting(&self.run), "the check of the inputs")?;
        let (platform, share) = (platform?, share?);
        let grid = a.grid;
        let out = run_share(
            &self.run,
            comm,
            &platform,
            &share,
            vec![(FACTOR, &mut a.tiles)],
            vec![],
            &Panels::None,
        )?;
        Ok(DistributedRun::of(out, share, (tiling, grid)))
    }

    /// Solves A X = B with the distributed factor `l` of A (from [`Cholesky::factor_distributed`]),
    /// overwriting the right-hand sides `b` with X: collective, every rank calls it with its parts.
    /// `b` must be on `l`'s grid with its tile size and rows; the forward and the backward
    /// substitution are one distributed run each (see the module documentation). On error `b` is
    /// partly overwritten.
    pub fn solve_distributed<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        l: &DistributedMatrix<T>,
        b: &mut DistributedRhs<T>,
    ) -> Result<DistributedSolve> {
        let platform = self.resolve_platform();
        let which = [Substitution::Lower, Substitution::LowerAdjoint];
        substitutions(&self.run, platform, comm, (l, None), b, &which, None)
    }
}
