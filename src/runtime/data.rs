//! Data handles: one per tile, with a replica state on every memory node (MSI).
//!
//! Before a task runs on a worker, each tile it uses must be valid on the worker's memory
//! node: [`DataRegistry::acquire`] returns the transfer that makes it so (from a node that
//! holds a valid replica, preferring the one holding it modified) and updates the states;
//! a write leaves the tile `Modified` on that node and `Invalid` everywhere else. On a
//! CPU-only platform there is one node (the host), tiles start valid there, and acquiring
//! never needs a transfer; GPU memory nodes add the transfers.

use hetla_factorizations::{Mode, TileRef};

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
    pub handle: usize,
    /// The tile.
    pub tile: TileRef,
    /// Source node (holds a valid replica).
    pub from: MemoryNode,
    /// Destination node.
    pub to: MemoryNode,
    /// Bytes copied.
    pub bytes: usize,
}

/// The data handles of one run: tiles and their replica states.
#[derive(Debug, Clone)]
pub struct DataRegistry {
    tiles: Vec<TileRef>,
    bytes: Vec<usize>,
    /// `states[handle][node]`.
    states: Vec<Vec<ReplicaState>>,
}

impl DataRegistry {
    /// Handles for `tiles` (with their sizes in bytes), valid on the host only, on a
    /// platform with `nodes` memory nodes.
    pub fn new(tiles: Vec<(TileRef, usize)>, nodes: usize) -> Self {
        let mut initial = vec![ReplicaState::Invalid; nodes.max(1)];
        initial[HOST.0] = ReplicaState::Shared;
        let (tiles, bytes) = tiles.into_iter().unzip();
        let n = Vec::len(&tiles);
        Self {
            tiles,
            bytes,
            states: vec![initial; n],
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

    /// The state of a handle on a node.
    pub fn state(&self, handle: usize, node: MemoryNode) -> ReplicaState {
        self.states[handle][node.0]
    }

    /// Makes `handle` usable on `node` in `mode` and returns the transfer this needs, if
    /// any. Reading leaves every valid replica `Shared`; writing leaves the tile `Modified`
    /// on `node` and `Invalid` elsewhere.
    pub fn acquire(&mut self, handle: usize, node: MemoryNode, mode: Mode) -> Option<Transfer> {
        let states = &mut self.states[handle];
        let transfer = if states[node.0] == ReplicaState::Invalid {
            let from = states
                .iter()
                .position(|&s| s == ReplicaState::Modified)
                .or_else(|| states.iter().position(|&s| s == ReplicaState::Shared))
                .map(MemoryNode)
                .unwrap_or(HOST);
            Some(Transfer {
                handle,
                tile: self.tiles[handle],
                from,
                to: node,
                bytes: self.bytes[handle],
            })
        } else {
            None
        };
        match mode {
            Mode::Read => {
                for s in states.iter_mut() {
                    if *s == ReplicaState::Modified {
                        *s = ReplicaState::Shared;
                    }
                }
                states[node.0] = ReplicaState::Shared;
            }
            Mode::ReadWrite => {
                states.fill(ReplicaState::Invalid);
                states[node.0] = ReplicaState::Modified;
            }
        }
        transfer
    }

    /// The transfers that bring every modified replica back to the host (the end of a run:
    /// the caller's matrix must hold the result), marking the host replicas valid.
    pub fn flush_to_host(&mut self) -> Vec<Transfer> {
        (0..self.len())
            .filter_map(|h| match self.states[h][HOST.0] {
                ReplicaState::Invalid => self.acquire(h, HOST, Mode::Read),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_factorizations::MatrixId;

    fn registry() -> DataRegistry {
        let tile = |c| (TileRef::new(MatrixId(0), 0, c), 800);
        DataRegistry::new(vec![tile(0), tile(1)], 3)
    }

    #[test]
    fn host_reads_and_writes_need_no_transfer() {
        let mut r = registry();
        assert_eq!(r.acquire(0, HOST, Mode::Read), None);
        assert_eq!(r.acquire(0, HOST, Mode::ReadWrite), None);
        assert_eq!(r.state(0, HOST), ReplicaState::Modified);
        assert!(r.flush_to_host().is_empty());
    }

    #[test]
    fn reads_replicate_and_writes_invalidate() {
        let mut r = registry();
        let gpu = MemoryNode(1);
        let t = r.acquire(1, gpu, Mode::Read).unwrap();
        assert_eq!((t.from, t.to, t.bytes), (HOST, gpu, 800));
        assert_eq!(r.state(1, gpu), ReplicaState::Shared);
        assert_eq!(r.state(1, HOST), ReplicaState::Shared);
        assert_eq!(r.acquire(1, gpu, Mode::Read), None);
        // A write on node 2 fetches from a valid copy and invalidates the others.
        let t = r.acquire(1, MemoryNode(2), Mode::ReadWrite).unwrap();
        assert_eq!(t.to, MemoryNode(2));
        assert_eq!(r.state(1, MemoryNode(2)), ReplicaState::Modified);
        assert_eq!(r.state(1, HOST), ReplicaState::Invalid);
        assert_eq!(r.state(1, gpu), ReplicaState::Invalid);
        // The next reader elsewhere fetches from the modified copy.
        let t = r.acquire(1, gpu, Mode::Read).unwrap();
        assert_eq!(t.from, MemoryNode(2));
        assert_eq!(r.state(1, MemoryNode(2)), ReplicaState::Shared);
        // Flushing brings it home.
        let back = r.flush_to_host();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].to, HOST);
        assert_eq!(r.state(1, HOST), ReplicaState::Shared);
    }
}
