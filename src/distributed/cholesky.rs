//! The distributed Cholesky factorisation of a [`DistributedMatrix`], in place, and the
//! distributed solve with its factor ([`DistributedRhs`]).
//!
//! Every rank builds the same tiled task graph and keeps the tasks that write a tile it
//! owns ("owner computes", [`task_rank`]). It runs them on its own hetla runtime (its
//! clusters and GPUs, scheduled as on one node), while the calling thread moves the tiles
//! between ranks ([`execute_beside`]). The factorisation is one such run; the solve is two,
//! the forward substitution L Y = B and then the backward one L^T X = Y
//! ([`distributed_substitution`]): each update runs on the rank that holds its tile of L,
//! into a partial sum there when the tile of B it updates lives elsewhere, so that only
//! B's tiles, the partial sums and L's diagonal tiles travel (O(n x nrhs) words, not L's
//! O(n^2)). Each sends one version of a tile to a rank, which is what one run carries.
//!
//! - **What travels** is [`messages`](hetla_factorizations::messages)' exact list, computed identically on every rank: a
//!   version of a tile goes once to each rank that runs a task reading it (for the
//!   factorisation, each final tile of L). A task reading a remote tile waits for it as an
//!   input from outside the run ([`Workload::outside_inputs`]); the communication loop
//!   delivers it ([`Inbox::arrived`]) when the message is in.
//! - **Sends start as soon as the tile is final**: the worker that ran its last writer
//!   packs it (so that later writes cannot race the send) and hands it to the loop, which
//!   posts one non-blocking send per destination on its next turn. Tiles that the run only
//!   reads (L in a solve) are packed before the workers start and sent on the loop's first
//!   turn.
//! - **Receives** are matched as they come (`MPI_Improbe` on any source); the message
//!   names its tile, and lands in a buffer of its own, freed once the last local task
//!   reading it ran on a CPU cluster. A received tile is in host memory, where the
//!   runtime's data registry copies it to a GPU like any other: a remote tile is not a
//!   memory node of its own, and the schedulers see a task once its tiles are in.
//! - **Only the calling thread calls MPI** (`MPI_THREAD_FUNNELED` suffices).
//! - **The end is agreed**: once its run has stopped, each rank tells every other how many
//!   tiles it sent it and whether it failed, and keeps receiving until every rank has said
//!   so and its own sends are complete, so no message is left in flight. A rank that
//!   fails tells the others at once, and they stop too (their running tasks finish). Then
//!   a non-SPD pivot is the same [`Error::NotPositiveDefinite`] (the smallest global
//!   column) on every rank, and any other failure an [`Error::Distributed`] naming the
//!   lowest rank that failed on its own.
//! - **No hang**: a rank from which nothing arrives while tasks wait for it for longer
//!   than [`Cholesky::progress_timeout`] ends this rank's factorisation with an error
//!   without the collective end (the peer is presumed dead; `mpirun` then ends the job
//!   when this rank exits with an error). A rank that dies is reported by `mpirun` itself.
//!   The collective steps before and after the run (agreeing on the inputs, the start
//!   barrier, agreeing on the outcome) have no timeout, as in any MPI program: a rank that
//!   stops there holds the others until `mpirun --timeout` ends the job.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use faer::{Mat, MatMut, MatRef};
use hetla_factorizations::{
    FACTOR, MatrixId, RHS, SUMS, TaskGraph, TaskId, TileRef, Tiling, cholesky,
    distributed_substitution, sum_shape,
};
use hetla_kernels::{AnyMut, AnyRef, Backend, KernelError, Par};
use hetla_runtime::{Inbox, KernelKey, RunOptions, RunStep, Trace, Workload, execute_beside};
use mpi::collective::SystemOperation;
use mpi::request::{Request, StaticScope};
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Equivalence, Source};

use super::{DistributedMatrix, DistributedRhs, Rank, agree};
use crate::rank_plan::{GridPlan, RankPlan};
use crate::tile_work::{operands, run_error};
use crate::{Cholesky, Error, Platform, Result};

/// How long a rank waits for a tile, with nothing else happening, before it presumes the
/// sender dead (see [`Cholesky::progress_timeout`]).
pub const DEFAULT_PROGRESS_TIMEOUT: Duration = Duration::from_secs(600);

/// Tag of a message carrying a tile: `[matrix, tile row, tile column, entries in
/// column-major order]`.
const TILE: i32 = 1;
/// Tag of a rank's last message to another: `[failed (0 or 1), tiles it sent that rank]`.
const END: i32 = 2;

