//! Data handles: one per tile, with a replica state on every memory node (MSI), and GPU memory
//! nodes used as caches of host memory.
//!
//! Before a task runs on a worker, the executor calls [`DataRegistry::start_task`]: each tile the
//! task uses becomes valid on the worker's memory node, and the call returns the copies this needs
//! (from host memory when it holds a valid replica, else from a node that does); a write leaves the
//! tile `Modified` on that node and `Invalid` everywhere else. The task's tiles stay pinned on the
//! node until [`DataRegistry::end_task`].
//!
//! A node may have a capacity (a GPU's memory budget; host memory has none). Making room evicts
//! unpinned replicas of the node; a replica that is the last valid copy of its tile is first
//! written back to host memory, so that no tile is ever lost. Which replica goes:
//!
//! - With the order the run expects to start its tasks ([`DataRegistry::expect_order`], the tasks
//!   by priority, which is what a worker's queue pops), the one whose next use is farthest
//!   (Belady's rule, on that order): a run out of core keeps what its next tasks need instead of
//!   what its last ones used. [`DataRegistry::started`] moves each tile's next use on as its tasks
//!   start.
//! - Without it, the least recently used one.
//!
//! [`DataRegistry::prefetch`] copies a tile ahead of the task that will read it (as soon as the
//! scheduler has assigned the task), without pinning it, and gives up rather than evict a pinned
//! tile, or, with an expected order, one needed sooner than the tile it would bring. On a CPU-only
//! platform there is one node (the host), tiles start valid there, and no call ever needs a copy:
//! the same code paths run.
//!
//! The registry only decides *what* moves; the executor carries the copies out (the simulated
//! executor by charging their time to links) and records them in the trace. An executor with real
//! device memory also needs to know when a replica is dropped (an eviction, or a write elsewhere),
//! to free it: with [`DataRegistry::log_steps`] the registry keeps every copy and release in the
//! order they must happen, and [`DataRegistry::take_steps`] hands them over.

use std::collections::BTreeSet;

use hetla_factorizations::{Mode, TaskId, TileRef};

/// A data handle: one tile of a run, numbered in the order the run's tasks first use it. Tables of
/// a run index by handle directly (`Vec<T>` and `[T]` implement `Index<Handle>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Handle(pub usize);

impl std::fmt::Display for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

hetla_factorizations::index_by!(Handle);

/// A memory node: 0 is host RAM; GPUs add theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct MemoryNode(pub usize);

/// The host memory node.
pub const HOST: MemoryNode = MemoryNode(0);

/// The state of one replica of a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    /// The only valid copy, newer than the others.
    Modified,
    /// A valid copy; others may be valid too.
    Shared,
    /// Stale or absent.
    Invalid,
}

/// A copy of one tile from a node to another, needed before a task can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Index of the data handle.
    pub handle: Handle,
    /// The tile.
    pub tile: TileRef,
    /// Source node (holds a valid replica).
    pub from: MemoryNode,
    /// Destination node.
    pub to: MemoryNode,
    /// Bytes copied.
    pub bytes: usize,
}

/// One change to memory the registry decided, in the order it must be carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Copy a tile between nodes.
    Copy(Transfer),
    /// Give `handle` a replica on a device `node` without copying anything into it: the task about
    /// to run there overwrites it unread ([`Mode::Write`]).
    Allocate {
        /// The data handle.
        handle: Handle,
        /// Its tile (for its shape).
        tile: TileRef,
        /// The node, not the host.
        node: MemoryNode,
    },
    /// Free the replica of `handle` on `node` (never host memory, which is the caller's).
    Release {
        /// The data handle.
        handle: Handle,
        /// The node, not the host.
        node: MemoryNode,
    },
}

/// A memory node has no room for the tiles of a task: its capacity is smaller than what the task
/// pins there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "memory node {node} (GPU {gpu}) holds {capacity} bytes, too few for the {needed} bytes a task pins there: use smaller tiles, or give the GPU more memory (--gpu-memory on this machine, `memory_gb` in a platform file)", gpu = node.saturating_sub(1)
)]
pub struct NoRoom {
    /// The node.
    pub node: usize,
    /// Its capacity in bytes.
    pub capacity: usize,
    /// Bytes the task would pin (its tiles plus those of the other running tasks there).
    pub needed: usize,
}

