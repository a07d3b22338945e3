//! Copies the data registry decided, carried out after its lock is released.
//!
//! Packing a tile of 4096 x 4096 into a staging buffer takes milliseconds; under the registry's
//! lock it would stop every other worker from starting a task meanwhile. So the real executor only
//! *registers* each copy under the lock (which gives it its place in one global order) and carries
//! it out afterwards, on the thread that caused it. What the lock used to guarantee is kept by
//! waiting on the register instead:
//!
//! - copies of one tile are carried out in their registered order (a tile coming back to host
//!   memory before it goes on to another device, say);
//! - a replica is not released while a copy from or into it is under way;
//! - a task does not run on a node before the copies of its tiles *into* that node are done (for a
//!   device: queued on its copy stream, which its kernels wait for), nor overwrite a tile while it
//!   is still being copied *from* that node.
//!
//! A copy waits only for copies registered before it, and each thread carries out its own copies
//! right after registering them, in order, without taking the registry's lock: so the earliest
//! unfinished copy is always under way, and nothing waits forever. A failed copy is taken off the
//! register too (the run stops).

use std::sync::{Condvar, Mutex};

use hetla_factorizations::Mode;

use crate::data::{Handle, MemoryNode, Transfer};
use crate::sync::lock;

/// A copy registered under the registry's lock, to carry out after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deferred {
    ticket: u64,
    /// The copy.
    pub copy: Transfer,
}

/// The copies registered and not yet carried out.
#[derive(Default)]
pub(crate) struct InFlight {
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Default)]
struct State {
    next: u64,
    /// Few at a time (those of the threads between their lock and their copies): a list.
    copies: Vec<Deferred>,
}

impl InFlight {
    /// Registers `copy` (under the registry's lock: that fixes its order).
    pub fn register(&self, copy: Transfer) -> Deferred {
        let mut state = lock(&self.state);
        let deferred = Deferred {
            ticket: state.next,
            copy,
        };
        state.next += 1;
        state.copies.push(deferred);
        deferred
    }

    /// Waits until no registered copy satisfies `blocks`.
    fn wait_while(&self, blocks: impl Fn(&Deferred) -> bool) {
        let mut state = lock(&self.state);
        while state.copies.iter().any(&blocks) {
            state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits for the copies of the same tile registered before `d`.
    pub fn wait_turn(&self, d: &Deferred) {
        self.wait_while(|o| o.ticket < d.ticket && o.copy.handle == d.copy.handle);
    }

    /// Takes `d` off the register (carried out, or abandoned after a failure).
    pub fn done(&self, d: &Deferred) {
        lock(&self.state).copies.retain(|o| o.ticket != d.ticket);
        self.done.notify_all();
    }

    /// Waits until no copy reads or writes `handle`'s replica on `node`: before it is released.
    pub fn wait_replica(&self, handle: Handle, node: MemoryNode) {
        self.wait_while(|o| o.copy.handle == handle && (o.copy.from == node || o.copy.to == node));
    }

    /// Waits until the tiles a task on `node` accesses can be used there: no copy into `node` of a
    /// tile it accesses, and no copy from `node` of a tile it writes, is under way.
    pub fn wait_task(&self, accesses: &[(Handle, Mode)], node: MemoryNode) {
        self.wait_while(|o| {
            accesses.iter().any(|&(h, mode)| {
                h == o.copy.handle && (o.copy.to == node || (mode.writes() && o.copy.from == node))
            })
        });
    }

    /// Copies registered and not yet done.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        lock(&self.state).copies.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::HOST;
    use hetla_factorizations::{MatrixId, TileRef};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn copy(handle: usize, from: usize, to: usize) -> Transfer {
        Transfer {
            handle: Handle(handle),
            tile: TileRef {
                matrix: MatrixId(0),
                row: handle,
                col: 0,
            },
            from: MemoryNode(from),
            to: MemoryNode(to),
            bytes: 8,
        }
    }

    #[test]
    fn copies_of_one_tile_go_in_order_and_a_task_waits_for_those_into_its_node() {
        let register = Arc::new(InFlight::default());
        let down = register.register(copy(3, 1, 0)); // gpu0 -> host
        let up = register.register(copy(3, 0, 2)); // host -> gpu1, after it
        let other = register.register(copy(4, 0, 2));
        // Another tile's copy does not wait; the second copy of tile 3 waits for the first.
        register.wait_turn(&other);
        let order = Arc::new(AtomicUsize::new(0));
        let second = {
            let (register, order) = (register.clone(), order.clone());
            std::thread::spawn(move || {
                register.wait_turn(&up);
                let seen = order.load(Ordering::SeqCst);
                register.done(&up);
                seen
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        order.store(1, Ordering::SeqCst);
        register.done(&down);
        assert_eq!(
            second.join().unwrap(),
            1,
            "the upload went before the download"
        );
        // A task reading tile 4 on gpu1 waits for its upload; one on the host does not.
        register.wait_task(&[(Handle(4), Mode::Read)], HOST);
        let task = {
            let register = register.clone();
            std::thread::spawn(move || {
                register.wait_task(&[(Handle(4), Mode::Read)], MemoryNode(2))
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!task.is_finished());
        register.done(&other);
        task.join().unwrap();
        assert_eq!(register.len(), 0);
    }

    #[test]
    fn a_task_writing_a_tile_waits_for_a_copy_from_its_node_and_a_release_for_any() {
        let register = InFlight::default();
        let up = register.register(copy(1, 0, 1));
        // Reading on the host beside an upload from it is fine: no wait.
        register.wait_task(&[(Handle(1), Mode::Read)], HOST);
        std::thread::scope(|s| {
            let writer = s.spawn(|| register.wait_task(&[(Handle(1), Mode::ReadWrite)], HOST));
            let release = s.spawn(|| register.wait_replica(Handle(1), MemoryNode(1)));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!writer.is_finished() && !release.is_finished());
            register.done(&up);
        });
    }
}
