//! A cluster's team: one thread pinned to each of the cluster's cores, which runs the pieces of the
//! cluster's kernels.
//!
//! Why not rayon's fork-join: on the 16 Xeon cores of the GPU node (leases 4 and 5) a kernel cut
//! into k pieces on a k-core cluster's rayon pool ran at half of each core's rate. Rayon wakes at
//! most one sleeping thread per job it posts and lets the posting thread take back the pieces
//! nobody stole in time, so a piece's thread is whoever came first, and a thread that runs two of
//! four pieces while another sleeps is exactly 50%. A team makes each piece's thread fixed:
//!
//! - the leader (the cluster's worker, pinned to the cluster's first core while it leads, see
//!   [`Team::lead`]) posts piece i to helper i (pinned to core i) in that helper's own slot, runs
//!   piece 0 itself and waits for a countdown of the helpers still running; with more pieces than
//!   threads, thread t runs pieces t, t + k, t + 2k...; nobody steals;
//! - after a piece a helper spins for a while (tunable: [`Team::set_spin`], `HETLA_TEAM_SPIN_US`,
//!   default [`DEFAULT_SPIN`], long enough to span the gap between two kernels of a busy cluster),
//!   yielding its core to any other runnable thread every 64 turns, then parks until the next piece
//!   is posted. A parked helper is slow to get going on a virtual machine: on the 2-core
//!   development guest a 512 GEMM split in two ran at 0.62x two cores when its helper had parked
//!   since the previous kernel and 0.92x when it was still spinning;
//! - a piece that panics is caught on its thread and the panic resumed on the leader once every
//!   piece is done, so the team stays usable; a piece's error is its caller's business (the kernels
//!   keep the first one);
//! - with recording on ([`Team::lead`]'s `record`), every piece's thread, the CPU the OS ran it on
//!   and its start and end are kept for the trace ([`take_pieces`]).
//!
//! The kernels find the team of the thread they run on through a thread-local ([`run_pieces`]):
//! code that calls them outside a team (tests, the peers) keeps its own parallelism.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::ClusterError;
use crate::affinity::{Affinity, current_cpu, pin_current_thread, refused};

/// How long a helper spins after a piece before it parks, unless `HETLA_TEAM_SPIN_US` (or
/// [`Team::set_spin`]) says otherwise: longer than the runtime's gap between two kernels of a busy
/// cluster (tens of microseconds) and than the sequential diagonal block between two split steps of
/// a blocked POTRF.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

/// One piece of a cluster kernel as it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Which split call of the team it belongs to (counted from the team's start).
    pub call: u64,
    /// The piece's index in its call.
    pub index: usize,
    /// The team thread that ran it: 0 is the leader, i the helper pinned to the cluster's core i.
    pub thread: usize,
    /// The logical CPU the OS says the piece ended on (None where it cannot say).
    pub cpu: Option<usize>,
    /// When the piece started.
    pub start: Instant,
    /// When it ended.
    pub end: Instant,
}

/// The body of a kernel's pieces: called once with each piece's index.
type Body<'a> = dyn Fn(usize) + Sync + 'a;

/// What the leader posts to a helper.
#[derive(Clone, Copy)]
struct Job {
    /// The pieces' body, its lifetime erased (see [`Team::run`]'s SAFETY comment).
    body: *const Body<'static>,
    /// The number of pieces of the kernel.
    pieces: usize,
    /// The call's number.
    call: u64,
}

/// What a helper leaves for the leader.
#[derive(Default)]
struct Done {
    records: Vec<Piece>,
    panic: Option<Box<dyn Any + Send>>,
}

/// A helper's mailbox. `job` is written by the leader only while `posted` is false and read by the
/// helper only while it is true; `done` is written by the helper only while `posted` is true and
/// read by the leader only after the countdown reached zero (every helper has cleared `posted`).
struct Slot {
    posted: AtomicBool,
    job: UnsafeCell<Job>,
    done: UnsafeCell<Done>,
    thread: OnceLock<Thread>,
}

