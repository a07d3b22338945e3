//! The distributed engine: one rank's share of a plan run on its own runtime beside the loop that
//! moves tiles between ranks ([`run_share`]); distributed Cholesky (its factorisation and its
//! substitutions) and distributed LU are runs of it.
//!
//! - **What travels** is [`messages`](hetla_factorizations::messages)' exact list, computed
//!   identically on every rank from the plan ([`Plan::split`](crate::Plan::split)): a version of a
//!   tile goes once to each rank that runs a task reading it (for the factorisation, each final
//!   tile of L), in the run's precision ([`Wire`]). A task reading a remote tile waits for it as an
//!   input from outside the run ([`Workload::outside_inputs`]); the communication loop delivers it
//!   ([`Inbox::arrived`]) when the message is in.
//! - **Sends start as soon as the tile is final**: the worker that ran its last writer packs it (so
//!   that later writes cannot race the send) and hands it to the loop, which posts one non-blocking
//!   send per destination on its next turn. Tiles that the run only reads (L in a solve) are packed
//!   before the workers start and sent on the loop's first turn.
//! - **Receives** are matched as they come (`MPI_Improbe` on any source); the message names its
//!   tile, and lands in a slot of its own of the rank's tiles (`crate::tiles::TileSet`), freed once
//!   the last local task reading it ran on a CPU cluster. A received tile is in host memory, where
//!   the runtime's data registry copies it to a GPU like any other: a remote tile is not a memory
//!   node of its own, and the schedulers see a task once its tiles are in.
//! - **Tiles written away from their owner, and versions**: a task writing a tile another rank owns
//!   (the tiled QR's merges) runs on the rank of its last access and receives that tile like any
//!   input; its write is sent on from there, and the final version returns to the owner, which
//!   fills its tile in place ([`RankShare::returning`](hetla_factorizations::RankShare)); a version
//!   the owner reads before then (the tiled LU's panels) comes back to it into a slot of its own,
//!   copied into its tile after the run when it is the final one. A rank may receive several
//!   versions of one tile, each in a slot of its own: every message ends with its version (its
//!   writer's id in the whole graph, + 1; 0 for the tile as the run found it), and each task's
//!   access uses the slot the split gives it. A tiled QR's tile whose reflectors a task on another
//!   rank applies carries their T after its entries ([`travelling_ts`]).
//! - **Only the calling thread calls MPI** (`MPI_THREAD_FUNNELED` suffices).
//! - **The end is agreed**: once its run has stopped, each rank tells every other how many tiles it
//!   sent it and whether it failed, and keeps receiving until every rank has said so and its own
//!   sends are complete, so no message is left in flight. A rank that fails tells the others at
//!   once, and they stop too (their running tasks finish). Then a non-SPD pivot is the same
//!   [`Error::NotPositiveDefinite`] (the smallest global column) on every rank, and any other
//!   failure an [`Error::Distributed`] naming the lowest rank that failed on its own.
//! - **No hang**: a rank from which nothing arrives while tasks wait for it for longer than
//!   [`Cholesky::progress_timeout`](crate::Cholesky::progress_timeout) ends this rank's run with an
//!   error without the collective end (the peer is presumed dead; `mpirun` then ends the job when
//!   this rank exits with an error). A rank that dies is reported by `mpirun` itself. The
//!   collective steps of a distributed call (agreeing on the inputs, the start of the run, agreeing
//!   on the outcome) wait as long and no longer ([`gather_within`]): they are non-blocking
//!   collectives polled against the same timeout, so a rank that stops between two runs, or before
//!   its run starts, ends the others' wait too (a collective cannot say which rank is missing, so
//!   that error names none).
//! - **LU's panels** ([`Pivots`]): a distributed LU's tiles are block columns, and only a panel's
//!   version travels. Its message carries the panel's rows from its diagonal down (the rows above
//!   are U's, which no other rank reads) and then its interchanges (global rows, as whole numbers
//!   in the precision's parts); the receiver stores the interchanges in its own list before it
//!   tells the tasks that read the panel that it is in.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use faer::{Mat, MatRef};
use hetla_factorizations::{MatrixId, RankShare, SUMS, TaskId, TileRef, Tiling};
use hetla_kernels::KernelError;
use hetla_runtime::{
    Inbox, KernelKey, RunError, RunOptions, RunStep, Trace, Workload, execute_beside,
};
use mpi::request::{Request, StaticScope};
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Equivalence, Source};

use super::matrix::REFUSED;
use super::wire::{self, Wire};
use crate::lu::tiled::TiledPivotedWork;
use crate::lu::work::PivotedWork;
use crate::qr::work::ReflectorWork;
use crate::run::RunConfig;
use crate::tiles::{HeldTiles as Tiles, TileSet, TileWork};
use crate::{Error, Plan, Platform, Result};
use hetla_factorizations::Rank;