/// What a distributed factorisation measured.
#[derive(Debug, Clone)]
pub struct DistributedRun {
    /// Seconds from the start barrier to the end of the slowest rank's run (its last task
    /// and its last send), the same on every rank.
    pub seconds: f64,
    /// Floating-point operations of the whole factorisation (n^3 / 3).
    pub flops: f64,
    /// This rank's run: its tasks on its workers.
    pub trace: Trace,
    /// Tiles this rank sent (one message each), and their bytes (entries only).
    pub tiles_sent: usize,
    /// Bytes of the entries of the tiles this rank sent.
    pub bytes_sent: usize,
    /// Bytes every rank sent, by rank (gathered from the ranks' own counts).
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by [`messages`](hetla_factorizations::messages)' count: the 2D block-cyclic formula's.
    pub bytes_expected_by_rank: Vec<usize>,
    /// The factored matrix's tiling.
    pub tiling: Tiling,
    /// The process grid it ran on.
    pub grid: super::ProcessGrid,
}

impl DistributedRun {
    /// Gflop/s of the factorisation: flops over the slowest rank's seconds.
    pub fn gflops(&self) -> f64 {
        self.flops / self.seconds / 1e9
    }
}

impl Cholesky {
    /// Factors the distributed matrix `a` in place (`a`'s tiles become L's): collective,
    /// every rank of `comm` calls it with its part of `a` (see the module documentation).
    /// The tile size is `a`'s; each rank runs its tasks on this builder's platform
    /// (clusters, backend, GPUs) with its scheduler. On error `a`'s tiles are partly
    /// overwritten.
    pub fn factor_distributed<C: Communicator>(
        &self,
        comm: &C,
        a: &mut DistributedMatrix,
    ) -> Result<DistributedRun> {
        let tiling = a.tiling;
        let mut problem = None;
        if let Some(b) = self.tile.filter(|&b| b != tiling.tile()) {
            problem = Some(format!(
                "the tile size {b} is not the distributed matrix's ({})",
                tiling.tile()
            ));
        }
        let platform = self.resolve_platform();
        if let Err(e) = &platform {
            problem.get_or_insert(format!("no platform: {e}"));
        }
        let plan = cholesky(&tiling)
            .map_err(Error::from)
            .and_then(|g| Plan::new(&g, &[(FACTOR, Layout::Tiled(tiling))], a.grid, a.rank));
        if let Err(e) = &plan {
            problem.get_or_insert(e.to_string());
        }
        agree(comm, problem)?;
        let (platform, plan) = (platform?, plan?);
        let grid = a.grid;
        let out = self.run_plan(comm, &platform, &plan, vec![Held::Written(FACTOR, a)])?;
        Ok(DistributedRun {
            seconds: out.seconds,
            flops: (tiling.rows() as f64).powi(3) / 3.0,
            trace: out.trace,
            tiles_sent: out.exchanged.tiles_sent,
            bytes_sent: out.exchanged.bytes_sent,
            bytes_sent_by_rank: out.bytes_sent_by_rank,
            bytes_expected_by_rank: plan.bytes_expected,
            tiling,
            grid,
        })
    }

    /// Solves A X = B with the distributed factor `l` of A (from
    /// [`Cholesky::factor_distributed`]), overwriting the right-hand sides `b` with X:
    /// collective, every rank calls it with its parts. `b` must be on `l`'s grid with its
    /// tile size and rows; the forward and the backward substitution are one distributed
    /// run each (see the module documentation). On error `b` is partly overwritten.
    pub fn solve_distributed<C: Communicator>(
        &self,
        comm: &C,
        l: &DistributedMatrix,
        b: &mut DistributedRhs,
    ) -> Result<DistributedSolve> {
        let (lt, bt) = (l.tiling, b.0.tiling);
        let mut problem = None;
        if b.0.grid != l.grid {
            problem = Some(format!(
                "the right-hand sides are on a {} grid, the factor on a {} grid",
                b.0.grid, l.grid
            ));
        } else if (bt.rows(), bt.tile()) != (lt.rows(), lt.tile()) {
            problem = Some(format!(
                "the right-hand sides have {} rows in tiles of {}, the factor is of order {} in tiles of {}",
                bt.rows(),
                bt.tile(),
                lt.rows(),
                lt.tile()
            ));
        }
        let platform = self.resolve_platform();
        if let Err(e) = &platform {
            problem.get_or_insert(format!("no platform: {e}"));
        }
        let grid = l.grid;
        let plans = [false, true].map(|transposed| {
            let mut g = TaskGraph::new();
            distributed_substitution(&mut g, &lt, &bt, &grid, transposed)?;
            let sums = Layout::Sums {
                l: lt,
                b: bt,
                grid,
                transposed,
            };
            let layouts = [
                (FACTOR, Layout::Tiled(lt)),
                (RHS, Layout::Tiled(bt)),
                (SUMS, sums),
            ];
            Plan::new(&g, &layouts, grid, l.rank)
        });
        for plan in &plans {
            if let (None, Err(e)) = (&problem, plan) {
                problem = Some(e.to_string());
            }
        }
        agree(comm, problem)?;
        let platform = platform?;
        let mut solve = DistributedSolve {
            seconds: 0.0,
            flops: 2.0 * (lt.rows() as f64).powi(2) * bt.cols() as f64,
            bytes_sent_by_rank: vec![0; l.grid.size()],
            bytes_expected_by_rank: vec![0; l.grid.size()],
        };
        for plan in plans {
            let plan = plan?;
            let mut sums = plan.zero_sums(&b.0);
            let held = vec![
                Held::Read(FACTOR, l),
                Held::Written(RHS, &mut b.0),
                Held::Written(SUMS, &mut sums),
            ];
            let out = self.run_plan(comm, &platform, &plan, held)?;
            solve.seconds += out.seconds;
            for (r, (sent, expected)) in out
                .bytes_sent_by_rank
                .iter()
                .zip(&plan.bytes_expected)
                .enumerate()
            {
                solve.bytes_sent_by_rank[r] += sent;
                solve.bytes_expected_by_rank[r] += expected;
            }
        }
        Ok(solve)
    }