/// The data handles of one run: tiles, their replica states, and each node's occupancy.
#[derive(Debug, Clone)]
pub struct DataRegistry {
    tiles: Vec<TileRef>,
    bytes: Vec<usize>,
    /// `states[handle][node]`.
    states: Vec<Vec<ReplicaState>>,
    /// Bytes each node may hold (`None`: unlimited).
    capacity: Vec<Option<usize>>,
    /// Bytes of valid replicas on each node.
    used: Vec<usize>,
    /// Valid replicas per node by last use: (stamp, handle), oldest first.
    lru: Vec<BTreeSet<(u64, Handle)>>,
    /// `stamp[handle][node]`: the last use of the replica.
    stamp: Vec<Vec<u64>>,
    /// `pins[handle][node]`: running tasks using the replica.
    pins: Vec<Vec<u32>>,
    /// Bytes of the tiles pinned on each node.
    pinned: Vec<usize>,
    clock: u64,
    /// Copies and releases in order, when logged (see [`DataRegistry::log_steps`]).
    steps: Option<Vec<Step>>,
    /// Each tile's uses to come, when the order of the tasks is expected.
    uses: Option<Uses>,
}

/// The uses to come of every tile, by the rank of their tasks in the order a run expects to start
/// them ([`DataRegistry::expect_order`]).
#[derive(Debug, Clone)]
struct Uses {
    /// `rank[task]`: its place in the expected order.
    rank: Vec<u64>,
    /// `pending[handle]`: the ranks of the tasks using it that have not started.
    pending: Vec<BTreeSet<u64>>,
    /// Valid replicas per device node by next use: (rank, handle), soonest first.
    by_next: Vec<BTreeSet<(u64, Handle)>>,
}

/// The next use of a tile no task will use again.
const NEVER: u64 = u64::MAX;

impl Uses {
    fn next(&self, handle: Handle) -> u64 {
        self.pending[handle].first().copied().unwrap_or(NEVER)
    }
}

impl DataRegistry {
    /// Handles for `tiles` (with their sizes in bytes), valid on the host only, on a platform with
    /// `nodes` memory nodes of unlimited capacity.
    pub fn new(tiles: Vec<(TileRef, usize)>, nodes: usize) -> Self {
        Self::with_capacities(tiles, vec![None; nodes.max(1)])
    }

    /// Handles for `tiles`, valid on the host only, with the capacity of each node in bytes
    /// (`None`: unlimited; the host's is ignored, host memory holds every tile).
    pub fn with_capacities(tiles: Vec<(TileRef, usize)>, mut capacity: Vec<Option<usize>>) -> Self {
        if capacity.is_empty() {
            capacity.push(None);
        }
        capacity[HOST.0] = None;
        let nodes = capacity.len();
        let mut initial = vec![ReplicaState::Invalid; nodes];
        initial[HOST.0] = ReplicaState::Shared;
        let (tiles, bytes): (Vec<TileRef>, Vec<usize>) = tiles.into_iter().unzip();
        let n = tiles.len();
        let mut used = vec![0; nodes];
        used[HOST.0] = bytes.iter().sum();
        let mut lru = vec![BTreeSet::new(); nodes];
        lru[HOST.0] = (0..n).map(|h| (0, Handle(h))).collect();
        Self {
            tiles,
            bytes,
            states: vec![initial; n],
            capacity,
            used,
            lru,
            stamp: vec![vec![0; nodes]; n],
            pins: vec![vec![0; nodes]; n],
            pinned: vec![0; nodes],
            clock: 0,
            steps: None,
            uses: None,
        }
    }

    /// Evicts by next use from now on: `order` is every task of the run, in the order they are
    /// expected to start, each with its tiles (a handle listed twice counts once). A task not in it
    /// counts as never starting.
    pub fn expect_order<'a>(
        mut self,
        tasks: usize,
        order: impl IntoIterator<Item = (TaskId, &'a [(Handle, Mode)])>,
    ) -> Self {
        let mut rank = vec![NEVER; tasks];
        let mut pending = vec![BTreeSet::new(); self.len()];
        for (r, (task, accesses)) in order.into_iter().enumerate() {
            rank[task.0] = r as u64;
            for &(h, _) in accesses {
                pending[h].insert(r as u64);
            }
        }
        let mut uses = Uses {
            rank,
            pending,
            by_next: vec![BTreeSet::new(); self.capacity.len()],
        };
        for node in 1..self.capacity.len() {
            for &(_, h) in &self.lru[node] {
                let next = uses.next(h);
                uses.by_next[node].insert((next, h));
            }
        }
        self.uses = Some(uses);
        self
    }