/// How long a rank waits for a tile, with nothing else happening, before it presumes the sender
/// dead (see [`Cholesky::progress_timeout`](crate::Cholesky::progress_timeout)).
pub(crate) const DEFAULT_PROGRESS_TIMEOUT: Duration = Duration::from_secs(600);

/// Tag of a message carrying a tile (see `wire`).
const TILE: i32 = 1;
/// Tag of a rank's last message to another: `[failed (0 or 1), tiles it sent that rank]`.
const END: i32 = 2;

/// The row interchanges of a distributed LU, written by its panels and read by its updates: each
/// rank's list, filled by its own panels and by the messages of the others' (see the module
/// documentation).
pub(crate) struct Pivots<'p> {
    /// The block columns of the factored matrix.
    pub tiling: Tiling,
    /// `ipiv[i]`: the row (global, 0-based) swapped with row i at step i.
    pub ipiv: &'p [AtomicUsize],
    /// The first column of this rank's panels whose pivot was exactly zero (`usize::MAX`: none).
    pub zero: &'p AtomicUsize,
}

/// The T's of a distributed QR in block columns, written by its panels and read by its updates:
/// each rank's slots ([`ReflectorWork::slot`]), filled by its own panels and by the messages of the
/// others'.
pub(crate) struct Reflectors<'p, T> {
    /// The block columns of the factored matrix.
    pub tiling: Tiling,
    /// The inner block: the rows of a panel's T (at most the panel's width).
    pub inner: usize,
    /// The T's, by slot.
    pub ts: &'p [OnceLock<Mat<T>>],
    /// Block columns (panels travel from their diagonal down with their T); else tiles, which
    /// travel whole, with the T's of `travel`.
    pub columns: bool,
    /// The tiled QR's tasks whose T a task on another rank applies: the tile they made their
    /// reflectors in carries it ([`travelling_ts`]).
    pub travel: &'p std::collections::HashSet<TaskId>,
}

impl<T> Reflectors<'_, T> {
    /// The rows of the T of a panel `width` columns wide.
    fn t_rows(&self, width: usize) -> usize {
        self.inner.min(width).max(1)
    }
}