    /// Runs this rank's share of `plan` on `platform` beside the communication loop, and
    /// agrees on the outcome with every rank (see the module documentation).
    fn run_plan<C: Communicator>(
        &self,
        comm: &C,
        platform: &Platform,
        plan: &Plan,
        held: Vec<Held<'_>>,
    ) -> Result<Outcome> {
        let (outgoing, packed) = mpsc::channel();
        let work = DistributedWork::new(held, plan, platform.backend(), outgoing);
        let options = RunOptions {
            scheduler: self.scheduler,
            priorities: Some(plan.priorities.clone()),
            ..RunOptions::default()
        };
        let timeout = self.progress_timeout.unwrap_or(DEFAULT_PROGRESS_TIMEOUT);
        // Tiles the run only reads are packed before any task runs (as ScaLAPACK's local
        // arrays are filled before its timer starts).
        let initial = work.pack_initial();
        agree(comm, initial.as_ref().err().cloned())?;
        let initial = initial.unwrap_or_default();
        comm.barrier();
        let start = Instant::now();
        let (run, exchanged) = execute_beside(platform, &work, &options, |inbox| {
            Exchange::new(comm, plan, &work, packed, timeout).run(inbox, initial)
        });
        let mine = start.elapsed().as_secs_f64();
        let exchanged = exchanged?;
        let mut seconds = 0.0;
        comm.all_reduce_into(&mine, &mut seconds, SystemOperation::max());

        // The same outcome on every rank: the first failed pivot, else the lowest rank that
        // failed on its own (not stopped by another's failure).
        let factor = plan.layouts.iter().find_map(|(m, layout)| match layout {
            Layout::Tiled(t) if *m == FACTOR => Some(t),
            _ => None,
        });
        let run = run.map_err(|e| {
            let stopped = e.step == RunStep::Outside;
            (run_error(&plan.graph, factor, e), stopped)
        });
        let pivot = match &run {
            Err((Error::NotPositiveDefinite { column }, _)) => *column as u64,
            _ => u64::MAX,
        };
        let mut first_pivot = u64::MAX;
        comm.all_reduce_into(&pivot, &mut first_pivot, SystemOperation::min());
        if first_pivot != u64::MAX {
            return Err(Error::NotPositiveDefinite {
                column: first_pivot as usize,
            });
        }
        let own = run.as_ref().err().filter(|(_, stopped)| !stopped);
        agree(comm, own.map(|(e, _)| e.to_string()))?;
        let trace = run.map_err(|(e, _)| Error::Distributed {
            rank: plan.rank.0,
            reason: e.to_string(),
        })?;

        let size = comm.size() as usize;
        let mut bytes_sent_by_rank = vec![0u64; size];
        comm.all_gather_into(&(exchanged.bytes_sent as u64), &mut bytes_sent_by_rank[..]);
        Ok(Outcome {
            seconds,
            trace,
            exchanged,
            bytes_sent_by_rank: bytes_sent_by_rank.iter().map(|&b| b as usize).collect(),
        })
    }
}

