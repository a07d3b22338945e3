//! The distributed Cholesky factorisation of a [`DistributedMatrix`], in place, and the distributed
//! solve with its factor ([`DistributedRhs`]).
//!
//! Every rank builds the same tiled task graph and keeps the tasks that write a tile it owns
//! ("owner computes", [`task_rank`](hetla_factorizations::task_rank)). It runs them on its own
//! hetla runtime (its clusters and GPUs, scheduled as on one node), while the calling thread moves
//! the tiles between ranks (the engine of `exchange.rs`, its module documentation says how). The
//! factorisation is one such run; the solve is two, the forward substitution L Y = B and then the
//! backward one L^T X = Y ([`Plan::distributed_substitution`]): each update runs on the rank that
//! holds its tile of L, into a partial sum there when the tile of B it updates lives elsewhere, so
//! that only B's tiles, the partial sums and L's diagonal tiles travel (O(n x nrhs) words, not L's
//! O(n^2)). Each sends one version of a tile to a rank, which is what one run carries.

use std::sync::Arc;

use hetla_factorizations::{FACTOR, ProcessGrid, RHS, SUMS, Substitution, Tiling};
use hetla_kernels::Precision;
use hetla_runtime::{Platform, Trace};
use mpi::traits::Communicator;

use super::exchange::{
    Outcome, Panels, Share, agree_within, gather_within, max_within, run_share, waiting,
};
use super::matrix::{DistributedMatrix, DistributedRhs, non_finite};
use super::wire::Wire;
use crate::run::RunConfig;
use crate::{Cholesky, Plan, Result};

/// What a distributed factorisation measured.
#[derive(Debug, Clone)]
pub struct DistributedRun {
    /// Seconds from the run's start (every rank past the agreement that starts it) to the end of
    /// the slowest rank's run (its last task and its last send), the same on every rank.
    pub seconds: f64,
    /// Floating-point operations of the whole factorisation (Cholesky's n^3 / 3, LU's 2 n^3 / 3,
    /// times 4 in a complex precision).
    pub flops: f64,
    /// The factorisation it ran (its plan's algorithm).
    pub algorithm: crate::Algorithm,
    /// This rank's run: its tasks on its workers.
    pub trace: Trace,
    /// Tiles this rank sent (one message each), and their bytes (entries only).
    pub tiles_sent: usize,
    /// Bytes of the entries of the tiles this rank sent.
    pub bytes_sent: usize,
    /// Bytes every rank sent, by rank (gathered from the ranks' own counts).
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by [`messages`](hetla_factorizations::messages)' count: the 2D
    /// block-cyclic formula's.
    pub bytes_expected_by_rank: Vec<usize>,
    /// The factored matrix's tiling.
    pub tiling: Tiling,
    /// The process grid it ran on.
    pub grid: hetla_factorizations::ProcessGrid,
    /// The precision it computed in.
    pub precision: Precision,
    /// The plan it ran (its bounds are this plan's, [`DistributedRun::bounds`]).
    pub(crate) plan: crate::Plan,
}

impl DistributedRun {
    /// The run of `share`'s plan of a matrix tiled by `tiling` on `grid`, as every rank agreed it
    /// ended (`out`).
    pub(super) fn of(
        out: Outcome,
        share: Share,
        (tiling, grid): (Tiling, hetla_factorizations::ProcessGrid),
    ) -> Self {
        let plan = &share.plan;
        Self {
            seconds: out.seconds,
            flops: plan.flops(),
            algorithm: plan.algorithm(),
            trace: out.trace,
            tiles_sent: out.exchanged.tiles_sent,
            bytes_sent: out.exchanged.bytes_sent,
            bytes_sent_by_rank: out.bytes_sent_by_rank,
            tiling,
            grid,
            precision: plan.precision(),
            bytes_expected_by_rank: share.bytes_expected,
            plan: share.plan,
        }
    }

    /// Gflop/s of the factorisation: flops over the slowest rank's seconds.
    pub fn gflops(&self) -> f64 {
        self.flops / self.seconds / 1e9
    }
}

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