/// What a block-column factorisation's panels carry beside their rows from the diagonal down
/// (`None`: tiles travel whole, as Cholesky's and the substitutions' do).
pub(crate) enum Panels<'p, T> {
    None,
    /// LU's interchanges.
    Interchanges(Pivots<'p>),
    /// The tiled LU's interchanges ([`Algorithm::LuTiles`](crate::Algorithm::LuTiles): tiles travel
    /// whole, the interchanges in tiles of their own; the list is this rank's panels'), with the
    /// process rows its tile rows are spread over.
    TiledInterchanges(Pivots<'p>, usize),
    /// QR's T's.
    Reflectors(Reflectors<'p, T>),
}

impl<T> Panels<'_, T> {
    /// The first row and the width of block column `col`'s panel; `None` when tiles travel whole.
    fn panel(&self, col: usize) -> Option<(usize, usize)> {
        let tiling = match self {
            Panels::None | Panels::TiledInterchanges(..) => return None,
            Panels::Interchanges(p) => p.tiling,
            Panels::Reflectors(r) if r.columns => r.tiling,
            Panels::Reflectors(_) => return None,
        };
        Some((tiling.offset(col), tiling.tile_cols(col)))
    }
}

/// Runs this rank's share of a plan on `platform` beside the communication loop, over the tiles of
/// `written` and `read` (and what the panels of a block-column factorisation carry, `panels`), with
/// the scheduler and the progress timeout of `run`, and agrees on the outcome with every rank (see
/// the module documentation).
pub(crate) fn run_share<T: Wire, C: Communicator>(
    run: &RunConfig,
    comm: &C,
    platform: &Platform,
    share: &Share,
    written: Vec<(MatrixId, &mut Tiles<T>)>,
    read: Vec<(MatrixId, &Tiles<T>)>,
    panels: &Panels<'_, T>,
) -> Result<Outcome> {
    let (outgoing, packed) = mpsc::channel();
    let on_written = |task: TaskId, tile: TileRef, m: MatRef<'_, T>| {
        if !share.sends[task].iter().any(|&(t, _)| t == tile) {
            return Ok(());
        }
        let version = Some(share.whole[task.0]);
        let message =
            pack(tile, m, panels, (&share.plan, version)).ok_or_else(|| KernelError::Operands {
                op: share.graph.task(task).op,
                reason: format!(
                    "tile ({}, {}) has an index too large for a message",
                    tile.row, tile.col
                ),
            })?;
        // The loop is gone only once the run has stopped: nothing is lost.
        let _ = outgoing.send((task, tile, message));
        Ok(())
    };
    let receives = (&share.receives[..], &share.returning[..]);
    let tiles = TileSet::new(written, read, receives, &on_written);
    let shape = |tile| share.plan.shape(tile);
    let work = TileWork {
        graph: &share.graph,
        keys: &share.keys,
        shape: &shape,
        store: &tiles,
        backend: platform.backend(),
    };
    let pivoted;
    let tiled;
    let reflected;
    let work: &dyn Workload = match panels {
        Panels::None => &work,
        &Panels::TiledInterchanges(ref p, process_rows) => {
            tiled = TiledPivotedWork {
                tiles: TileWork { ..work },
                tiling: p.tiling,
                ipiv: p.ipiv,
                zero: p.zero,
                process_rows,
            };
            &tiled
        }
        Panels::Interchanges(p) => {
            pivoted = PivotedWork {
                tiles: TileWork { ..work },
                tiling: p.tiling,
                ipiv: p.ipiv,
                zero: p.zero,
                // A rank's panels run on its CPU clusters.
                found: &[],
            };
            &pivoted
        }
        Panels::Reflectors(r) => {
            reflected = ReflectorWork {
                tiles: TileWork { ..work },
                tiling: r.tiling,
                inner: r.inner,
                ts: r.ts,
                columns: r.columns,
                // A rank's panels run on its CPU clusters (its applications take their T's from
                // `ts`, a copy each where a device runs one).
                found: &[],
                shared: &[],
            };
            &reflected
        }
    };
    // The plan's own restrictions and preferences (QR's kernels on CPU clusters only).
    let own = share.plan.run_options(&RunOptions::default());
    let options = RunOptions {
        scheduler: run.scheduler,
        priorities: Some(share.priorities.clone()),
        restrictions: own.restrictions,
        preferences: own.preferences,
        ..RunOptions::default()
    };
    let timeout = waiting(run);
    // Tiles the run only reads are packed before any task runs (as ScaLAPACK's local
    // arrays are filled before its timer starts). The agreement on them is the start: no rank
    // completes it before every rank has reached it.
    let initial = share.pack_initial(&tiles);
    agree_within(
        comm,
        initial.as_ref().err().cloned(),
        timeout,
        "the start of the run",
    )?;
    let initial = initial.unwrap_or_default();
    let start = Instant::now();
    let (mut run, exchanged) = execute_beside(platform, work, &options, |inbox| {
        Exchange::new(comm, share, &tiles, packed, timeout, panels).run(inbox, initial)
    });
    // This rank's tiles whose final version came back mid-run, into their places.
    if let Ok(trace) = &run
        && let Err(why) = tiles.settle()
    {
        run = Err(hetla_runtime::RunError {
            step: RunStep::Outside,
            failure: hetla_runtime::TaskFailure::Outside(why),
            trace: Box::new(trace.clone()),
        });
    }
    let mine = start.elapsed().as_secs_f64();
    agree_outcome(comm, share, (run, exchanged?, mine), timeout)
}

/// The same outcome of a run on every rank (this rank's `run`, what its loop `exchanged` and its
/// seconds `mine`), agreed within `timeout` (see [`run_share`]).
fn agree_outcome<C: Communicator>(
    comm: &C,
    share: &Share,
    (run, exchanged, mine): (std::result::Result<Trace, RunError>, Exchanged, f64),
    timeout: Duration,
) -> Result<Outcome> {
    // The same outcome on every rank: the slowest rank's seconds, the first failed pivot, else the
    // lowest rank that failed on its own (not stopped by another's failure), in one collective.
    let run = run.map_err(|e| {
        let stopped = e.step == RunStep::Outside;
        (
            crate::plan::run_error_in(&share.plan, &share.graph, e),
            stopped,
        )
    });
    let pivot = match &run {
        Err((Error::NotPositiveDefinite { column }, _)) => *column as u64,
        _ => u64::MAX,
    };
    let own = run.as_ref().err().filter(|(_, stopped)| !stopped);
    // Seconds travel as their bits: for a number >= 0 their order is the number's.
    let mine = [
        mine.to_bits(),
        pivot,
        u64::from(own.is_some()),
        exchanged.bytes_sent as u64,
    ];
    let all = gather_within(comm, &mine, timeout, "the end of the run")?;
    let first_pivot = all.iter().map(|r| r[1]).min().unwrap_or(u64::MAX);
    if first_pivot != u64::MAX {
        return Err(Error::NotPositiveDefinite {
            column: first_pivot as usize,
        });
    }
    if let Some((e, _)) = own {
        return Err(Error::Distributed {
            rank: share.rank.0,
            reason: e.to_string(),
        });
    }
    if let Some(first) = all.iter().position(|r| r[2] != 0) {
        return Err(Error::Distributed {
            rank: first,
            reason: REFUSED.into(),
        });
    }
    let trace = run.map_err(|(e, _)| Error::Distributed {
        rank: share.rank.0,
        reason: e.to_string(),
    })?;
    Ok(Outcome {
        seconds: all.iter().map(|r| f64::from_bits(r[0])).fold(0.0, f64::max),
        trace,
        exchanged,
        bytes_sent_by_rank: all.iter().map(|r| r[3] as usize).collect(),
    })
}