/// What a distributed solve measured.
#[derive(Debug, Clone)]
pub struct DistributedSolve {
    /// Seconds of the two substitutions, each the slowest rank's from a start barrier.
    pub seconds: f64,
    /// Floating-point operations of the solve (2 n^2 per right-hand side).
    pub flops: f64,
    /// Bytes of the tiles every rank sent, by rank.
    pub bytes_sent_by_rank: Vec<usize>,
    /// Bytes each rank sends by [`messages`](hetla_factorizations::messages)' count.
    pub bytes_expected_by_rank: Vec<usize>,
}

/// One distributed run, as every rank agreed it ended.
struct Outcome {
    seconds: f64,
    trace: Trace,
    exchanged: Exchanged,
    bytes_sent_by_rank: Vec<usize>,
}

/// A matrix a run uses: written by its tasks, or only read.
enum Held<'m> {
    Written(MatrixId, &'m mut DistributedMatrix),
    Read(MatrixId, &'m DistributedMatrix),
}

/// This rank's share of the distributed run ([`RankPlan`]), with what the exchange needs.
struct Plan {
    /// The layout of each matrix the run uses.
    layouts: Vec<(MatrixId, Layout)>,
    rank: Rank,
    share: RankPlan,
    /// Bytes each rank sends ([`messages`](hetla_factorizations::messages)' count).
    bytes_expected: Vec<usize>,
}

impl std::ops::Deref for Plan {
    type Target = RankPlan;

    fn deref(&self) -> &RankPlan {
        &self.share
    }
}

impl Plan {
    /// `rank`'s share of `whole` on `grid`, over matrices laid out as `layouts` says.
    fn new(
        whole: &TaskGraph,
        layouts: &[(MatrixId, Layout)],
        grid: super::ProcessGrid,
        rank: Rank,
    ) -> Result<Self> {
        // Found alike on every rank, so each says it of itself.
        let mut split = GridPlan::new(whole, &grid).map_err(|e| Error::Distributed {
            rank: rank.0,
            reason: e.to_string(),
        })?;
        let mut plan = Self {
            layouts: layouts.to_vec(),
            rank,
            share: split.ranks.swap_remove(rank.0),
            bytes_expected: Vec::new(),
        };
        let bytes = |tile: TileRef| plan.tile_bytes(tile);
        let expected = hetla_factorizations::bytes_sent(&grid, &split.messages, bytes);
        plan.bytes_expected = expected;
        Ok(plan)
    }

    /// The (rows, columns) of `tile`; (0, 0) for a matrix the run does not use.
    fn shape(&self, tile: TileRef) -> (usize, usize) {
        let layout = self.layouts.iter().find(|(m, _)| *m == tile.matrix);
        layout.map_or((0, 0), |(_, layout)| match layout {
            Layout::Tiled(t) => t.tile_shape(tile.row, tile.col),
            Layout::Sums {
                l,
                b,
                grid,
                transposed,
            } => sum_shape(tile, l, b, grid, *transposed),
        })
    }

    fn tile_bytes(&self, tile: TileRef) -> usize {
        let (r, c) = self.shape(tile);
        r * c * size_of::<f64>()
    }

    /// Zero tiles for the partial sums this rank's tasks write (none outside a
    /// distributed substitution), held like the right-hand sides `like`.
    fn zero_sums(&self, like: &DistributedMatrix) -> DistributedMatrix {
        let tiles = self
            .graph
            .tasks()
            .iter()
            .flat_map(|t| &t.accesses)
            .filter(|a| a.tile.matrix == SUMS && a.mode.writes())
            .map(|a| {
                let (rows, cols) = self.shape(a.tile);
                ((a.tile.row, a.tile.col), Mat::zeros(rows, cols))
            })
            .collect();
        DistributedMatrix {
            tiles,
            ..like.clone_empty()
        }
    }
}

/// How a matrix of a run is cut into tiles.
#[derive(Clone, Copy)]
enum Layout {
    /// By a tiling.
    Tiled(Tiling),
    /// The partial sums of a distributed substitution of the right-hand sides tiled by `b`
    /// with the factor tiled by `l` ([`sum_shape`]).
    Sums {
        l: Tiling,
        b: Tiling,
        grid: super::ProcessGrid,
        transposed: bool,
    },
}

/// A tile received from another rank, read by some of this rank's tasks.
struct Received {
    /// Filled by the communication loop before any reader is released; emptied by the last
    /// reader that ran on a CPU cluster.
    data: UnsafeCell<Option<Mat<f64>>>,
    /// Readers that have not run on a CPU cluster yet.
    readers_left: AtomicUsize,
}

/// Where a tile is, for this rank's tasks.
#[derive(Clone, Copy)]
enum Place {
    /// One of this rank's tiles (in a distributed matrix): pointer, rows, columns, column
    /// stride, and whether the run may write it (else it was lent shared).
    Local(*mut f64, usize, usize, isize, bool),
    /// A received tile, by its index in [`DistributedWork::received`].
    Received(usize),
}

/// This rank's tasks as a runtime workload over its tiles and the tiles it receives.
struct DistributedWork<'p> {
    plan: &'p Plan,
    backend: Backend,
    places: HashMap<TileRef, Place>,
    received: Vec<Received>,
    /// To the communication loop: a final tile to send, packed (`TILE`'s layout), and the
    /// task that wrote it.
    outgoing: mpsc::Sender<(TaskId, Vec<f64>)>,
}

