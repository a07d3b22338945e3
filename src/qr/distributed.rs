//! The distributed Householder QR of a tall general [`DistributedMatrix`] (m >= n), in place:
//! [`Qr::factor_distributed`].
//!
//! It runs LAPACK's blocked QR as a task graph
//! ([`Algorithm::QrColumns`](crate::Algorithm::QrColumns): block columns of the tile's width, a
//! panel per block column factored into its reflectors, R block and T, an update per block column
//! right of it) on the distributed engine of `exchange.rs`, owner computes, as distributed LU does:
//! on a 1 x Q grid every tile of block column j lives on rank j mod Q, which assembles its block
//! columns, runs their tasks on its own runtime and sends each panel, once factored, to every rank
//! with a column right of it to update: the panel's rows from its diagonal down and its T, one
//! message per rank (ScaLAPACK's pdgeqrf broadcasts the panel's reflectors and T along its process
//! row). A panel is factored in inner blocks (the builder's, 32 columns by default: its T has that
//! many rows), each block's reflectors applied to the rest of the panel at once, as LAPACK's ?geqrt
//! does. The look-ahead is the graph's own: the update of block column k + 1 and its panel are on
//! the critical path, and the whole graph's bottom levels put them first.
//!
//! - **The result** is LAPACK's layout, in `a`'s tiles: R on and above the diagonal, the reflectors
//!   below; the T's stay with the run (a least-squares solve will carry B's columns in the same
//!   graph, [`hetla_factorizations::qr_columns`] with B, rather than apply them later).
//! - **Grids of more than one process row** (P x Q, P > 1) spread a block column over P ranks,
//!   where a block column's panel would cross the network for every column (ScaLAPACK's pdgeqrf
//!   reduces each column's norm over its process column). There the QR runs by tiles, 2D
//!   block-cyclic, with a communication-avoiding tree ([`QrTree::Domains`]: TSQR over the process
//!   column, CAQR with the updates): each process row eliminates its own tiles of tile column k on
//!   its top one (a flat tree of tile kernels, no message down the column), then the process rows'
//!   triangles are merged pairwise (log2 P merges on the diagonal's path), each run where the
//!   eliminated triangle lives: the surviving tops' tile rows travel to the merges' ranks and home
//!   (the engine's tiles written away from their owner, and versions back at their owner). Updates
//!   run where the tile they write lives and read their reflectors from the rank that made them: a
//!   tile whose reflectors a task on another rank applies carries their T (a rank may receive a
//!   domain top's tile QR version and then its merge's, each in a slot of its own). The result is
//!   the tiled QR's: R on and above the diagonal as LAPACK's, the reflectors below in the tree's
//!   layout (PLASMA's), the T's with the run.
//! - **Memory**: a rank holds its block columns (m x b each) while it runs, copied from its tiles
//!   before the clock starts and back after it stops; a received panel (its rows from the diagonal
//!   down) is held until its last reader on the rank ran.

use std::sync::OnceLock;

use hetla_factorizations::{FACTOR, QrTree, RHS, Substitution};
use mpi::traits::Communicator;

use crate::distributed::exchange::{
    Panels, Reflectors, Share, agree_within, carried_t, gather_within, run_share, travelling_ts,
    waiting,
};
use crate::distributed::matrix::{
    DistributedMatrix, DistributedRhs, block_column_problem, non_finite,
};
use crate::distributed::run::{DistributedRun, DistributedSolve, substitutions};
use crate::distributed::wire::Wire;
use crate::qr::work::ReflectorWork;
use crate::{Plan, Qr, Result};

impl Qr {
    crate::run::progress_timeout!();