/// How long a distributed call of `run`'s builder waits for another rank before presuming it dead.
pub(crate) fn waiting(run: &RunConfig) -> Duration {
    run.progress_timeout.unwrap_or(DEFAULT_PROGRESS_TIMEOUT)
}

/// Every rank's `mine` (each as long as this rank's), in rank order, from a non-blocking all-gather
/// that waits at most `timeout` for the ranks to reach it: a collective step of a distributed call
/// (`step`, named in the error) that cannot hang on a rank that stopped. On timeout the collective
/// is left unfinished (its buffers to the process's end: without its peer, MPI cannot end cleanly,
/// and the caller's error ends the job).
pub(crate) fn gather_within<C: Communicator>(
    comm: &C,
    mine: &[u64],
    timeout: Duration,
    step: &str,
) -> Result<Vec<Vec<u64>>> {
    let size = comm.size() as usize;
    let all = collective_within(
        comm,
        mine,
        mine.len() * size,
        (timeout, step),
        |send, receive| comm.immediate_all_gather_into(StaticScope, send, receive),
    )?;
    Ok(all.chunks(mine.len().max(1)).map(<[u64]>::to_vec).collect())
}

/// The element-wise maximum of every rank's `mine` (each as long as this rank's), on every rank,
/// from a non-blocking all-reduce waiting at most `timeout` ([`gather_within`]'s): O(mine) words a
/// rank however many ranks there are.
pub(crate) fn max_within<C: Communicator>(
    comm: &C,
    mine: &[u64],
    timeout: Duration,
    step: &str,
) -> Result<Vec<u64>> {
    collective_within(comm, mine, mine.len(), (timeout, step), |send, receive| {
        let max = mpi::collective::SystemOperation::max();
        comm.immediate_all_reduce_into(StaticScope, send, receive, max)
    })
}

/// Runs the non-blocking collective `start` makes from this rank's `mine` into `len` words, polling
/// it for at most `timeout` (its `step` named in the error): the words once every rank took part.
/// On timeout the collective is left unfinished, its buffers to the process's end.
fn collective_within<C: Communicator>(
    comm: &C,
    mine: &[u64],
    len: usize,
    (timeout, step): (Duration, &str),
    start: impl FnOnce(&'static [u64], &'static mut [u64]) -> Request<'static, [u64], StaticScope>,
) -> Result<Vec<u64>> {
    let send: &'static [u64] = Box::leak(mine.to_vec().into_boxed_slice());
    let send_pointer = send as *const [u64] as *mut [u64];
    let receive: &'static mut [u64] = Box::leak(vec![0; len].into_boxed_slice());
    let receive_pointer = receive as *mut [u64];
    let mut request = start(send, receive);
    let started = Instant::now();
    let mut nap = Duration::from_micros(20);
    loop {
        match request.test() {
            Ok(_) => break,
            Err(pending) => request = pending,
        }
        if started.elapsed() > timeout {
            std::mem::forget(request);
            return Err(Error::Distributed {
                rank: comm.rank() as usize,
                reason: format!(
                    "nothing arrived for {:.0} s from some rank at {step} while this rank waited for every rank: presumed dead",
                    timeout.as_secs_f64()
                ),
            });
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_micros(500));
    }
    // SAFETY: both leaked above, and the collective that used them is complete.
    let (send, all) = unsafe { (Box::from_raw(send_pointer), Box::from_raw(receive_pointer)) };
    drop(send);
    Ok(all.into_vec())
}

/// [`agree`](super::matrix::agree) within `timeout` ([`gather_within`]): when any rank found a
/// problem, every rank returns an error.
pub(crate) fn agree_within<C: Communicator>(
    comm: &C,
    problem: Option<String>,
    timeout: Duration,
    step: &str,
) -> Result<()> {
    let all = gather_within(comm, &[u64::from(problem.is_some())], timeout, step)?;
    match problem {
        Some(reason) => Err(Error::Distributed {
            rank: comm.rank() as usize,
            reason,
        }),
        None => match all.iter().position(|r| r[0] != 0) {
            Some(first) => Err(Error::Distributed {
                rank: first,
                reason: REFUSED.into(),
            }),
            None => Ok(()),
        },
    }
}

/// One distributed run, as every rank agreed it ended.
pub(crate) struct Outcome {
    pub seconds: f64,
    pub trace: Trace,
    pub exchanged: Exchanged,
    pub bytes_sent_by_rank: Vec<usize>,
}