// SAFETY: the local places point into the distributed matrix, borrowed mutably for the
// work's lifetime; a tile is written by one task at a time, after every task reading or
// writing it before (the graph's edges), and received tiles are filled before their
// readers are released and freed after the last (see `Received`).
unsafe impl Sync for DistributedWork<'_> {}

impl<'p> DistributedWork<'p> {
    fn new(
        held: Vec<Held<'_>>,
        plan: &'p Plan,
        backend: Backend,
        outgoing: mpsc::Sender<(TaskId, Vec<f64>)>,
    ) -> Self {
        let mut places: HashMap<TileRef, Place> = HashMap::new();
        let local = |matrix, (i, j), m: (*mut f64, usize, usize, isize), writable| {
            let (ptr, rows, cols, cs) = m;
            (
                TileRef::new(matrix, i, j),
                Place::Local(ptr, rows, cols, cs, writable),
            )
        };
        for h in held {
            match h {
                Held::Written(matrix, a) => places.extend(a.tiles.iter_mut().map(|(&at, m)| {
                    let raw = (m.as_ptr_mut(), m.nrows(), m.ncols(), m.col_stride());
                    local(matrix, at, raw, true)
                })),
                // A shared matrix is only read: `host_tile_mut` and `run` refuse to write
                // its tiles.
                Held::Read(matrix, a) => places.extend(a.tiles.iter().map(|(&at, m)| {
                    let raw = (m.as_ptr().cast_mut(), m.nrows(), m.ncols(), m.col_stride());
                    local(matrix, at, raw, false)
                })),
            }
        }
        let received = plan
            .receives
            .iter()
            .enumerate()
            .map(|(i, (tile, readers))| {
                places.insert(*tile, Place::Received(i));
                Received {
                    data: UnsafeCell::new(None),
                    readers_left: AtomicUsize::new(readers.len()),
                }
            })
            .collect();
        Self {
            plan,
            backend,
            places,
            received,
            outgoing,
        }
    }

    fn place(&self, tile: TileRef) -> Option<Place> {
        self.places.get(&tile).copied()
    }

    /// `tile`, packed as a message carries it (`TILE`'s layout), or `None` where it is not.
    fn pack(&self, tile: TileRef) -> Option<Vec<f64>> {
        let m = self.view(tile)?;
        let mut packed = Vec::with_capacity(3 + m.nrows() * m.ncols());
        packed.extend([f64::from(tile.matrix.0), tile.row as f64, tile.col as f64]);
        packed.extend(m.col_iter().flat_map(|c| c.iter().copied()));
        Some(packed)
    }

    /// The tiles of this rank sent as the run finds them, packed, each with its
    /// destinations (see [`RankPlan::initial_sends`]), or which of them this rank lacks.
    fn pack_initial(&self) -> std::result::Result<Vec<Outgoing<'p>>, String> {
        let plan = self.plan;
        plan.initial_sends
            .iter()
            .map(|(tile, to)| {
                let packed = self.pack(*tile).ok_or_else(|| {
                    let (m, r, c) = (tile.matrix.0, tile.row, tile.col);
                    format!("tile ({r}, {c}) of matrix {m} is to be sent from here, which does not hold it")
                })?;
                Ok((&to[..], packed))
            })
            .collect()
    }

    /// A read-only view of `tile`, where it is.
    fn view(&self, tile: TileRef) -> Option<MatRef<'_, f64>> {
        match self.place(tile)? {
            // SAFETY: see the Sync impl: no task writes the tile while another reads it.
            Place::Local(ptr, rows, cols, cs, _) => {
                Some(unsafe { MatRef::from_raw_parts(ptr, rows, cols, 1, cs) })
            }
            // SAFETY: filled before any reader runs, emptied after the last (`Received`).
            Place::Received(i) => unsafe { &*self.received[i].data.get() }
                .as_ref()
                .map(|m| m.as_ref()),
        }
    }

    /// Puts a received tile where its readers find it. Called once per tile, before any of
    /// its readers is released.
    fn fill(&self, i: usize, tile: Mat<f64>) {
        // SAFETY: no reader runs before this tile is delivered, which follows this call.
        unsafe { *self.received[i].data.get() = Some(tile) };
    }
}

