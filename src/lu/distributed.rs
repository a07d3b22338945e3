//! The distributed LU factorisation with partial pivoting of a general [`DistributedMatrix`], in
//! place: [`Lu::factor_distributed`].
//!
//! It runs LU's own task graph ([`Algorithm::Lu`](crate::Algorithm::Lu): block columns of the
//! tile's width, a panel per block column, an update per block column right of it, an interchange
//! task per block column left of it) on the distributed engine of `exchange.rs`, owner computes: on
//! a 1 x Q grid every tile of block column j lives on rank j mod Q, which assembles its block
//! columns, runs their tasks on its own runtime (its clusters, its scheduler) and sends each panel,
//! once factored, to every rank with a column to update or to swap: the panel's rows from its
//! diagonal down and its interchanges, one message per rank (ScaLAPACK's pdgetrf broadcasts the
//! same panel along its process row). The look-ahead is the graph's own: the update of block column
//! k + 1 and its panel are on the critical path, and the bottom levels of the whole graph (the
//! priorities every rank schedules by) put them first, so the owner of the next panel factors it
//! while the other ranks still update.
//!
//! - **Interchanges**: each rank keeps the list of all of them, filled by its own panels and by the
//!   panels it receives (each message carries its own); at the end the ranks agree on it (an
//!   element-wise maximum: a row is swapped with one at or below it), so every rank returns the
//!   same [`DistributedLu::ipiv`].
//! - **A zero pivot** is not an error, as in LAPACK: the factorisation completes, and every rank
//!   returns the first column whose pivot was exactly zero ([`DistributedLu::singular`]), found on
//!   whichever rank factored that panel.
//! - **Grids of several process rows** (P x Q, P > 1) run the tiled LU instead
//!   ([`Algorithm::LuTiles`](crate::Algorithm::LuTiles), b x b tiles 2D block-cyclic, no assembly):
//!   each panel is one task where its diagonal tile lives, to which the tiles of its column below
//!   travel and from which they travel on, factored, to the ranks that update their rows (their
//!   owners among them: the engine's versions back at their owner); the step's interchanges are a
//!   tile of their own that every rank moving rows receives; an interchange between process rows
//!   moves two tiles a column and other process row (an exchange tile of the rows going up, the old
//!   top tile for the rows going down), whatever the pivots. The solve then gathers B's few columns
//!   on every rank to interchange its rows (an element-wise maximum of the entries' bits, B having
//!   n k entries), before the same substitutions.
//! - **The solve** ([`Lu::solve_distributed`]): B's rows are interchanged where they live (on a 1 x
//!   Q grid a rank holds whole tile columns of B; see above for P > 1), then the forward
//!   substitution with L's unit lower triangle and the backward one with U run as Cholesky's two
//!   substitutions do, the factor's b x b tiles (in `a` after the factorisation) never travelling:
//!   each update runs where its tile of L or U is, into a partial sum there, and only B's tiles,
//!   the partial sums and the diagonal tiles move.
//! - **Memory**: a rank holds its block columns (n x b each) while it runs, copied from its tiles
//!   before the clock starts and back after it stops; a received panel is held until its last
//!   reader on the rank ran. By tiles, a copy of its tiles (its matrix changes only once the run
//!   succeeded), its exchange tiles (one a block column it owns) and the received tiles until their
//!   last reader ran.

use std::sync::atomic::AtomicUsize;

use hetla_factorizations::{EXCHANGE, FACTOR, PIVOTS, Substitution};
use mpi::traits::Communicator;

use crate::distributed::exchange::{
    Panels, Pivots, Share, agree_within, max_within, run_share, waiting,
};
use crate::distributed::matrix::{DistributedMatrix, DistributedRhs, block_column_problem};
use crate::distributed::run::{DistributedRun, DistributedSolve, substitutions};
use crate::distributed::wire::Wire;
use crate::{Lu, Plan, Result};

/// The largest order a distributed LU factors: its interchanges travel as whole numbers in the
/// precision's parts, exact below 2^24 in `f32`.
const MAX_ORDER: usize = 1 << 24;

/// What a distributed LU factorisation measured and found, the same on every rank but for the
/// trace.
#[derive(Debug, Clone)]
pub struct DistributedLu {
    /// The run: seconds of the slowest rank, 2 n^3 / 3 flops (times 4 in a complex precision), this
    /// rank's trace, the bytes every rank sent beside the count of the panels' messages.
    pub run: DistributedRun,
    /// The interchanges, 0-based and global: row i was swapped with row `ipiv[i]` (LAPACK's
    /// ?getrf's, less one), on every rank.
    pub ipiv: Vec<usize>,
    /// The first column whose pivot was exactly zero (the factor is complete; a solve with it would
    /// divide by zero), on every rank.
    pub singular: Option<usize>,
}

impl DistributedLu {
    /// The probed scaled residual of this factorisation's factor `lu` of `a` (LAPACK's dget01
    /// ratio ||P A - L U||_1 / (n ||A||_1 eps) probed with random columns where the tiles live, see
    /// [`probed_residual`](crate::distributed::probed_residual)): collective, the same value on
    /// every rank.
    pub fn probed_residual<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        a: &DistributedMatrix<T>,
        lu: &DistributedMatrix<T>,
        seed: u64,
    ) -> Result<f64> {
        crate::distributed::check::probed_lu_residual(comm, a, lu, &self.ipiv, seed)
    }
}

impl Lu {
    crate::run::progress_timeout!();