/// This rank's share of a plan split over the grid ([`RankShare`]), with what the run and the
/// exchange need.
pub(crate) struct Share {
    pub plan: Plan,
    pub rank: Rank,
    /// The grid the plan is split over.
    plan_grid: hetla_factorizations::ProcessGrid,
    share: RankShare,
    /// Each task's kernel.
    keys: Vec<KernelKey>,
    /// Bytes each rank sends ([`messages`](hetla_factorizations::messages)' count; for LU, each
    /// panel's rows from its diagonal down and its interchanges).
    pub bytes_expected: Vec<usize>,
}

impl std::ops::Deref for Share {
    type Target = RankShare;

    fn deref(&self) -> &RankShare {
        &self.share
    }
}

impl Share {
    /// `rank`'s share of `plan` on `grid`.
    pub fn new(plan: Plan, grid: hetla_factorizations::ProcessGrid, rank: Rank) -> Result<Self> {
        Self::carrying(plan, grid, rank, |_, _| 0)
    }

    /// [`Share::new`] whose messages carry `extra` bytes each beside their tiles (the tiled QR's
    /// T's, which the plan does not size).
    pub fn carrying(
        plan: Plan,
        grid: hetla_factorizations::ProcessGrid,
        rank: Rank,
        extra: impl Fn(&Plan, &hetla_factorizations::Message) -> usize,
    ) -> Result<Self> {
        // Found alike on every rank, so each says it of itself.
        let mut split = plan.split(&grid).map_err(|e| Error::Distributed {
            rank: rank.0,
            reason: e.to_string(),
        })?;
        let mut bytes_expected =
            hetla_factorizations::bytes_sent(&grid, &split.messages, |t| plan.message_bytes(t));
        for m in &split.messages {
            bytes_expected[m.from.0] += extra(&plan, m);
        }
        let share = split.ranks.swap_remove(rank.0);
        let keys = share
            .whole
            .iter()
            .map(|&t| plan.keys()[t.0].clone())
            .collect();
        Ok(Self {
            plan,
            rank,
            plan_grid: grid,
            share,
            keys,
            bytes_expected,
        })
    }

    /// Zero tiles of `matrix` for those of its tiles that this rank owns and its tasks touch (the
    /// tiled LU's pivots and exchange tiles: work space, written before it is read).
    pub fn scratch<T: Wire>(&self, matrix: MatrixId) -> Tiles<T> {
        let grid = self.plan_grid;
        let mut tiles = Tiles::new();
        for task in self.graph.tasks() {
            for a in task.accesses.iter().filter(|a| a.tile.matrix == matrix) {
                if grid.owner(a.tile) == self.rank {
                    let (r, c) = self.plan.shape(a.tile);
                    tiles
                        .entry((a.tile.row, a.tile.col))
                        .or_insert_with(|| Mat::zeros(r, c));
                }
            }
        }
        tiles
    }

    /// Zero tiles for the partial sums this rank's tasks write (none outside a distributed
    /// substitution).
    pub fn zero_sums<T: Wire>(&self) -> Tiles<T> {
        self.graph
            .tasks()
            .iter()
            .flat_map(|t| &t.accesses)
            .filter(|a| a.tile.matrix == SUMS && a.mode.writes())
            .map(|a| {
                let (rows, cols) = self.plan.shape(a.tile);
                ((a.tile.row, a.tile.col), Mat::zeros(rows, cols))
            })
            .collect()
    }

    /// The tiles of this rank sent as the run finds them, packed, each with its destinations (see
    /// [`RankShare::initial_sends`]), or which of them this rank lacks.
    fn pack_initial<'p, T: Wire>(
        &'p self,
        tiles: &TileSet<'_, T>,
    ) -> std::result::Result<Vec<Outgoing<'p, T>>, String> {
        use crate::tiles::TileStore;
        self.initial_sends
            .iter()
            .map(|(tile, to)| {
                let (m, r, c) = (tile.matrix.0, tile.row, tile.col);
                let view = tiles.tile(*tile).ok_or_else(|| {
                    format!("tile ({r}, {c}) of matrix {m} is to be sent from here, which does not hold it")
                })?;
                let packed = wire::message(*tile, view).map(|mut p| {
                    p.push(T::index(0));
                    p
                });
                let packed = packed.ok_or_else(|| {
                    format!("tile ({r}, {c}) of matrix {m} has an index too large for a message")
                })?;
                Ok((&to[..], packed))
            })
            .collect()
    }
}

/// A packed tile and the ranks it goes to.
type Outgoing<'p, T> = (&'p [Rank], Vec<<T as Wire>::Part>);

/// A packed tile in flight to its destinations: the buffer lives until every send of it is
/// complete.
struct InFlight<P: Equivalence + 'static> {
    buffer: *mut [P],
    requests: Vec<Request<'static, [P], StaticScope>>,
}