impl Workload for DistributedWork<'_> {
    fn graph(&self) -> &TaskGraph {
        &self.plan.graph
    }

    fn key(&self, task: TaskId) -> KernelKey {
        KernelKey::of_task(self.plan.graph.task(task), |t| self.plan.shape(t))
    }

    fn tile_bytes(&self, tile: TileRef) -> usize {
        self.plan.tile_bytes(tile)
    }

    fn host_tile(&self, tile: TileRef) -> Option<AnyRef<'_>> {
        self.view(tile).map(AnyRef::from)
    }

    unsafe fn host_tile_mut(&self, tile: TileRef) -> Option<AnyMut<'_>> {
        match self.place(tile)? {
            // SAFETY: the caller guarantees no other view of the tile is in use.
            Place::Local(ptr, rows, cols, cs, true) => {
                Some(unsafe { MatMut::from_raw_parts_mut(ptr, rows, cols, 1, cs) }.into())
            }
            // A received tile, or a tile of a matrix lent shared, is never written.
            Place::Local(.., false) | Place::Received(_) => None,
        }
    }

    fn outside_inputs(&self, task: TaskId) -> usize {
        let reads = &self.plan.graph.task(task).accesses;
        reads
            .iter()
            .filter(|a| matches!(self.place(a.tile), Some(Place::Received(_))))
            .count()
    }

    fn run(&self, id: TaskId, par: Par) -> Result<(), KernelError> {
        let task = self.plan.graph.task(id);
        let (write, reads) = operands(task)?;
        let missing = |tile: TileRef| KernelError::Operands {
            op: task.op,
            reason: format!(
                "tile ({}, {}) of matrix {} is neither this rank's to write nor received",
                tile.row, tile.col, tile.matrix.0
            ),
        };
        let views = reads
            .iter()
            .map(|r| self.view(r.tile).ok_or_else(|| missing(r.tile)))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(Place::Local(ptr, rows, cols, cs, true)) = self.place(write.tile) else {
            return Err(missing(write.tile));
        };
        // SAFETY: the written tile is this rank's, distinct from the tiles read (checked by
        // `operands`), and no other task uses it while this one runs (the graph's edges).
        let out = unsafe { MatMut::from_raw_parts_mut(ptr, rows, cols, 1, cs) };
        self.backend.run(task.op, &views, out, par)?;
        drop(views);
        for r in reads {
            if let Some(Place::Received(i)) = self.place(r.tile) {
                let slot = &self.received[i];
                if slot.readers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    // SAFETY: every other reader has run (the count), none is left.
                    unsafe { *slot.data.get() = None };
                }
            }
        }
        if !self.plan.sends[id].is_empty() {
            let packed = self.pack(write.tile).ok_or_else(|| missing(write.tile))?;
            // The loop is gone only once the run has stopped: nothing is lost.
            let _ = self.outgoing.send((id, packed));
        }
        Ok(())
    }
}

/// A packed tile and the ranks it goes to.
type Outgoing<'p> = (&'p [Rank], Vec<f64>);

/// A packed tile in flight to its destinations: the buffer lives until every send of it
/// is complete.
struct InFlight {
    buffer: *mut [f64],
    requests: Vec<Request<'static, [f64], StaticScope>>,
}

/// A message being received: the buffer lives until the receive is complete.
struct Arriving {
    from: Rank,
    tag: i32,
    buffer: *mut [f64],
    request: Request<'static, [f64], StaticScope>,
}

/// What the communication loop did.
struct Exchanged {
    tiles_sent: usize,
    bytes_sent: usize,
}

/// The communication loop of one rank (on the calling thread, beside the run).
struct Exchange<'r, C: Communicator> {
    comm: &'r C,
    plan: &'r Plan,
    work: &'r DistributedWork<'r>,
    packed: mpsc::Receiver<(TaskId, Vec<f64>)>,
    timeout: Duration,
    in_flight: Vec<InFlight>,
    arriving: Vec<Arriving>,
    /// Tiles received from each rank, and what each said it sent in its last message.
    received_from: Vec<usize>,
    ended_from: Vec<Option<usize>>,
    sent_to: Vec<usize>,
    done: Exchanged,
}