/// What the leader and the helpers share.
struct Shared {
    cpus: Vec<usize>,
    /// Helper i's slot is `slots[i - 1]`.
    slots: Vec<Slot>,
    /// Helpers still running pieces of the current kernel.
    remaining: AtomicUsize,
    /// Split calls so far.
    calls: AtomicU64,
    stop: AtomicBool,
    spin_ns: AtomicU64,
    /// Held by the leader: one kernel at a time.
    lead: Mutex<()>,
    /// Whether the current leader keeps pieces, and those it kept.
    record: AtomicBool,
    log: Mutex<Vec<Piece>>,
}

// SAFETY: the slots' cells are handed over between the leader and one helper by `posted` (Release
// on the side that wrote, Acquire on the side that reads) and the countdown, as `Slot` describes; a
// job's body is `Sync` and outlives the kernel (see `Team::run`).
unsafe impl Sync for Shared {}
// SAFETY: as above: nothing in `Shared` is tied to the thread that created it.
unsafe impl Send for Shared {}

thread_local! {
    /// The team this thread leads, while it leads one.
    static LEADING: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
    /// Whether this thread is inside a team kernel (a piece that splits again runs alone).
    static IN_KERNEL: Cell<bool> = const { Cell::new(false) };
}

/// A persistent team of threads pinned to a cluster's cores.
pub struct Team {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("cpus", &self.shared.cpus)
            .finish()
    }
}

/// The spin after a piece from `HETLA_TEAM_SPIN_US`, else [`DEFAULT_SPIN`].
fn spin_from_env() -> Duration {
    std::env::var("HETLA_TEAM_SPIN_US")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_SPIN, Duration::from_micros)
}

impl Team {
    /// Starts helpers pinned to `cpus[1..]` (the leader takes `cpus[0]` when it leads); `name`
    /// prefixes their names ("hetla-c0-t1" is helper 1 of cluster 0). A pin the OS refuses is an
    /// error unless unpinned threads are allowed ([`crate::allow_unpinned`]), then a warning.
    pub fn new(cpus: &[usize], name: &str) -> Result<Self, ClusterError> {
        if cpus.is_empty() {
            return Err(ClusterError::ZeroSized {
                spec: name.to_owned(),
            });
        }
        let shared = Arc::new(Shared {
            cpus: cpus.to_vec(),
            slots: (1..cpus.len())
                .map(|_| Slot {
                    posted: AtomicBool::new(false),
                    job: UnsafeCell::new(Job {
                        body: std::ptr::null::<fn(usize)>() as *const Body<'static>,
                        pieces: 0,
                        call: 0,
                    }),
                    done: UnsafeCell::new(Done::default()),
                    thread: OnceLock::new(),
                })
                .collect(),
            remaining: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            spin_ns: AtomicU64::new(spin_from_env().as_nanos() as u64),
            lead: Mutex::new(()),
            record: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
        });
        let mut team = Self {
            shared: Arc::clone(&shared),
            helpers: Vec::new(),
        };
        let (pinned, results) = std::sync::mpsc::channel();
        for (i, &cpu) in cpus.iter().enumerate().skip(1) {
            let theirs = Arc::clone(&shared);
            let pinned = pinned.clone();
            let thread = format!("{name}-t{i}");
            let handle = std::thread::Builder::new()
                .name(thread.clone())
                .spawn(move || {
                    let ok = pin_current_thread(cpu);
                    let _ = pinned.send((ok, cpu, thread));
                    drop(pinned);
                    helper(&theirs, i);
                })
                .map_err(|e| ClusterError::Pool {
                    reason: format!("cannot start helper {i} of {name}: {e}"),
                })?;
            shared.slots[i - 1]
                .thread
                .set(handle.thread().clone())
                .expect("a helper's thread is set once");
            team.helpers.push(handle);
        }
        drop(pinned);
        for (ok, cpu, thread) in results {
            if !ok {
                // Dropping `team` stops and joins the helpers started.
                refused(cpu, &thread)?;
            }
        }
        Ok(team)
    }

    /// The logical CPUs of the team, thread i on `cpus()[i]`.
    pub fn cpus(&self) -> &[usize] {
        &self.shared.cpus
    }