/// A message being received: the buffer lives until the receive is complete.
struct Arriving<P: Equivalence + 'static> {
    from: Rank,
    tag: i32,
    buffer: *mut [P],
    request: Request<'static, [P], StaticScope>,
}

/// What the communication loop did.
pub(crate) struct Exchanged {
    pub tiles_sent: usize,
    pub bytes_sent: usize,
}

/// The communication loop of one rank (on the calling thread, beside the run).
struct Exchange<'r, T: Wire, C: Communicator> {
    comm: &'r C,
    share: &'r Share,
    tiles: &'r TileSet<'r, T>,
    packed: mpsc::Receiver<(TaskId, TileRef, Vec<T::Part>)>,
    timeout: Duration,
    in_flight: Vec<InFlight<T::Part>>,
    arriving: Vec<Arriving<T::Part>>,
    /// Tiles received from each rank, and what each said it sent in its last message.
    received_from: Vec<usize>,
    ended_from: Vec<Option<usize>>,
    sent_to: Vec<usize>,
    done: Exchanged,
    /// What a block-column factorisation's panels carry.
    panels: &'r Panels<'r, T>,
}

impl<'r, T: Wire, C: Communicator> Exchange<'r, T, C> {
    fn new(
        comm: &'r C,
        share: &'r Share,
        tiles: &'r TileSet<'r, T>,
        packed: mpsc::Receiver<(TaskId, TileRef, Vec<T::Part>)>,
        timeout: Duration,
        panels: &'r Panels<'r, T>,
    ) -> Self {
        let size = comm.size() as usize;
        let mut ended_from = vec![None; size];
        ended_from[share.rank] = Some(0);
        Self {
            comm,
            share,
            tiles,
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
            panels,
        }
    }