impl<'r, C: Communicator> Exchange<'r, C> {
    fn new(
        comm: &'r C,
        plan: &'r Plan,
        work: &'r DistributedWork<'r>,
        packed: mpsc::Receiver<(TaskId, Vec<f64>)>,
        timeout: Duration,
    ) -> Self {
        let size = comm.size() as usize;
        let mut ended_from = vec![None; size];
        ended_from[plan.rank] = Some(0);
        Self {
            comm,
            plan,
            work,
            packed,
            timeout,
            in_flight: Vec::new(),
            arriving: Vec::new(),
            received_from: vec![0; size],
            ended_from,
            sent_to: vec![0; size],
            done: Exchanged {
                tiles_sent: 0,
                bytes_sent: 0,
            },
        }
    }

    /// Moves tiles until this rank's run has stopped, every rank has said its last word
    /// and every send is complete; `initial` leaves first.
    fn run(mut self, inbox: &Inbox<'_, '_>, initial: Vec<Outgoing<'_>>) -> Result<Exchanged> {
        for (to, packed) in initial {
            self.post(to, packed);
        }
        let mut ended = false;
        let mut last_progress = Instant::now();
        let mut unfinished = inbox.unfinished();
        let mut nap = Duration::from_micros(20);
        loop {
            let mut progressed = false;
            if !ended {
                while let Ok((task, packed)) = self.packed.try_recv() {
                    self.post(self.sends_of(task), packed);
                    progressed = true;
                }
            }
            // Matched as they come, received without blocking: a sender that stops in the
            // middle of a large message must not hold this loop.
            while let Some((message, status)) = self.comm.any_process().immediate_matched_probe() {
                let count = status.count(f64::equivalent_datatype()).max(0) as usize;
                let buffer: &'static mut [f64] = Box::leak(vec![0.0; count].into_boxed_slice());
                let pointer = buffer as *mut [f64];
                self.arriving.push(Arriving {
                    from: Rank(status.source_rank() as usize),
                    tag: status.tag(),
                    buffer: pointer,
                    request: message.immediate_matched_receive_into(StaticScope, buffer),
                });
                progressed = true;
            }
            for arriving in std::mem::take(&mut self.arriving) {
                match arriving.request.test() {
                    Ok(_) => {
                        // SAFETY: leaked above, and the receive into it is complete.
                        let data = unsafe { Box::from_raw(arriving.buffer) }.into_vec();
                        self.receive(inbox, arriving.from, arriving.tag, data);
                        progressed = true;
                    }
                    Err(request) => self.arriving.push(Arriving {
                        request,
                        ..arriving
                    }),
                }
            }
            let before = self.in_flight.len();
            self.in_flight = std::mem::take(&mut self.in_flight)
                .into_iter()
                .filter_map(InFlight::test)
                .collect();
            progressed |= self.in_flight.len() != before;
            if !ended && inbox.stopped() {
                // Every tile of a finished run was handed over before its task ended.
                if !inbox.failed() {
                    while let Ok((task, packed)) = self.packed.try_recv() {
                        self.post(self.sends_of(task), packed);
                    }
                }
                self.end(inbox.failed());
                ended = true;
                progressed = true;
            }
            if ended
                && self.in_flight.is_empty()
                && self.arriving.is_empty()
                && self.ended_from.iter().all(Option::is_some)
            {
                return self.check_counts();
            }
            let now_unfinished = inbox.unfinished();
            if progressed || now_unfinished != unfinished {
                unfinished = now_unfinished;
                last_progress = Instant::now();
                nap = Duration::from_micros(20);
            } else if last_progress.elapsed() > self.timeout {
                return Err(self.stalled(inbox));
            }
            // Wake for a tile to send at once; otherwise poll the network less and less
            // often while nothing happens (the rank's cores run its tasks).
            if !ended {
                if let Ok((task, packed)) = self.packed.recv_timeout(nap) {
                    self.post(self.sends_of(task), packed);
                    last_progress = Instant::now();
                    nap = Duration::from_micros(20);
                    continue;
                }
            } else {
                std::thread::sleep(nap);
            }
            nap = (nap * 2).min(Duration::from_micros(500));
        }
    }