/// The substitutions `which` (in order) of a distributed solve with the factor `f` over the
/// right-hand sides `b`, one distributed run each, after the caller's checks (`problem`, agreed
/// here with the others); with `interchanges`, B's rows are interchanged by them first (each rank
/// holds whole tile columns of B: a grid of one process row).
pub(super) fn substitutions<T: Wire, C: Communicator>(
    run: &RunConfig,
    platform: Result<Arc<Platform>>,
    comm: &C,
    (f, interchanges): (&DistributedMatrix<T>, Option<&[usize]>),
    b: &mut DistributedRhs<T>,
    which: &[Substitution],
    mut problem: Option<String>,
) -> Result<DistributedSolve> {
    let (lt, bt) = (f.tiling, b.0.tiling);
    if b.0.grid != f.grid {
        problem.get_or_insert(format!(
            "the right-hand sides are on a {} grid, the factor on a {} grid",
            b.0.grid, f.grid
        ));
    } else if (bt.rows(), bt.tile()) != (lt.rows(), lt.tile()) {
        problem.get_or_insert(format!(
            "the right-hand sides have {} rows in tiles of {}, the factor is of order {} in tiles of {}",
            bt.rows(),
            bt.tile(),
            lt.rows(),
            lt.tile()
        ));
    }
    if let Err(e) = &platform {
        problem.get_or_insert(format!("no platform: {e}"));
    }
    let grid = f.grid;
    let shares: Vec<_> = which
        .iter()
        .map(|&which| {
            let algorithm = crate::Algorithm::DistributedSubstitution {
                n: lt.rows(),
                rhs: bt.cols(),
                grid,
                substitution: which,
            };
            Plan::new(algorithm, lt.tile(), T::PRECISION)
                .and_then(|plan| Share::new(plan, grid, f.rank))
        })
        .collect();
    for share in &shares {
        if let (None, Err(e)) = (&problem, share) {
            problem = Some(e.to_string());
        }
    }
    let timeout = waiting(run);
    agree_within(comm, problem, timeout, "the check of the inputs")?;
    let platform = platform?;
    let mut solve = DistributedSolve {
        seconds: 0.0,
        flops: 2.0 * (lt.rows() as f64).powi(2) * bt.cols() as f64 * T::PRECISION.flop_factor(),
        bytes_sent_by_rank: vec![0; grid.size()],
        bytes_expected_by_rank: vec![0; grid.size()],
    };
    if let Some(ipiv) = interchanges {
        let start = std::time::Instant::now();
        match grid.rows() {
            1 => interchange_rows(&mut b.0, ipiv),
            _ => interchange_rows_across(comm, &mut b.0, ipiv, timeout)?,
        }
        let mine = start.elapsed().as_secs_f64().to_bits();
        let all = gather_within(comm, &[mine], timeout, "the end of the interchanges")?;
        solve.seconds = all.iter().map(|r| f64::from_bits(r[0])).fold(0.0, f64::max);
    }
    for share in shares {
        let share = share?;
        let mut sums = share.zero_sums::<T>();
        let written = vec![(RHS, &mut b.0.tiles), (SUMS, &mut sums)];
        let read = vec![(FACTOR, &f.tiles)];
        let out = run_share(run, comm, &platform, &share, written, read, &Panels::None)?;
        solve.seconds += out.seconds;
        for (r, (sent, expected)) in out
            .bytes_sent_by_rank
            .iter()
            .zip(&share.bytes_expected)
            .enumerate()
        {
            solve.bytes_sent_by_rank[r] += sent;
            solve.bytes_expected_by_rank[r] += expected;
        }
    }
    Ok(solve)
}

/// Interchanges the rows of this rank's tile columns of `b` as `ipiv` says (row i with row
/// `ipiv[i]`, in order), where the rank holds every tile of each (one process row).
fn interchange_rows<T: Wire>(b: &mut DistributedMatrix<T>, ipiv: &[usize]) {
    let t = b.tiling;
    let columns: std::collections::BTreeSet<usize> = b.tiles.keys().map(|&(_, c)| c).collect();
    for c in columns {
        for (i, &p) in ipiv.iter().enumerate().filter(|(i, p)| i != *p) {
            let (ti, tp) = (i / t.tile(), p / t.tile());
            let (ri, rp) = (i - t.offset(ti), p - t.offset(tp));
            let (Some(x), Some(y)) = (b.tiles.get(&(ti, c)), b.tiles.get(&(tp, c))) else {
                continue;
            };
            let (x, y) = (x.row(ri).to_owned(), y.row(rp).to_owned());
            if let Some(m) = b.tiles.get_mut(&(ti, c)) {
                m.row_mut(ri).copy_from(&y);
            }
            if let Some(m) = b.tiles.get_mut(&(tp, c)) {
                m.row_mut(rp).copy_from(&x);
            }
        }
    }
}

/// [`interchange_rows`] on a grid of several process rows, where an interchange moves a row between
/// ranks: every rank's tiles of B are combined into all of B on every rank (an element-wise maximum
/// of the entries' bits, each entry nonzero on its owner alone), interchanged there, and each rank
/// keeps its tiles. B has few columns: n k entries, each as two 64-bit words (its real and
/// imaginary parts, exact in every precision).
fn interchange_rows_across<T: Wire, C: Communicator>(
    comm: &C,
    b: &mut DistributedMatrix<T>,
    ipiv: &[usize],
    timeout: std::time::Duration,
) -> Result<()> {
    let t = b.tiling;
    let (n, k) = (t.rows(), t.cols());
    let at = |row: usize, col: usize| 2 * (col * n + row);
    let mut mine = vec![0u64; 2 * n * k];
    for (&(i, j), m) in &b.tiles {
        for c in 0..m.ncols() {
            for r in 0..m.nrows() {
                let x = m[(r, c)].to_c64();
                let w = at(t.offset(i) + r, t.offset(j) + c);
                (mine[w], mine[w + 1]) = (x.re.to_bits(), x.im.to_bits());
            }
        }
    }
    let all = max_within(comm, &mine, timeout, "the interchanges of B's rows")?;
    let mut whole = faer::Mat::<T>::from_fn(n, k, |row, col| {
        let w = at(row, col);
        T::from_parts(f64::from_bits(all[w]), f64::from_bits(all[w + 1]))
    });
    hetla_kernels::swap_rows(whole.as_mut(), ipiv);
    for (&(i, j), m) in b.tiles.iter_mut() {
        let (rows, cols) = (m.nrows(), m.ncols());
        m.copy_from(whole.submatrix(t.offset(i), t.offset(j), rows, cols));
    }
    Ok(())
}

/// What a distributed solve measured.
#[derive(Debug, Clone)]
pub struct DistributedSolve {
    /// Seconds of the two substitutions, each the slowest rank's from the agreement that starts it.
    pub seconds: f64,
    /// Floating-point operations of the solve (2 n^2 per right-hand side, times 4 in a complex
    /// precision).
    pub flops: f64,
    /// Bytes of the tiles every rank sent, by rank.
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by [`messages`](hetla_factorizations::messages)' count.
    pub bytes_expected_by_rank: Vec<usize>,
}