    /// Factors the tall general distributed matrix `a` (m x n, m >= n) in place as Q R (its tiles
    /// become LAPACK's: R on and above the diagonal, the Householder reflectors below), in its
    /// precision: collective, every rank of `comm` calls it with its part of `a` (see the module
    /// documentation). On a 1 x Q grid the QR runs in block columns, on any other by tiles with the
    /// tree over the process column; the tile size is `a`'s (the block width), each panel or tile
    /// is factored in this builder's inner blocks (its T has as many rows), each rank runs its
    /// tasks on this builder's platform with its scheduler (the builder's tree is the shared-memory
    /// QR's and is not used). A NaN or an infinity on any rank, a lower-only or a wide matrix,
    /// another grid or a tile that is not `a`'s are refused on every rank before any work; on error
    /// `a` is unchanged.
    pub fn factor_distributed<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        a: &mut DistributedMatrix<T>,
    ) -> Result<DistributedRun> {
        self.factor_in_place(comm, a, None)
    }

    /// The least-squares solutions X (n x k) of the tall, full-rank distributed `a` (m x n, m >= n)
    /// for the right-hand sides `b` (m x k, on `a`'s grid with its tile): collective, as
    /// [`Qr::factor_distributed`], which it runs with B's block columns in the same graph (each
    /// panel's Q^H applied to them where they live), then R X = (Q^H B)'s first n rows by the
    /// distributed upper substitution (as LU's solve runs it). `a` is overwritten by its QR factor;
    /// `b` is read. Refused on every rank before any work as the factorisation is, and for
    /// right-hand sides on another grid, with another tile or other rows, or holding a NaN or an
    /// infinity; an R with a diagonal entry exactly zero (LAPACK ?gels's refusal) or at most max(m,
    /// n) eps times the largest (A not numerically of full rank) is [`crate::Error::RankDeficient`]
    /// with its column on every rank.
    pub fn least_squares_distributed<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        a: &mut DistributedMatrix<T>,
        b: &DistributedRhs<T>,
    ) -> Result<DistributedLeastSquares<T>> {
        let mut qb = b.clone();
        let run = self.factor_in_place(comm, a, Some(&mut qb))?;
        let n = a.tiling.cols();
        let r = a.top_rows(n)?;
        // An exactly zero diagonal entry of R (LAPACK ?gels's refusal), or one at most max(m, n)
        // eps times the largest (the one-node check's cutoff, read here on R's diagonal: the
        // condition estimate would need R's columns across ranks): A is not numerically of full
        // rank, refused with the same column on every rank before the substitution divides by it.
        let diagonal: Vec<(usize, f64)> = (r.tiles.iter())
            .filter(|&(&(i, j), _)| i == j)
            .flat_map(|(&(i, _), t)| {
                let k = t.nrows().min(t.ncols());
                (0..k).map(move |d| (r.tiling.offset(i) + d, t[(d, d)].abs_f64()))
            })
            .collect();
        let first = |cutoff: f64| {
            (diagonal.iter())
                .filter(|&&(_, v)| v <= cutoff)
                .map(|&(c, _)| c as u64)
                .min()
                .unwrap_or(u64::MAX)
        };
        let largest = diagonal.iter().map(|&(_, v)| v).fold(0.0, f64::max);
        let mine = [first(0.0), largest.to_bits()];
        let all = gather_within(comm, &mine, waiting(&self.run), "the check of R")?;
        let refuse = |column: Option<u64>| match column.filter(|&c| c != u64::MAX) {
            Some(column) => Err(crate::Error::RankDeficient {
                column: column as usize,
            }),
            None => Ok(()),
        };
        refuse(all.iter().map(|z| z[0]).min())?;
        let largest = all.iter().map(|z| f64::from_bits(z[1])).fold(0.0, f64::max);
        let m = a.tiling.rows();
        let cutoff = m.max(n) as f64 * T::PRECISION.epsilon() * largest;
        let negligible =
            gather_within(comm, &[first(cutoff)], waiting(&self.run), "the check of R")?;
        refuse(negligible.iter().map(|z| z[0]).min())?;
        let mut x = DistributedRhs(qb.0.top_rows(n)?);
        let which = [Substitution::Upper];
        let platform = self.resolve_platform();
        let solve = substitutions(&self.run, platform, comm, (&r, None), &mut x, &which, None)?;
        Ok(DistributedLeastSquares { run, solve, x })
    }

    /// The QR of `a` in place, by block columns on 1 x Q or by tiles on other grids, with `b`
    /// overwritten by Q^H B when given (see [`Qr::factor_distributed`]).
    fn factor_in_place<T: Wire, C: Communicator>(
        &self,
        comm: &C,
        a: &mut DistributedMatrix<T>,
        mut b: Option<&mut DistributedRhs<T>>,
    ) -> Result<DistributedRun> {
        let (tiling, grid) = (a.tiling, a.grid);
        let (m, n) = (tiling.rows(), tiling.cols());
        let wide = (m < n).then(|| {
            format!(
                "the matrix is {m} x {n}: a distributed QR factors one with at least as many rows as columns"
            )
        });
        let mut problem = block_column_problem(a, ("QR", true), wide, self.tile);
        let bt = b.as_ref().map(|b| b.0.tiling);
        let shaped = bt.map(|t| (t.rows(), t.tile())) == Some((m, tiling.tile()));
        if let Some(b) = b.as_ref().filter(|b| b.0.grid != grid || !shaped) {
            problem.get_or_insert(format!(
                "the right-hand sides are {} x {} in tiles of {} on a {} grid; A is {m} x {n} in tiles of {} on a {grid} grid: B needs A's rows, tile and grid",
                b.0.tiling.rows(),
                b.0.tiling.cols(),
                b.0.tiling.tile(),
                b.0.grid,
                tiling.tile()
            ));
        }
        if let Some(nan) = b.as_ref().and_then(|b| non_finite("B", &b.0)) {
            problem.get_or_insert(nan);
        }
        let platform = self.resolve_platform();
        if let Err(e) = &platform {
            problem.get_or_insert(format!("no platform: {e}"));
        }
        let rhs = bt.map_or(0, |t| t.cols());
        // One process column: by tiles, the tree over it (see the module documentation).
        let tiled = grid.rows() > 1;
        let plan = match tiled {
            false => Plan::new(
                crate::Algorithm::QrColumns {
                    m,
                    n,
                    rhs,
                    inner: self.inner,
                },
                tiling.tile(),
                T::PRECISION,
            ),
            // Without right-hand sides (rhs 0), the factorisation alone.
            true => {
                let tree = QrTree::Domains(grid.rows());
                Plan::new(
                    crate::Algorithm::Qr { m, n, rhs, tree },
                    tiling.tile(),
                    T::PRECISION,
                )
            }
        };
        // A tile's message carries the T of the reflectors its version's task made there.
        // A tile's message carries the T of the reflectors its version's task made there, when a
        // task on another rank applies them.
        let travel = match (&plan, tiled) {
            (Ok(plan), true) => travelling_ts(plan, &grid),
            _ => Default::default(),
        };
        let carries = (tiling, self.inner, &travel);
        let t_bytes = |plan: &Plan, m: &hetla_factorizations::Message| {
            carried_t::<T>(plan, carries, m.tile, m.version)
                .map_or(0, |(_, (r, c))| r * c * size_of::<T>())
        };
        let share = plan.and_then(|plan| Share::carrying(plan, grid, a.rank, t_bytes));
        if let (None, Err(e)) = (&problem, &share) {
            problem = Some(e.to_string());
        }
        let timeout = waiting(&self.run);
        agree_within(comm, problem, timeout, "the check of the inputs")?;
        let (platform, share) = (platform?, share?);

        // This rank's block columns, assembled from its tiles, or a copy of its tiles (before the
        // clock): `a` and `b` change only once the run succeeded.
        let (mut columns, mut b_columns) = match tiled {
            true => (a.tiles.clone(), b.as_ref().map(|b| b.0.tiles.clone())),
            false => (a.block_columns(), b.as_ref().map(|b| b.0.block_columns())),
        };
        let ts: Vec<OnceLock<faer::Mat<T>>> = (0..ReflectorWork::<T>::slots(&tiling))
            .map(|_| OnceLock::new())
            .collect();
        let reflectors = Panels::Reflectors(Reflectors {
            tiling,
            inner: self.inner,
            ts: &ts,
            columns: !tiled,
            travel: &travel,
        });
        let mut written = vec![(FACTOR, &mut columns)];
        if let Some(b_columns) = b_columns.as_mut() {
            written.push((RHS, b_columns));
        }
        let out = run_share(
            &self.run,
            comm,
            &platform,
            &share,
            written,
            vec![],
            &reflectors,
        )?;
        match tiled {
            true => a.tiles = columns,
            false => a.copy_from_block_columns(&columns),
        }
        if let (Some(b), Some(b_columns)) = (b.as_mut(), b_columns) {
            match tiled {
                true => b.0.tiles = b_columns,
                false => b.0.copy_from_block_columns(&b_columns),
            }
        }
        Ok(DistributedRun::of(out, share, (tiling, grid)))
    }
}

/// What a distributed least-squares solve computed and measured.
#[derive(Debug, Clone)]
pub struct DistributedLeastSquares<T: Wire = f64> {
    /// The QR factorisation with Q^H B in the same graph: seconds of the slowest rank, its flops (2
    /// m n^2 - 2 n^3 / 3 + (4 m n - 2 n^2) k, times 4 in a complex precision), bytes by rank beside
    /// the panels' count.
    pub run: DistributedRun,
    /// The upper substitution R X = (Q^H B)'s first n rows.
    pub solve: DistributedSolve,
    /// The solutions (n x k), distributed as B's first n rows.
    pub x: DistributedRhs<T>,
}