    /// Posts the sends of a packed tile written by `task` to the ranks that read it.
    /// The ranks the tile `task` writes goes to.
    fn sends_of(&self, task: TaskId) -> &'r [Rank] {
        let plan: &'r Plan = self.plan;
        &plan.sends[task]
    }

    /// Posts the sends of a packed tile to the ranks `to`.
    fn post(&mut self, to: &[Rank], packed: Vec<f64>) {
        let bytes = (packed.len() - 3) * size_of::<f64>();
        let buffer: &'static [f64] = Box::leak(packed.into_boxed_slice());
        let requests = to
            .iter()
            .map(|&r| {
                self.sent_to[r] += 1;
                self.done.tiles_sent += 1;
                self.done.bytes_sent += bytes;
                self.comm
                    .process_at_rank(r.0 as i32)
                    .immediate_send_with_tag(StaticScope, buffer, TILE)
            })
            .collect();
        self.in_flight.push(InFlight {
            buffer: buffer as *const [f64] as *mut [f64],
            requests,
        });
    }

    /// A message from `from`: a tile, delivered to the tasks that read it, or `from`'s
    /// last word.
    fn receive(&mut self, inbox: &Inbox<'_, '_>, from: Rank, tag: i32, data: Vec<f64>) {
        if tag == END {
            let (failed, sent) = (data.first() == Some(&1.0), data.get(1).copied());
            self.ended_from[from] = Some(sent.unwrap_or(0.0) as usize);
            if failed && !inbox.stopped() {
                inbox.fail(format!("rank {from} failed"));
            }
            return;
        }
        self.received_from[from] += 1;
        let [matrix, row, col, ..] = data[..] else {
            inbox.fail(format!(
                "rank {from} sent a tile message of {} values, without its tile's place",
                data.len()
            ));
            return;
        };
        let tile = TileRef::new(MatrixId(matrix as u8), row as usize, col as usize);
        let wrong = |why: String| {
            let (m, r, c) = (tile.matrix.0, tile.row, tile.col);
            format!("rank {from} sent tile ({r}, {c}) of matrix {m}, {why}")
        };
        let Some(Place::Received(i)) = self.work.place(tile) else {
            inbox.fail(wrong("which this rank does not read".into()));
            return;
        };
        let (rows, cols) = self.plan.shape(tile);
        if data.len() != 3 + rows * cols {
            inbox.fail(wrong(format!(
                "with {} values instead of {rows} x {cols}",
                data.len() - 3
            )));
            return;
        }
        self.work
            .fill(i, Mat::from_fn(rows, cols, |r, c| data[3 + c * rows + r]));
        for &task in &self.plan.receives[i].1 {
            inbox.arrived(task);
        }
    }

    /// Tells every other rank how many tiles it was sent, and whether this rank failed.
    fn end(&mut self, failed: bool) {
        for r in (0..self.comm.size() as usize).filter(|&r| r != self.plan.rank.0) {
            let word = [f64::from(u8::from(failed)), self.sent_to[r] as f64];
            self.comm
                .process_at_rank(r as i32)
                .send_with_tag(&word[..], END);
        }
    }

    /// The tiles received from each rank are as many as it said it sent.
    fn check_counts(self) -> Result<Exchanged> {
        for (r, (&got, said)) in self.received_from.iter().zip(&self.ended_from).enumerate() {
            if Some(got) != *said {
                return Err(Error::Distributed {
                    rank: self.plan.rank.0,
                    reason: format!(
                        "received {got} tiles from rank {r}, which says it sent {}",
                        said.unwrap_or(0)
                    ),
                });
            }
        }
        Ok(self.done)
    }

    /// The error of a rank that waited too long with nothing happening.
    fn stalled(mut self, inbox: &Inbox<'_, '_>) -> Error {
        let silent: Vec<String> = (0..self.ended_from.len())
            .filter(|&r| {
                self.ended_from[r].is_none()
                    && (inbox.stopped() || self.received_from[r] < self.plan.expected_from[r])
            })
            .map(|r| r.to_string())
            .collect();
        inbox.fail("no progress".into());
        // Sends to a dead rank never complete: their buffers are left to the process's end.
        for f in std::mem::take(&mut self.in_flight) {
            f.requests.into_iter().for_each(std::mem::forget);
        }
        for a in std::mem::take(&mut self.arriving) {
            std::mem::forget(a.request);
        }
        Error::Distributed {
            rank: self.plan.rank.0,
            reason: format!(
                "nothing arrived for {:.0} s from rank(s) {} while this rank waited for them: presumed dead",
                self.timeout.as_secs_f64(),
                silent.join(", ")
            ),
        }
    }
}

impl InFlight {
    /// `None` once every send is complete (the buffer is freed), else what is left.
    fn test(mut self) -> Option<Self> {
        self.requests = std::mem::take(&mut self.requests)
            .into_iter()
            .filter_map(|r| r.test().err())
            .collect();
        if self.requests.is_empty() {
            // SAFETY: leaked in `post` and no longer read by any send.
            drop(unsafe { Box::from_raw(self.buffer) });
            return None;
        }
        Some(self)
    }
}