    /// How long a helper spins after a piece before it parks.
    pub fn spin(&self) -> Duration {
        Duration::from_nanos(self.shared.spin_ns.load(Ordering::Relaxed))
    }

    /// Sets how long a helper spins after a piece before it parks (zero: it parks at once).
    pub fn set_spin(&self, spin: Duration) {
        self.shared.spin_ns.store(
            spin.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// Runs `f` on the calling thread as the team's leader: the thread is pinned to the team's
    /// first CPU for the time (its affinity restored after), and the kernels `f` calls run their
    /// pieces on the team ([`run_pieces`]). One leader at a time: a second caller waits. With
    /// `record`, the pieces are kept for [`take_pieces`] (cleared when `f` returns). A thread that
    /// already leads this team just runs `f`.
    pub fn lead<R>(&self, record: bool, f: impl FnOnce() -> R) -> R {
        let me: *const Shared = Arc::as_ptr(&self.shared);
        if LEADING.with(Cell::get) == me {
            return f();
        }
        let _one = self.shared.lead.lock().unwrap_or_else(|e| e.into_inner());
        let affinity = Affinity::of_current_thread();
        // A refused pin was an error or, unpinned threads allowed, a warning when the cluster was
        // built: not again at every lead.
        if !pin_current_thread(self.shared.cpus[0]) && !crate::unpinned_allowed() {
            eprintln!(
                "warning: a cluster's leader could not be pinned to CPU {}: its pieces run unpinned",
                self.shared.cpus[0]
            );
        }
        self.shared.record.store(record, Ordering::Relaxed);
        /// Restores the thread's state when `f` returns or unwinds.
        struct Restore<'a> {
            previous: *const Shared,
            affinity: Option<Affinity>,
            shared: &'a Shared,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                LEADING.with(|l| l.set(self.previous));
                self.shared.record.store(false, Ordering::Relaxed);
                self.shared
                    .log
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
                if let Some(affinity) = &self.affinity {
                    affinity.restore();
                }
            }
        }
        let _restore = Restore {
            previous: LEADING.with(|l| l.replace(me)),
            affinity,
            shared: &self.shared,
        };
        f()
    }