    /// `task` has started with its tiles `accesses`: their next uses move on to the tasks after it.
    /// Nothing without an expected order.
    pub fn started(&mut self, task: TaskId, accesses: &[(Handle, Mode)]) {
        let Some(uses) = &mut self.uses else {
            return;
        };
        let rank = uses.rank[task.0];
        for &(h, _) in accesses {
            let before = uses.next(h);
            if !uses.pending[h].remove(&rank) {
                continue;
            }
            let after = uses.next(h);
            for node in 1..self.states[h].len() {
                if self.states[h][node] != ReplicaState::Invalid {
                    uses.by_next[node].remove(&(before, h));
                    uses.by_next[node].insert((after, h));
                }
            }
        }
    }

    /// Keeps every copy and release from now on, in order, for [`DataRegistry::take_steps`].
    pub fn log_steps(mut self) -> Self {
        self.steps = Some(Vec::new());
        self
    }

    /// The copies and releases decided since the last call (none unless logged).
    pub fn take_steps(&mut self) -> Vec<Step> {
        self.steps.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn log(&mut self, step: Step) {
        if let Some(steps) = &mut self.steps {
            steps.push(step);
        }
    }

    /// Number of handles.
    pub fn len(&self) -> usize {
        self.tiles.len()
    }

    /// Whether there is no handle.
    pub fn is_empty(&self) -> bool {
        self.tiles.is_empty()
    }

    /// Bytes of a handle's tile.
    pub fn bytes(&self, handle: Handle) -> usize {
        self.bytes[handle]
    }

    /// The state of a handle on a node.
    pub fn state(&self, handle: Handle, node: MemoryNode) -> ReplicaState {
        self.states[handle][node.0]
    }

    /// Whether a handle has a valid replica on a node.
    pub fn is_valid(&self, handle: Handle, node: MemoryNode) -> bool {
        self.state(handle, node) != ReplicaState::Invalid
    }

    /// The nodes holding a valid replica of `handle`.
    pub fn holders(&self, handle: Handle) -> Vec<MemoryNode> {
        (0..self.states[handle].len())
            .map(MemoryNode)
            .filter(|&n| self.is_valid(handle, n))
            .collect()
    }

    /// Bytes of valid replicas on a node.
    pub fn used(&self, node: MemoryNode) -> usize {
        self.used[node.0]
    }

    /// The node a copy of `handle` to another node would come from: host memory when it holds a
    /// valid replica, else the lowest node that does.
    pub fn source(&self, handle: Handle) -> MemoryNode {
        let states = &self.states[handle];
        if states[HOST.0] != ReplicaState::Invalid {
            return HOST;
        }
        states
            .iter()
            .position(|&s| s != ReplicaState::Invalid)
            .map_or(HOST, MemoryNode)
    }

    /// Makes every tile of a task valid on `node` in its mode and pins them there until
    /// [`DataRegistry::end_task`]. Returns the copies, in order: write-backs of evicted last
    /// copies, then fetches.
    pub fn start_task(
        &mut self,
        accesses: &[(Handle, Mode)],
        node: MemoryNode,
    ) -> Result<Vec<Transfer>, NoRoom> {
        // Check first, so that a refused task changes nothing.
        self.fits(accesses, node)?;
        for &(h, _) in accesses {
            self.pin(h, node);
        }
        let mut copies = Vec::new();
        for &(h, mode) in accesses {
            self.fetch_for(h, node, mode, &mut copies)?;
            self.set_mode(h, node, mode);
        }
        Ok(copies)
    }

    /// Whether the tiles of a task fit on `node` beside those the running tasks pin there (every
    /// other tile can be evicted).
    pub fn fits(&self, accesses: &[(Handle, Mode)], node: MemoryNode) -> Result<(), NoRoom> {
        let Some(capacity) = self.capacity[node.0] else {
            return Ok(());
        };
        let mut extra = 0;
        for (i, &(h, _)) in accesses.iter().enumerate() {
            let repeated = accesses[..i].iter().any(|&(o, _)| o == h);
            if self.pins[h][node.0] == 0 && !repeated {
                extra += self.bytes[h];
            }
        }
        let needed = self.pinned[node.0] + extra;
        if needed > capacity {
            return Err(NoRoom {
                node: node.0,
                capacity,
                needed,
            });
        }
        Ok(())
    }

    /// Unpins the tiles of a finished task.
    pub fn end_task(&mut self, accesses: &[(Handle, Mode)], node: MemoryNode) {
        for &(h, _) in accesses {
            let pins = &mut self.pins[h][node.0];
            if *pins > 0 {
                *pins -= 1;
                if *pins == 0 {
                    self.pinned[node.0] -= self.bytes[h];
                }
            }
        }
    }

    fn pin(&mut self, handle: Handle, node: MemoryNode) {
        self.pins[handle][node.0] += 1;
        if self.pins[handle][node.0] == 1 {
            self.pinned[node.0] += self.bytes[handle];
        }
    }

    /// Copies `handle` to `node` ahead of a task that will read it, if it is not valid there and
    /// room can be made without evicting a pinned tile. Returns the copies (write-backs, then the
    /// fetch); none when nothing was done.
    pub fn prefetch(&mut self, handle: Handle, node: MemoryNode) -> Vec<Transfer> {
        let mut copies = Vec::new();
        // A tile a started task is writing is not final: a copy of it now could be taken
        // before the task writes (or while it does) and would then count as valid beside
        // the new value, which an eviction of the writer's replica would lose. A task is
        // ready when its predecessors are done, not before it starts: an executor's
        // lookahead can name a task another worker has just started.
        let being_written = self.states[handle]
            .iter()
            .zip(&self.pins[handle])
            .any(|(&state, &pins)| state == ReplicaState::Modified && pins > 0);
        if being_written {
            return copies;
        }
        if !self.is_valid(handle, node) && self.fetch(handle, node, &mut copies, true).is_ok() {
            self.set_mode(handle, node, Mode::Read);
        }
        copies
    }

    /// Prefetches every tile of a task to `node` (see [`DataRegistry::prefetch`]): what an executor
    /// does when the scheduler binds a ready task to a worker of that node.
    pub fn prefetch_task(
        &mut self,
        accesses: &[(Handle, Mode)],
        node: MemoryNode,
    ) -> Vec<Transfer> {
        // A tile the task overwrites unread is not worth a copy.
        accesses
            .iter()
            .filter(|&&(_, mode)| mode.reads())
            .flat_map(|&(h, _)| self.prefetch(h, node))
            .collect()
    }

    /// Makes `handle` usable on `node` in `mode` (no pinning) and returns the copy this needs, if
    /// any; room is made as in [`DataRegistry::start_task`].
    pub fn acquire(
        &mut self,
        handle: Handle,
        node: MemoryNode,
        mode: Mode,
    ) -> Result<Vec<Transfer>, NoRoom> {
        let mut copies = Vec::new();
        self.fetch_for(handle, node, mode, &mut copies)?;
        self.set_mode(handle, node, mode);
        Ok(copies)
    }

    /// Drops `handle`'s replica on `node` (not the host) when it is valid there and not pinned,
    /// writing it back to the host first when it is the last valid copy. Returns the write-back, if
    /// any. Static plans use it to free buffers they know are done.
    pub fn evict(&mut self, handle: Handle, node: MemoryNode) -> Vec<Transfer> {
        let mut copies = Vec::new();
        if node == HOST || !self.is_valid(handle, node) || self.pins[handle][node.0] > 0 {
            return copies;
        }
        let last_copy = (0..self.capacity.len())
            .all(|other| other == node.0 || !self.is_valid(handle, MemoryNode(other)));
        if last_copy {
            self.copy_in(handle, node, HOST, &mut copies);
        }
        self.drop_replica(handle, node);
        copies
    }

    /// The copies that bring every tile whose only valid copy is on a GPU back to the host (the end
    /// of a run: the caller's matrix must hold the result).
    pub fn flush_to_host(&mut self) -> Vec<Transfer> {
        let mut copies = Vec::new();
        for h in (0..self.len()).map(Handle) {
            if !self.is_valid(h, HOST) {
                // Host memory is unlimited: this cannot fail.
                let _ = self.fetch(h, HOST, &mut copies, false);
                self.set_mode(h, HOST, Mode::Read);
            }
        }
        copies
    }

    /// Makes `handle` valid on `node` (a `Shared` copy when it was not), evicting as needed (with
    /// `spare_sooner`, only tiles needed after it: see [`DataRegistry::make_room`]), and touches
    /// it.
    fn fetch(
        &mut self,
        handle: Handle,
        node: MemoryNode,
        copies: &mut Vec<Transfer>,
        spare_sooner: bool,
    ) -> Result<(), NoRoom> {
        if !self.is_valid(handle, node) {
            self.make_room(node, handle, copies, spare_sooner)?;
            self.copy_in(handle, self.source(handle), node, copies);
        }
        self.touch(handle, node);
        Ok(())
    }

    /// [`DataRegistry::fetch`] for an access in `mode`: a tile overwritten unread ([`Mode::Write`])
    /// only gets room and a replica on `node`, no copy.
    fn fetch_for(
        &mut self,
        handle: Handle,
        node: MemoryNode,
        mode: Mode,
        copies: &mut Vec<Transfer>,
    ) -> Result<(), NoRoom> {
        if mode.reads() || self.is_valid(handle, node) {
            return self.fetch(handle, node, copies, false);
        }
        self.make_room(node, handle, copies, false)?;
        if node != HOST {
            self.log(Step::Allocate {
                handle,
                tile: self.tiles[handle],
                node,
            });
        }
        self.add_replica(handle, node);
        self.touch(handle, node);
        Ok(())
    }

    /// Records the copy of `handle` from `from` to `to` (returned and logged) and makes the new
    /// replica a valid, shared one of `to`.
    fn copy_in(
        &mut self,
        handle: Handle,
        from: MemoryNode,
        to: MemoryNode,
        copies: &mut Vec<Transfer>,
    ) {
        let copy = Transfer {
            handle,
            tile: self.tiles[handle],
            from,
            to,
            bytes: self.bytes[handle],
        };
        copies.push(copy);
        self.log(Step::Copy(copy));
        self.add_replica(handle, to);
    }

    /// Counts a new valid, shared replica of `handle` on `node`.
    fn add_replica(&mut self, handle: Handle, node: MemoryNode) {
        self.states[handle][node.0] = ReplicaState::Shared;
        self.used[node.0] += self.bytes[handle];
        self.lru[node.0].insert((self.stamp[handle][node.0], handle));
        if let Some(uses) = self.uses.as_mut().filter(|_| node != HOST) {
            let next = uses.next(handle);
            uses.by_next[node.0].insert((next, handle));
        }
    }

    /// Applies the MSI rule of a valid replica's use in `mode`.
    fn set_mode(&mut self, handle: Handle, node: MemoryNode, mode: Mode) {
        match mode {
            Mode::Read => {
                for s in self.states[handle].iter_mut() {
                    if *s == ReplicaState::Modified {
                        *s = ReplicaState::Shared;
                    }
                }
                self.states[handle][node.0] = ReplicaState::Shared;
            }
            Mode::ReadWrite | Mode::Write => {
                for other in 0..self.capacity.len() {
                    if other != node.0 && self.is_valid(handle, MemoryNode(other)) {
                        self.drop_replica(handle, MemoryNode(other));
                    }
                }
                self.states[handle][node.0] = ReplicaState::Modified;
            }
        }
    }

    fn touch(&mut self, handle: Handle, node: MemoryNode) {
        self.clock += 1;
        let old = std::mem::replace(&mut self.stamp[handle][node.0], self.clock);
        self.lru[node.0].remove(&(old, handle));
        self.lru[node.0].insert((self.clock, handle));
    }

    fn drop_replica(&mut self, handle: Handle, node: MemoryNode) {
        if node != HOST {
            self.log(Step::Release { handle, node });
        }
        self.states[handle][node.0] = ReplicaState::Invalid;
        self.used[node.0] -= self.bytes[handle];
        self.lru[node.0].remove(&(self.stamp[handle][node.0], handle));
        if let Some(uses) = self.uses.as_mut().filter(|_| node != HOST) {
            let next = uses.next(handle);
            uses.by_next[node.0].remove(&(next, handle));
        }
    }

    /// The replica of `node` to evict: unpinned, and with an expected order the one needed last
    /// (and, with `spare_sooner`, only one needed after `handle`), else the least recently used.
    fn victim(&self, node: MemoryNode, handle: Handle, spare_sooner: bool) -> Option<Handle> {
        let unpinned = |&h: &Handle| self.pins[h][node.0] == 0;
        let Some(uses) = &self.uses else {
            return self.lru[node.0].iter().map(|&(_, h)| h).find(unpinned);
        };
        let after = spare_sooner.then(|| uses.next(handle));
        let last_first = uses.by_next[node.0].iter().rev();
        last_first
            .take_while(|&&(next, _)| after.is_none_or(|after| next > after))
            .map(|&(_, h)| h)
            .find(unpinned)
    }

    /// Evicts unpinned replicas of `node` ([`DataRegistry::victim`]) until `handle`'s tile fits,
    /// writing back the ones that are the last valid copy of their tile.
    fn make_room(
        &mut self,
        node: MemoryNode,
        handle: Handle,
        copies: &mut Vec<Transfer>,
        spare_sooner: bool,
    ) -> Result<(), NoRoom> {
        let bytes = self.bytes[handle];
        let Some(capacity) = self.capacity[node.0] else {
            return Ok(());
        };
        // Pinned tiles stay; the tile being fetched counts once.
        let unpinned_new = if self.pins[handle][node.0] > 0 {
            0
        } else {
            bytes
        };
        let needed = self.pinned[node.0] + unpinned_new;
        let no_room = NoRoom {
            node: node.0,
            capacity,
            needed,
        };
        if needed > capacity {
            return Err(no_room);
        }
        while self.used[node.0] + bytes > capacity {
            let Some(victim) = self.victim(node, handle, spare_sooner) else {
                return Err(no_room);
            };
            let last_copy = (0..self.capacity.len())
                .all(|other| other == node.0 || !self.is_valid(victim, MemoryNode(other)));
            if last_copy {
                self.copy_in(victim, node, HOST, copies);
            }
            self.drop_replica(victim, node);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_factorizations::MatrixId;

    fn tile(c: usize) -> (TileRef, usize) {
        (TileRef::new(MatrixId(0), 0, c), 800)
    }

    fn registry() -> DataRegistry {
        DataRegistry::new(vec![tile(0), tile(1)], 3)
    }

    fn one(copies: Vec<Transfer>) -> Transfer {
        assert_eq!(copies.len(), 1, "{copies:?}");
        copies[0]
    }

    #[test]
    fn a_tile_a_started_task_writes_is_not_prefetched_until_the_task_ends() {
        // GPU 1 starts a task that updates tile 0; GPU 2's lookahead asks for it meanwhile.
        let mut r = registry();
        let (writer, reader) = (MemoryNode(1), MemoryNode(2));
        let update = [(Handle(0), Mode::ReadWrite)];
        assert_eq!(one(r.start_task(&update, writer).unwrap()).to, writer);
        assert!(r.prefetch(Handle(0), reader).is_empty());
        assert_eq!(r.state(Handle(0), reader), ReplicaState::Invalid);
        // Once the task has ended, its result may be copied.
        r.end_task(&update, writer);
        assert_eq!(one(r.prefetch(Handle(0), reader)).from, writer);
        assert_eq!(r.state(Handle(0), reader), ReplicaState::Shared);
    }

    #[test]
    fn host_reads_and_writes_need_no_transfer() {
        let mut r = registry();
        assert_eq!(r.acquire(Handle(0), HOST, Mode::Read), Ok(vec![]));
        assert_eq!(r.acquire(Handle(0), HOST, Mode::ReadWrite), Ok(vec![]));
        assert_eq!(r.state(Handle(0), HOST), ReplicaState::Modified);
        assert!(r.flush_to_host().is_empty());
    }

    #[test]
    fn reads_replicate_and_writes_invalidate() {
        let mut r = registry();
        let gpu = MemoryNode(1);
        let t = one(r.acquire(Handle(1), gpu, Mode::Read).unwrap());
        assert_eq!((t.from, t.to, t.bytes), (HOST, gpu, 800));
        assert_eq!(r.state(Handle(1), gpu), ReplicaState::Shared);
        assert_eq!(r.state(Handle(1), HOST), ReplicaState::Shared);
        assert_eq!(r.acquire(Handle(1), gpu, Mode::Read), Ok(vec![]));
        // A write on node 2 fetches from a valid copy and invalidates the others.
        let t = one(r
            .acquire(Handle(1), MemoryNode(2), Mode::ReadWrite)
            .unwrap());
        assert_eq!((t.from, t.to), (HOST, MemoryNode(2)));
        assert_eq!(r.state(Handle(1), MemoryNode(2)), ReplicaState::Modified);
        assert_eq!(r.state(Handle(1), HOST), ReplicaState::Invalid);
        assert_eq!(r.state(Handle(1), gpu), ReplicaState::Invalid);
        assert_eq!((r.used(gpu), r.used(MemoryNode(2))), (0, 800));
        // The next reader elsewhere fetches from the modified copy.
        let t = one(r.acquire(Handle(1), gpu, Mode::Read).unwrap());
        assert_eq!(t.from, MemoryNode(2));
        assert_eq!(r.state(Handle(1), MemoryNode(2)), ReplicaState::Shared);
        // Flushing brings it home.
        let back = one(r.flush_to_host());
        assert_eq!(back.to, HOST);
        assert_eq!(r.state(Handle(1), HOST), ReplicaState::Shared);
    }

    /// A GPU node with room for `tiles` tiles of 800 bytes, and 6 handles.
    fn small_gpu(tiles: usize) -> DataRegistry {
        DataRegistry::with_capacities((0..6).map(tile).collect(), vec![None, Some(800 * tiles)])
    }

    #[test]
    fn eviction_takes_the_least_recently_used_unpinned_tile() {
        let gpu = MemoryNode(1);
        let mut r = small_gpu(3);
        for h in [0, 1, 2] {
            r.acquire(Handle(h), gpu, Mode::Read).unwrap();
        }
        r.acquire(Handle(0), gpu, Mode::Read).unwrap(); // 1 is now the oldest
        let copies = r.acquire(Handle(3), gpu, Mode::Read).unwrap();
        assert_eq!(one(copies).handle, Handle(3));
        assert!(
            !r.is_valid(Handle(1), gpu) && r.is_valid(Handle(0), gpu) && r.is_valid(Handle(2), gpu)
        );
        // Pinned tiles are never evicted: pin 2 and 0, then bring 4: 3 goes.
        r.start_task(&[(Handle(2), Mode::Read), (Handle(0), Mode::Read)], gpu)
            .unwrap();
        r.acquire(Handle(4), gpu, Mode::Read).unwrap();
        assert!(
            !r.is_valid(Handle(3), gpu) && r.is_valid(Handle(2), gpu) && r.is_valid(Handle(0), gpu)
        );
        assert!(r.used(gpu) <= 3 * 800);
    }

    #[test]
    fn with_an_expected_order_the_tile_needed_last_goes_and_a_prefetch_spares_sooner_ones() {
        let gpu = MemoryNode(1);
        let read = |h| vec![(Handle(h), Mode::Read)];
        // Task t reads the tile below: 0, 1, 2 now; then 1, 3, 0, 4, 0.
        let tasks: Vec<_> = [0, 1, 2, 1, 3, 0, 4, 0].into_iter().map(read).collect();
        let order = (tasks.iter().enumerate()).map(|(t, a)| (TaskId(t), &a[..]));
        let mut r = small_gpu(3).expect_order(tasks.len(), order);
        let run = |r: &mut DataRegistry, t: usize| {
            let copies = r.start_task(&tasks[t], gpu).unwrap();
            r.started(TaskId(t), &tasks[t]);
            r.end_task(&tasks[t], gpu);
            copies
        };
        for t in 0..3 {
            assert_eq!(one(run(&mut r, t)).handle, Handle(t));
        }
        // Tile 3 (next needed by task 4) takes the place of 2, never needed again, where the least
        // recently used would be 0 (needed by task 5).
        assert_eq!(one(r.prefetch(Handle(3), gpu)).handle, Handle(3));
        assert!(!r.is_valid(Handle(2), gpu) && r.is_valid(Handle(0), gpu));
        // Tile 4 (task 6) is needed after every tile there: a prefetch leaves them.
        assert!(r.prefetch(Handle(4), gpu).is_empty());
        assert!(run(&mut r, 3).is_empty() && run(&mut r, 4).is_empty());
        // Task 6 needs tile 4 now: 1 or 3, never needed again, goes; 0 (task 7) stays.
        assert!(run(&mut r, 5).is_empty());
        assert_eq!(one(run(&mut r, 6)).handle, Handle(4));
        assert!(r.is_valid(Handle(0), gpu) && r.used(gpu) == 3 * 800);
        assert!(!r.is_valid(Handle(1), gpu) || !r.is_valid(Handle(3), gpu));
    }

    #[test]
    fn evicting_the_last_copy_writes_it_back_first() {
        let gpu = MemoryNode(1);
        let mut r = small_gpu(2);
        r.acquire(Handle(0), gpu, Mode::ReadWrite).unwrap();
        assert_eq!(r.state(Handle(0), HOST), ReplicaState::Invalid);
        r.acquire(Handle(1), gpu, Mode::Read).unwrap();
        let copies = r.acquire(Handle(2), gpu, Mode::Read).unwrap();
        assert_eq!(copies.len(), 2, "{copies:?}");
        assert_eq!(
            (copies[0].handle, copies[0].from, copies[0].to),
            (Handle(0), gpu, HOST)
        );
        assert_eq!((copies[1].handle, copies[1].to), (Handle(2), gpu));
        assert!(r.is_valid(Handle(0), HOST) && !r.is_valid(Handle(0), gpu));
        // A shared replica with a valid host copy is dropped without a copy.
        let copies = r.acquire(Handle(3), gpu, Mode::Read).unwrap();
        assert_eq!(one(copies).handle, Handle(3));
    }

    #[test]
    fn eviction_on_request_writes_back_the_last_copy_and_spares_pinned_tiles() {
        let gpu = MemoryNode(1);
        let mut r = small_gpu(3);
        r.acquire(Handle(0), gpu, Mode::ReadWrite).unwrap();
        r.acquire(Handle(1), gpu, Mode::Read).unwrap();
        let back = one(r.evict(Handle(0), gpu));
        assert_eq!((back.from, back.to), (gpu, HOST));
        assert!(r.is_valid(Handle(0), HOST) && !r.is_valid(Handle(0), gpu));
        // A shared replica goes without a copy; the host is never evicted.
        assert!(r.evict(Handle(1), gpu).is_empty() && !r.is_valid(Handle(1), gpu));
        assert!(r.evict(Handle(1), HOST).is_empty() && r.is_valid(Handle(1), HOST));
        r.start_task(&[(Handle(2), Mode::Read)], gpu).unwrap();
        assert!(r.evict(Handle(2), gpu).is_empty() && r.is_valid(Handle(2), gpu));
        assert_eq!(r.used(gpu), 800);
    }

    #[test]
    fn a_tile_overwritten_unread_gets_a_replica_and_no_copy() {
        let gpu = MemoryNode(1);
        let mut r = small_gpu(2).log_steps();
        // Write on the GPU: no copy, the host copy is invalidated, the replica allocated.
        assert_eq!(r.start_task(&[(Handle(0), Mode::Write)], gpu), Ok(vec![]));
        assert!(r.is_valid(Handle(0), gpu) && !r.is_valid(Handle(0), HOST));
        assert_eq!(r.used(gpu), 800);
        let steps = r.take_steps();
        assert!(
            matches!(steps[..], [Step::Allocate { handle: Handle(0), node, .. }] if node == gpu),
            "{steps:?}"
        );
        r.end_task(&[(Handle(0), Mode::Write)], gpu);
        // Write back on the host: the GPU's copy is dropped, nothing is copied down.
        assert_eq!(r.start_task(&[(Handle(0), Mode::Write)], HOST), Ok(vec![]));
        assert!(r.is_valid(Handle(0), HOST) && !r.is_valid(Handle(0), gpu));
        // A prefetch for such a task copies nothing either.
        assert!(r.prefetch_task(&[(Handle(1), Mode::Write)], gpu).is_empty());
    }

    #[test]
    fn a_task_larger_than_the_budget_is_refused_and_changes_nothing() {
        let gpu = MemoryNode(1);
        let mut r = small_gpu(2);
        let task = [
            (Handle(0), Mode::Read),
            (Handle(1), Mode::Read),
            (Handle(2), Mode::ReadWrite),
        ];
        let err = r.start_task(&task, gpu).unwrap_err();
        assert_eq!((err.capacity, err.needed), (1600, 2400));
        assert_eq!(r.used(gpu), 0);
        assert!(r.start_task(&task[..2], gpu).is_ok());
        // Both slots pinned: a prefetch gives up instead of evicting them.
        assert!(r.prefetch(Handle(4), gpu).is_empty());
        r.end_task(&task[..2], gpu);
        assert_eq!(one(r.prefetch(Handle(4), gpu)).handle, Handle(4));
    }

    #[test]
    fn logged_steps_write_back_before_releasing_and_release_what_a_write_invalidates() {
        let gpu = MemoryNode(1);
        let mut r = small_gpu(2).log_steps();
        r.acquire(Handle(0), gpu, Mode::ReadWrite).unwrap();
        r.acquire(Handle(1), gpu, Mode::Read).unwrap();
        r.take_steps();
        r.acquire(Handle(2), gpu, Mode::Read).unwrap();
        let copy = |h, from, to| {
            Step::Copy(Transfer {
                handle: Handle(h),
                tile: tile(h).0,
                from,
                to,
                bytes: 800,
            })
        };
        assert_eq!(
            r.take_steps(),
            vec![
                copy(0, gpu, HOST),
                Step::Release {
                    handle: Handle(0),
                    node: gpu
                },
                copy(2, HOST, gpu),
            ]
        );
        // A write on the host drops the GPU replica: a release, no copy.
        r.acquire(Handle(2), HOST, Mode::ReadWrite).unwrap();
        assert_eq!(
            r.take_steps(),
            vec![Step::Release {
                handle: Handle(2),
                node: gpu
            }]
        );
        // Without logging nothing is kept.
        let mut quiet = small_gpu(2);
        quiet.acquire(Handle(0), gpu, Mode::Read).unwrap();
        assert!(quiet.take_steps().is_empty());
    }
}
