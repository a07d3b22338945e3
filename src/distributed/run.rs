//! What every family's distributed run gives back ([`DistributedRun`], [`DistributedSolve`]), and
//! the distributed solve that runs a factor's substitutions over the ranks' right-hand sides
//! (Cholesky's, LU's after its interchanges, QR's with R).

use std::sync::Arc;

use hetla_factorizations::{FACTOR, RHS, SUMS, Substitution, Tiling};
use hetla_kernels::Precision;
use hetla_runtime::{Platform, Trace};
use mpi::traits::Communicator;

use super::exchange::{
    Outcome, Panels, Share, agree_within, gather_within, max_within, run_share, waiting,
};
use super::matrix::{DistributedMatrix, DistributedRhs};
use super::wire::Wire;
use crate::run::RunConfig;
use crate::{Plan, Result};

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
    pub(crate) fn of(
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

/// The substitutions `which` (in order) of a distributed solve with the factor `f` over the
/// right-hand sides `b`, one distributed run each, after the caller's checks (`problem`, agreed
/// here with the others); with `interchanges`, B's rows are interchanged by them first (each rank
/// holds whole tile columns of B: a grid of one process row).
pub(crate) fn substitutions<T: Wire, C: Communicator>(
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