    /// Runs `pieces` pieces of `body` on the team (the caller is its leader): thread t runs the
    /// pieces t, t + k, ... of a k-thread team; returns when all are done, and resumes the first
    /// panic of a piece then.
    fn run(shared: &Shared, pieces: usize, body: &Body<'_>) {
        let k = shared.cpus.len();
        let helpers = k.min(pieces).saturating_sub(1);
        shared.remaining.store(helpers, Ordering::Relaxed);
        let call = shared.calls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the erased lifetime is never relied on past this call: `run` returns (or
        // unwinds) only after the countdown says every helper is done with the job.
        let erased: *const Body<'static> = unsafe { std::mem::transmute(body as *const Body<'_>) };
        for slot in &shared.slots[..helpers] {
            // SAFETY: the helper is not reading `job` (its `posted` is false since the last
            // countdown), so the leader may write it.
            unsafe {
                *slot.job.get() = Job {
                    body: erased,
                    pieces,
                    call,
                }
            };
            slot.posted.store(true, Ordering::Release);
            if let Some(thread) = slot.thread.get() {
                thread.unpark();
            }
        }
        let record = shared.record.load(Ordering::Relaxed);
        let mut mine = Vec::new();
        let leader = catch_unwind(AssertUnwindSafe(|| {
            run_share(body, (0, k), (call, pieces), record.then_some(&mut mine))
        }));
        let mut waited = 0u32;
        while shared.remaining.load(Ordering::Acquire) != 0 {
            waited = waited.saturating_add(1);
            if waited < 4096 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let mut panic = leader.err();
        let mut log = record.then(|| shared.log.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(log) = log.as_mut() {
            log.append(&mut mine);
        }
        for slot in &shared.slots[..helpers] {
            // SAFETY: the countdown is zero: every helper cleared `posted` and left `done`.
            let done = unsafe { &mut *slot.done.get() };
            if let Some(log) = log.as_mut() {
                log.append(&mut done.records);
            }
            done.records.clear();
            if let Some(p) = done.panic.take() {
                panic.get_or_insert(p);
            }
        }
        drop(log);
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for h in &self.helpers {
            h.thread().unpark();
        }
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs thread `t`'s share (pieces t, t + k, ...) of `pieces` pieces of split call `call`,
/// recording each into `records`.
fn run_share(
    body: &Body<'_>,
    (t, k): (usize, usize),
    (call, pieces): (u64, usize),
    mut records: Option<&mut Vec<Piece>>,
) {
    let was = IN_KERNEL.with(|c| c.replace(true));
    /// Clears the flag when the share returns or unwinds.
    struct Leave(bool);
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_KERNEL.with(|c| c.set(self.0));
        }
    }
    let _leave = Leave(was);
    for index in (t..pieces).step_by(k) {
        let start = Instant::now();
        body(index);
        if let Some(records) = records.as_deref_mut() {
            records.push(Piece {
                call,
                index,
                thread: t,
                cpu: current_cpu(),
                start,
                end: Instant::now(),
            });
        }
    }
}

/// Helper `i`'s life: wait for a piece (spinning, then parked), run it, count down.
fn helper(shared: &Shared, i: usize) {
    let slot = &shared.slots[i - 1];
    let k = shared.cpus.len();
    loop {
        let mut since = Instant::now();
        let mut turns = 0u32;
        while !slot.posted.load(Ordering::Acquire) {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            turns = turns.wrapping_add(1);
            if !turns.is_multiple_of(64) {
                std::hint::spin_loop();
            } else if since.elapsed().as_nanos() as u64 >= shared.spin_ns.load(Ordering::Relaxed) {
                // The leader unparks after posting; a token left by an earlier unpark only costs
                // one more turn.
                std::thread::park();
                since = Instant::now();
            } else {
                // Spinning, but giving the core to any other thread that wants it (a GPU's
                // packing thread on a lent core): a spinning helper never stalls one.
                std::thread::yield_now();
            }
        }
        // SAFETY: `posted` is set: the leader wrote `job` and touches neither cell until this
        // helper counts down.
        let (job, done) = unsafe { (*slot.job.get(), &mut *slot.done.get()) };
        let record = shared.record.load(Ordering::Relaxed);
        // SAFETY: the leader waits for the countdown before the body goes out of scope.
        let body = unsafe { &*job.body };
        let ran = catch_unwind(AssertUnwindSafe(|| {
            run_share(
                body,
                (i, k),
                (job.call, job.pieces),
                record.then_some(&mut done.records),
            )
        }));
        done.panic = ran.err();
        slot.posted.store(false, Ordering::Release);
        shared.remaining.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs `pieces` pieces of `body` (called with each index) on the team the calling thread leads,
/// and returns true; returns false, having run nothing, when the thread leads no team or is inside
/// a team's piece already (the caller then runs the pieces its own way). A panic of a piece is
/// resumed here once all pieces are done.
pub fn run_pieces(pieces: usize, body: &(dyn Fn(usize) + Sync)) -> bool {
    let shared = LEADING.with(Cell::get);
    if shared.is_null() || IN_KERNEL.with(Cell::get) || !teams_on() {
        return false;
    }
    // SAFETY: `LEADING` is set only inside `Team::lead`, which holds the team (and so its shared
    // part) borrowed until it resets the pointer.
    Team::run(unsafe { &*shared }, pieces, body);
    true
}

/// Whether kernels use the teams: yes unless `HETLA_TEAM=off` (then their pieces go to the
/// cluster's rayon pool, as before the teams: a switch to compare the two, read once).
fn teams_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("HETLA_TEAM").map_or(true, |v| v.trim() != "off"))
}

/// The pieces recorded since the last call on the team the calling thread leads with recording on
/// (empty otherwise), in the order the leader collected them.
pub fn take_pieces() -> Vec<Piece> {
    let shared = LEADING.with(Cell::get);
    if shared.is_null() {
        return Vec::new();
    }
    // SAFETY: as in `run_pieces`.
    let shared = unsafe { &*shared };
    std::mem::take(&mut *shared.log.lock().unwrap_or_else(|e| e.into_inner()))
}