    /// Factors the general, square distributed matrix `a` in place as P A = L U (its tiles become
    /// L's and U's, as ScaLAPACK's p?getrf leaves them), in its precision: collective, every rank
    /// of `comm` calls it with its part of `a` (see the module documentation), on any grid; the
    /// tile size is `a`'s (the block width of the LU), each rank runs its tasks on this builder's
    /// platform with its scheduler. On error `a` is unchanged.
    pub fn factor_distributed<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        a: &mut DistributedMatrix<T>,
    ) -> Result<DistributedLu> {
        let (tiling, grid) = (a.tiling, a.grid);
        let n = tiling.rows();
        let shape = if tiling.cols() != n {
            Some(format!(
                "the matrix is {n} x {}: LU factors a square one",
                tiling.cols()
            ))
        } else if n >= MAX_ORDER {
            Some(format!(
                "the order {n} is too large: a distributed LU's interchanges travel exactly below {MAX_ORDER}"
            ))
        } else {
            None
        };
        let mut problem = block_column_problem(a, ("LU", true), shape, self.tile);
        let platform = self.resolve_platform();
        if let Err(e) = &platform {
            problem.get_or_insert(format!("no platform: {e}"));
        }
        // One process row: by block columns; else by tiles (see the module documentation).
        let tiled = grid.rows() > 1;
        let plan = match tiled {
            false => Plan::new(crate::Algorithm::Lu { n }, tiling.tile(), T::PRECISION),
            true => Plan::new(
                crate::Algorithm::LuTiles {
                    n,
                    process_rows: grid.rows(),
                },
                tiling.tile(),
                T::PRECISION,
            ),
        };
        let share = plan.and_then(|plan| Share::new(plan, grid, a.rank));
        if let (None, Err(e)) = (&problem, &share) {
            problem = Some(e.to_string());
        }
        let timeout = waiting(&self.run);
        agree_within(comm, problem, timeout, "the check of the inputs")?;
        let (platform, share) = (platform?, share?);

        // This rank's block columns, assembled from its tiles, or a copy of its tiles with its
        // pivots and exchange tiles (before the clock): `a` changes only once the run succeeded.
        let mut columns = match tiled {
            false => a.block_columns(),
            true => a.tiles.clone(),
        };
        // The tiled LU's work space (none by block columns).
        let (mut pivot_tiles, mut exchange) = match tiled {
            false => Default::default(),
            true => (share.scratch::<T>(PIVOTS), share.scratch::<T>(EXCHANGE)),
        };
        let ipiv: Vec<AtomicUsize> = (0..n).map(AtomicUsize::new).collect();
        let zero = AtomicUsize::new(usize::MAX);
        let pivots = Pivots {
            tiling,
            ipiv: &ipiv,
            zero: &zero,
        };
        let (written, pivots) = match tiled {
            false => (vec![(FACTOR, &mut columns)], Panels::Interchanges(pivots)),
            true => (
                vec![
                    (FACTOR, &mut columns),
                    (PIVOTS, &mut pivot_tiles),
                    (EXCHANGE, &mut exchange),
                ],
                Panels::TiledInterchanges(pivots, grid.rows()),
            ),
        };
        let out = run_share(&self.run, comm, &platform, &share, written, vec![], &pivots)?;

        // The same interchanges and first zero pivot on every rank, in one element-wise maximum:
        // each rank's list holds its own panels' interchanges and those it received (the others
        // are still i, and a row is swapped with one at or below it); the last entry is u64::MAX
        // less its first zero pivot, so that the maximum is the smallest column.
        let zero = match zero.into_inner() {
            usize::MAX => u64::MAX,
            column => column as u64,
        };
        let mine: Vec<u64> = (ipiv.into_iter().map(|p| p.into_inner() as u64))
            .chain([u64::MAX - zero])
            .collect();
        let mut agreed = max_within(comm, &mine, timeout, "the agreement on the interchanges")?;
        let first_zero = agreed.pop().map_or(u64::MAX, |z| u64::MAX - z);

        match tiled {
            false => a.copy_from_block_columns(&columns),
            true => a.tiles = columns,
        }
        Ok(DistributedLu {
            run: DistributedRun::of(out, share, (tiling, grid)),
            ipiv: agreed.into_iter().map(|p| p as usize).collect(),
            singular: (first_zero != u64::MAX).then_some(first_zero as usize),
        })
    }

    /// Solves A X = B with the distributed LU factor `lu` of A (the matrix
    /// [`Lu::factor_distributed`] factored, with what it returned), overwriting the right-hand
    /// sides `b` with X: collective, every rank calls it with its parts. `b` must be on `lu`'s grid
    /// with its tile size and rows; a factor with a zero pivot is refused
    /// ([`crate::Error::Singular`]) on every rank before any work. See the module documentation for
    /// how it runs. On error `b` is partly overwritten.
    pub fn solve_distributed<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        lu: &DistributedMatrix<T>,
        factored: &DistributedLu,
        b: &mut DistributedRhs<T>,
    ) -> Result<DistributedSolve> {
        if let Some(column) = factored.singular {
            // The same on every rank (agreed by the factorisation).
            return Err(crate::Error::Singular { column });
        }
        let n = lu.tiling.rows();
        let mut problem = None;
        if lu.lower || lu.tiling.cols() != n {
            problem = Some("the factor is not a square general matrix (every tile held)".into());
        } else if factored.ipiv.len() != n
            || factored
                .ipiv
                .iter()
                .enumerate()
                .any(|(i, &p)| p < i || p >= n)
        {
            problem = Some(format!(
                "the interchanges are not those of an LU of order {n}: {} of them",
                factored.ipiv.len()
            ));
        }
        let which = [Substitution::UnitLower, Substitution::Upper];
        let factor = (lu, Some(&factored.ipiv[..]));
        substitutions(
            &self.run,
            self.resolve_platform(),
            comm,
            factor,
            b,
            &which,
            problem,
        )
    }
}