    /// Moves tiles until this rank's run has stopped, every rank has said its last word and every
    /// send is complete; `initial` leaves first.
    fn run(mut self, inbox: &Inbox<'_, '_>, initial: Vec<Outgoing<'_, T>>) -> Result<Exchanged> {
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
                while let Ok((task, tile, packed)) = self.packed.try_recv() {
                    self.post(self.sends_of(task, tile), packed);
                    progressed = true;
                }
            }
            // Matched as they come, received without blocking: a sender that stops in the
            // middle of a large message must not hold this loop.
            while let Some((message, status)) = self.comm.any_process().immediate_matched_probe() {
                let count = status.count(T::Part::equivalent_datatype()).max(0) as usize;
                let buffer: &'static mut [T::Part] =
                    Box::leak(vec![T::Part::default(); count].into_boxed_slice());
                let pointer = buffer as *mut [T::Part];
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
                    while let Ok((task, tile, packed)) = self.packed.try_recv() {
                        self.post(self.sends_of(task, tile), packed);
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
                if let Ok((task, tile, packed)) = self.packed.recv_timeout(nap) {
                    self.post(self.sends_of(task, tile), packed);
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

    /// The ranks the version of `tile` that `task` wrote goes to.
    fn sends_of(&self, task: TaskId, tile: TileRef) -> Vec<Rank> {
        let share: &'r Share = self.share;
        let to = share.sends[task].iter().filter(|&&(t, _)| t == tile);
        to.map(|&(_, r)| r).collect()
    }

    /// Posts the sends of a packed tile to the ranks `to`.
    fn post(&mut self, to: impl AsRef<[Rank]>, packed: Vec<T::Part>) {
        let to = to.as_ref();
        // Without the tile's place and its version.
        let bytes = (packed.len() - 4) * size_of::<T::Part>();
        let buffer: &'static [T::Part] = Box::leak(packed.into_boxed_slice());
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
            buffer: buffer as *const [T::Part] as *mut [T::Part],
            requests,
        });
    }

    /// A message from `from`: a tile, delivered to the tasks that read it, or `from`'s last word.
    /// Stores what the panel of `tile` (its first row and width) carried: LU's interchanges or QR's
    /// T, before the panel's readers are told it is in.
    fn store_carried(
        &self,
        tile: TileRef,
        (first, width): (usize, usize),
        carried: &[T::Part],
    ) -> std::result::Result<(), String> {
        match self.panels {
            Panels::None | Panels::TiledInterchanges(..) => Ok(()),
            Panels::Interchanges(pivots) => {
                for (i, &p) in carried.iter().enumerate() {
                    let row =
                        T::as_index(p).filter(|&r| r >= first + i && r < pivots.tiling.rows());
                    let Some(row) = row else {
                        return Err(format!("whose interchange {i} is not a row of its panel"));
                    };
                    pivots.ipiv[first + i].store(row, Relaxed);
                }
                Ok(())
            }
            Panels::Reflectors(r) => {
                let t = wire::tile_of::<T>(r.t_rows(width), width, carried)
                    .ok_or_else(|| "whose T has the wrong size".to_string())?;
                r.ts[ReflectorWork::<T>::slot(&r.tiling, tile, false)]
                    .set(t)
                    .map_err(|_| "whose T arrived twice".to_string())
            }
        }
    }

    /// The T slot and shape of the T that version `version` of `tile` carries: the tiled QR's tile
    /// whose reflectors that version's task made (see [`pack`]).
    fn carried_t(&self, tile: TileRef, version: Option<TaskId>) -> Option<(usize, (usize, usize))> {
        let Panels::Reflectors(r) = self.panels else {
            return None;
        };
        carried_t::<T>(
            &self.share.plan,
            (r.tiling, r.inner, r.travel),
            tile,
            version,
        )
    }

    fn receive(&mut self, inbox: &Inbox<'_, '_>, from: Rank, tag: i32, data: Vec<T::Part>) {
        if tag == END {
            let word = |i: usize| data.get(i).and_then(|&p| T::as_index(p));
            let (failed, sent) = (word(0) == Some(1), word(1));
            self.ended_from[from] = Some(sent.unwrap_or(0));
            if failed && !inbox.stopped() {
                inbox.fail(format!("rank {from} failed"));
            }
            return;
        }
        self.received_from[from] += 1;
        // The version last: 0 for the tile as the run found it, else its writer's id + 1.
        let (version, data) = match data.split_last() {
            Some((&v, rest)) => (T::as_index(v).map(|v| v.checked_sub(1).map(TaskId)), rest),
            None => (None, &data[..]),
        };
        let (Some(version), Some((tile, parts))) = (version, wire::named::<T>(data)) else {
            inbox.fail(format!(
                "rank {from} sent a tile message of {} values, without its tile's place",
                data.len()
            ));
            return;
        };
        let wrong = |why: String| {
            let (m, r, c) = (tile.matrix.0, tile.row, tile.col);
            format!("rank {from} sent tile ({r}, {c}) of matrix {m}, {why}")
        };
        let (mut rows, cols) = self.share.plan.shape(tile);
        let mut parts = parts;
        if let Some((first, width)) = self.panels.panel(tile.col) {
            let extra = match self.panels {
                Panels::Reflectors(r) => r.t_rows(width) * width * T::PARTS,
                _ => width,
            };
            let Some(split) = parts.len().checked_sub(extra) else {
                inbox.fail(wrong(format!(
                    "with {} values, fewer than the {extra} its panel carries",
                    parts.len()
                )));
                return;
            };
            let (entries, carried) = parts.split_at(split);
            if let Err(why) = self.store_carried(tile, (first, width), carried) {
                inbox.fail(wrong(why));
                return;
            }
            (rows, parts) = (rows - first, entries);
        } else if let Some((slot, t_shape)) = self.carried_t(tile, version) {
            let Some(split) = parts.len().checked_sub(t_shape.0 * t_shape.1 * T::PARTS) else {
                inbox.fail(wrong("without the T its reflectors carry".into()));
                return;
            };
            let (entries, carried) = parts.split_at(split);
            let Some(t) = wire::tile_of::<T>(t_shape.0, t_shape.1, carried) else {
                inbox.fail(wrong("whose T has the wrong size".into()));
                return;
            };
            if let Panels::Reflectors(r) = self.panels
                && r.ts[slot].set(t).is_err()
            {
                inbox.fail(wrong("whose T arrived twice".into()));
                return;
            }
            parts = entries;
        }
        let Some(m) = wire::tile_of::<T>(rows, cols, parts) else {
            inbox.fail(wrong(format!(
                "with {} values instead of {rows} x {cols}",
                parts.len() / T::PARTS
            )));
            return;
        };
        if let Err(why) = self.tiles.fill((tile, version), m) {
            inbox.fail(wrong(why));
            return;
        }
        let receipts = &self.share.receives;
        if let Ok(i) = receipts.binary_search_by_key(&(tile, version), |r| (r.tile, r.version)) {
            for &task in &receipts[i].readers {
                inbox.arrived(task);
            }
        }
    }

    /// Tells every other rank how many tiles it was sent, and whether this rank failed.
    fn end(&mut self, failed: bool) {
        for r in (0..self.comm.size() as usize).filter(|&r| r != self.share.rank.0) {
            let word = [T::index(usize::from(failed)), T::index(self.sent_to[r])];
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
                    rank: self.share.rank.0,
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
                    && (inbox.stopped()
                        || self.received_from[r]
                            < self.share.expected_from.get(&Rank(r)).copied().unwrap_or(0))
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
            rank: self.share.rank.0,
            reason: format!(
                "nothing arrived for {:.0} s from rank(s) {} while this rank waited for them: presumed dead",
                self.timeout.as_secs_f64(),
                silent.join(", ")
            ),
        }
    }
}

impl<P: Equivalence + 'static> InFlight<P> {
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

/// The message of a tile a task wrote: the tile; for LU, a panel's rows from its diagonal down and
/// its interchanges; for QR in block columns, those rows and its T; for the tiled QR, a tile whose
/// reflectors the version's task made, with their T (see the module documentation). Then the
/// version: 0 for the tile as the run found it, else its writer's id (in the whole graph) + 1.
/// `None` when an index is too large to name (or a QR's T is missing).
fn pack<T: Wire>(
    tile: TileRef,
    m: MatRef<'_, T>,
    panels: &Panels<'_, T>,
    (plan, version): (&Plan, Option<TaskId>),
) -> Option<Vec<T::Part>> {
    let stamp = T::index(version.map_or(0, |v| v.0 + 1));
    if version.is_some_and(|v| v.0 + 1 >= 1 << 24) {
        return None;
    }
    let Some((first, width)) = panels.panel(tile.col) else {
        let mut message = wire::message(tile, m)?;
        if let Panels::Reflectors(r) = panels
            && let Some((slot, _)) =
                carried_t::<T>(plan, (r.tiling, r.inner, r.travel), tile, version)
        {
            // The task set its T before its tiles were handed over.
            message.extend(wire::parts_of(r.ts[slot].get()?.as_ref()));
        }
        message.push(stamp);
        return Some(message);
    };
    let mut message = wire::message(tile, m.subrows(first, m.nrows() - first))?;
    match panels {
        Panels::None | Panels::TiledInterchanges(..) => {}
        // Exact as parts: a distributed LU refuses orders from 2^24 on before any work.
        Panels::Interchanges(pivots) => {
            message.extend((first..first + width).map(|i| T::index(pivots.ipiv[i].load(Relaxed))))
        }
        // The panel's factorisation set its T before the panel was handed over.
        Panels::Reflectors(r) => {
            let t = r.ts[ReflectorWork::<T>::slot(&r.tiling, tile, false)].get()?;
            message.extend(wire::parts_of(t.as_ref()));
        }
    }
    message.push(stamp);
    Some(message)
}

/// The T slot and shape (rows, columns) of the T that version `version` of `tile` carries in the
/// tiled QR: the T of the reflectors that version's task made in `tile` (a tile QR's in its tile,
/// an elimination's in the tile it eliminated) when that task is one of `travel`, `None` for any
/// other version.
pub(crate) fn carried_t<T: Wire>(
    plan: &Plan,
    (tiling, inner, travel): (Tiling, usize, &std::collections::HashSet<TaskId>),
    tile: TileRef,
    version: Option<TaskId>,
) -> Option<(usize, (usize, usize))> {
    let version = version.filter(|v| travel.contains(v))?;
    if tile.matrix != hetla_factorizations::FACTOR {
        return None;
    }
    let task = plan.graph().task(version);
    if !task.op.is_qr() || task.op.writes() == 0 {
        return None;
    }
    let (of, pair) = hetla_factorizations::qr_t_slot(task);
    let makes = matches!(
        task.op,
        hetla_kernels::Op::Geqrt | hetla_kernels::Op::Tsqrt | hetla_kernels::Op::Ttqrt
    );
    if !makes || of != tile {
        return None;
    }
    let (rows, cols) = plan.shape(tile);
    // A tile QR has as many reflectors as its shorter side; an elimination as the triangle's
    // columns (the tile's own).
    let k = if pair { cols } else { rows.min(cols) };
    let slot = ReflectorWork::<T>::slot(&tiling, tile, pair);
    Some((slot, (inner.min(k).max(1), k)))
}

/// The tasks of a tiled QR's `plan` on `grid` whose T a task on another rank applies (the producer
/// of each T is the only task writing its slot, and its appliers read the version it wrote).
pub(crate) fn travelling_ts(
    plan: &Plan,
    grid: &hetla_factorizations::ProcessGrid,
) -> std::collections::HashSet<TaskId> {
    use hetla_kernels::Op;
    let graph = plan.graph();
    let rank = |t| hetla_factorizations::task_rank(graph, grid, t);
    let mut producer = std::collections::HashMap::new();
    let mut travel = std::collections::HashSet::new();
    for t in graph.ids() {
        let task = graph.task(t);
        if !task.op.is_qr() {
            continue;
        }
        let slot = hetla_factorizations::qr_t_slot(task);
        match task.op {
            Op::Geqrt | Op::Tsqrt | Op::Ttqrt => {
                producer.insert(slot, t);
            }
            _ => {
                if let Some(&p) = producer.get(&slot).filter(|&&p| rank(p) != rank(t)) {
                    travel.insert(p);
                }
            }
        }
    }
    travel
}
