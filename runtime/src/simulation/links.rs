//! The links of a node in a simulated run: each copy the data registry decides is booked on the
//! link directions (and switch ports) it uses, one copy at a time on each, by the route that
//! delivers it first. On a staged data path ([`crate::Staging`]) an upload is packed by the GPU's
//! copy cores before its link, and a download unpacked after it by the GPU's write-back thread.

use std::collections::HashMap;
use std::sync::Mutex;

use hetla_kernels::KernelError;

use super::model::SimPlatform;
use crate::data::{DataRegistry, HOST, MemoryNode, Step, Transfer};
use crate::engine::Carrier;
use crate::inflight::Deferred;
use crate::link::Hop;
use crate::sync::lock;
use crate::trace::TransferEvent;

/// One part of a copy: a hop over a link direction, or the packing (before a hop to a GPU) or
/// unpacking (after a hop from a GPU) of the tile by that GPU's copy cores.
#[derive(Debug, Clone, Copy)]
enum Leg {
    Hop(Hop),
    Pack(MemoryNode),
    Unpack(MemoryNode),
}

/// A copy's legs, each with when it starts and ends.
type Route = Vec<(Leg, f64, f64)>;

/// What a copy occupies while it runs, one copy at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Resource {
    /// A link direction between two nodes; a GPU behind a shared host link is named by the first
    /// GPU of its group.
    Link(MemoryNode, MemoryNode),
    /// A GPU's sending port on the switch.
    Send(MemoryNode),
    /// A GPU's receiving port on the switch.
    Receive(MemoryNode),
    /// A GPU's copy cores, which pack its uploads and unpack its downloads (staged data path).
    Stage(MemoryNode),
    /// The thread that carries out a GPU's downloads one at a time, from the copy into staging to
    /// the end of its unpacking (staged data path).
    Behind(MemoryNode),
}

/// The intervals a resource is busy, in time order, disjoint.
#[derive(Debug, Default)]
pub(super) struct Busy(Vec<(f64, f64)>);

impl Busy {
    /// The end of the first busy interval that overlaps `[start, start + seconds)`.
    pub(super) fn conflict(&self, start: f64, seconds: f64) -> Option<f64> {
        let i = self.0.partition_point(|&(_, end)| end <= start);
        self.0
            .get(i)
            .filter(|&&(begin, _)| begin < start + seconds)
            .map(|&(_, end)| end)
    }

    pub(super) fn insert(&mut self, start: f64, end: f64) {
        let i = self.0.partition_point(|&(begin, _)| begin < start);
        self.0.insert(i, (start, end));
    }
}

/// The links' state: when each direction is free, and when each replica arrives.
///
/// A copy to a GPU comes from whichever node holding a valid replica would deliver it first
/// (PARALiA's ETA routing): the host over the GPU's PCIe link, or another GPU over a peer link when
/// the model has one, counting when that replica arrives there and when the links are free. Peer
/// copies go through a switch (NVSwitch): each GPU has one sending and one receiving port, shared
/// by all its peer copies.
pub(super) struct Copies<'a> {
    pub(super) platform: &'a SimPlatform,
    /// When each resource is busy.
    busy: HashMap<Resource, Busy>,
    /// `arrival[handle][node]`: when the replica there became (or becomes) usable.
    pub(super) arrival: Vec<Vec<f64>>,
    pub(super) events: Vec<TransferEvent>,
}

impl<'a> Copies<'a> {
    /// No copy booked yet on `platform`'s links, for `handles` data handles.
    pub(super) fn new(platform: &'a SimPlatform, handles: usize) -> Self {
        Self {
            platform,
            busy: HashMap::new(),
            arrival: vec![vec![0.0; platform.capacities.len()]; handles],
            events: Vec::new(),
        }
    }

    /// The legs of a copy over `hops`: when `staged`, each hop to a GPU follows the packing of the
    /// tile by that GPU's copy cores, and each hop from a GPU is followed by its unpacking.
    fn legs(hops: impl IntoIterator<Item = Hop>, staged: bool) -> Vec<Leg> {
        let mut legs = Vec::with_capacity(4);
        for hop in hops {
            let (from, to, _) = hop;
            if staged && from == HOST && to != HOST {
                legs.push(Leg::Pack(to));
            }
            legs.push(Leg::Hop(hop));
            if staged && to == HOST && from != HOST {
                legs.push(Leg::Unpack(from));
            }
        }
        legs
    }

    /// Seconds one leg of a copy of `bytes` lasts.
    fn seconds(&self, leg: Leg, bytes: usize) -> f64 {
        match (leg, &self.platform.staging) {
            (Leg::Hop(hop), _) => hop.2.seconds(bytes),
            (Leg::Pack(gpu) | Leg::Unpack(gpu), Some(staging)) => staging.seconds(gpu.0 - 1, bytes),
            (Leg::Pack(_) | Leg::Unpack(_), None) => 0.0,
        }
    }

    /// When a copy of `bytes` whose source replica is usable at `ready` would start and end on each
    /// leg over `hops`, in order (`staged`: packed or unpacked on the host side).
    fn plan(
        &self,
        hops: impl IntoIterator<Item = Hop>,
        bytes: usize,
        mut ready: f64,
        staged: bool,
    ) -> Route {
        let legs = Self::legs(hops, staged);
        let mut route = Vec::with_capacity(legs.len());
        for leg in legs {
            let seconds = self.seconds(leg, bytes);
            let start = self.earliest(leg, ready, seconds, staged);
            let end = start + seconds;
            route.push((leg, start, end));
            ready = end;
        }
        route
    }

    /// The resources a leg occupies: the sending and receiving ports of two GPUs behind the switch,
    /// or a host link direction (shared by a group of GPUs when the model says so); on a staged
    /// path, a download's hop and unpacking also hold the GPU's write-back thread, and packing and
    /// unpacking its copy cores.
    fn resources(&self, leg: Leg, staged: bool) -> Vec<Resource> {
        match leg {
            Leg::Pack(gpu) => vec![Resource::Stage(gpu)],
            Leg::Unpack(gpu) => vec![Resource::Stage(gpu), Resource::Behind(gpu)],
            Leg::Hop((from, to, _)) if from != HOST && to != HOST && self.platform.peer_links() => {
                vec![Resource::Send(from), Resource::Receive(to)]
            }
            Leg::Hop((from, to, _)) => {
                let link = Resource::Link(
                    self.platform.host_link_of(from),
                    self.platform.host_link_of(to),
                );
                if staged && to == HOST && from != HOST {
                    vec![link, Resource::Behind(from)]
                } else {
                    vec![link]
                }
            }
        }
    }

    /// The earliest start from `ready` on at which a leg's resources are all free for `seconds`.
    fn earliest(&self, leg: Leg, ready: f64, seconds: f64, staged: bool) -> f64 {
        let busy: Vec<&Busy> = self
            .resources(leg, staged)
            .iter()
            .filter_map(|r| self.busy.get(r))
            .collect();
        let mut start = ready;
        while let Some(end) = busy.iter().find_map(|b| b.conflict(start, seconds)) {
            start = end;
        }
        start
    }

    /// Schedules `copy`, requested at `at`, under the contention rule, by the route that delivers
    /// it first (PARALiA's ETA routing); write-backs to the host keep their source and route. With
    /// peer links, a copy to a GPU
    /// - comes from another GPU that holds (or is receiving) the tile when there is one, the one
    ///   whose copy arrives first: the host sends each tile once, and its links, the scarce ones,
    ///   stay free for what only it has;
    /// - otherwise comes from the host over the GPU's own host link or through another GPU's host
    ///   link and then the switch (one hop, as PARALiA's routing allows), so that fetches spread
    ///   over every host link. The intermediate GPU only stages the tile: it keeps no replica.
    fn schedule(&mut self, copy: Transfer, at: f64, holders: &[MemoryNode]) {
        let arrives = |route: &Route| route.last().map_or(at, |h| h.2);
        let ready = |from: MemoryNode| at.max(self.arrival[copy.handle][from.0]);
        // Staged unless the tile's host memory is page-locked when the copy is asked for.
        let staged = self.platform.staged(copy.tile, at);
        let direct = |this: &Self, from: MemoryNode| {
            let hops = this.platform.hops(from, copy.to).into_iter().flatten();
            this.plan(hops, copy.bytes, ready(from), staged)
        };
        let mut best = direct(self, copy.from);
        if copy.to != HOST
            && let Some(link) = self.platform.link
            && let Some(p2p) = link.p2p
        {
            let to = copy.to;
            let mut candidates: Vec<Route> = holders
                .iter()
                .filter(|&&n| n != to && n != HOST)
                .map(|&from| direct(self, from))
                .collect();
            if candidates.is_empty() && copy.from == HOST {
                candidates.extend(self.platform.gpu_nodes().filter(|&m| m != to).map(|mid| {
                    let hops = [(HOST, mid, link.h2d), (mid, to, p2p)];
                    self.plan(hops, copy.bytes, ready(HOST), staged)
                }));
                candidates.push(best.clone());
            }
            if let Some(first) = candidates
                .into_iter()
                .min_by(|a, b| arrives(a).total_cmp(&arrives(b)))
            {
                best = first;
            }
        }
        let route = best;
        for (i, &(leg, start, end)) in route.iter().enumerate() {
            for resource in self.resources(leg, staged) {
                self.busy.entry(resource).or_default().insert(start, end);
            }
            // A hop's event spans its packing before it and its unpacking after it, as a real
            // run traces a staged copy (the host tile is read from the packing's start, written
            // until the unpacking's end).
            if let Leg::Hop((from, to, _)) = leg {
                let start = match i.checked_sub(1).map(|j| route[j]) {
                    Some((Leg::Pack(_), packed, _)) => packed,
                    _ => start,
                };
                let end = match route.get(i + 1) {
                    Some(&(Leg::Unpack(_), _, unpacked)) => unpacked,
                    _ => end,
                };
                self.events.push(TransferEvent {
                    transfer: Transfer { from, to, ..copy },
                    start,
                    end,
                });
            }
        }
        self.arrival[copy.handle][copy.to.0] = arrives(&route);
    }
}

/// The simulator's [`Carrier`]: each copy booked on its modelled links.
pub(super) struct Links<'a>(pub(super) Mutex<Copies<'a>>);

impl Carrier for Links<'_> {
    fn carry_out(
        &self,
        steps: Vec<Step>,
        data: &DataRegistry,
        at: f64,
    ) -> std::result::Result<Vec<Deferred>, KernelError> {
        let mut copies = lock(&self.0);
        for step in steps {
            if let Step::Copy(copy) = step {
                let holders = data.holders(copy.handle);
                copies.schedule(copy, at, &holders);
            }
        }
        Ok(Vec::new())
    }
}

/// Tiles placed before the run are there at time 0: their copies are not simulated.
pub(super) struct Placed;

impl Carrier for Placed {
    fn carry_out(
        &self,
        _: Vec<Step>,
        _: &DataRegistry,
        _: f64,
    ) -> std::result::Result<Vec<Deferred>, KernelError> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use hetla_factorizations::{MatrixId, TileRef};

    use super::*;
    use crate::link::{LinkModel, LinkRate};

    /// Two GPUs behind a switch (20 GB/s peer links), 10 GB/s host links, no latency; `shared`:
    /// whether they share one host link.
    fn two_gpus(shared: bool) -> SimPlatform {
        let rate = |gb_per_s| LinkRate {
            latency_us: 0.0,
            gb_per_s,
        };
        SimPlatform {
            workers: Vec::new(),
            capacities: vec![None, None, None],
            link: Some(LinkModel {
                h2d: rate(10.0),
                d2h: rate(10.0),
                p2p: Some(rate(20.0)),
                host_shared_by: if shared { 2 } else { 1 },
            }),
            cpu_task_overhead: 0.0,
            gpu_launch: 0.0,
            staging: None,
            compute_streams: 1,
            locking: None,
        }
    }

    /// Copies of tiles 0 and 1 (1 GB each) from the host to GPU 1 (node 1), asked at 0; when each
    /// arrives, and the nodes the second one passed through.
    fn fetch_two(platform: &SimPlatform) -> (f64, f64, Vec<MemoryNode>) {
        let mut copies = Copies {
            platform,
            busy: HashMap::new(),
            arrival: vec![vec![0.0; 3]; 2],
            events: Vec::new(),
        };
        for handle in 0..2 {
            let copy = Transfer {
                handle: crate::Handle(handle),
                tile: TileRef::new(MatrixId(0), handle, 0),
                from: HOST,
                to: MemoryNode(1),
                bytes: 1_000_000_000,
            };
            copies.schedule(copy, 0.0, &[HOST]);
        }
        let path = copies.events[1..].iter().map(|e| e.transfer.to).collect();
        (copies.arrival[0][1], copies.arrival[1][1], path)
    }

    #[test]
    fn a_host_fetch_takes_another_gpus_free_link_unless_the_link_is_shared() {
        // Own links: the second tile comes over GPU 2's host link (0.1 s), then the
        // switch (0.05 s), before GPU 1's own link would be free again (0.2 s).
        let (first, second, path) = fetch_two(&two_gpus(false));
        assert!((first - 0.1).abs() < 1e-12);
        assert!((second - 0.15).abs() < 1e-12, "{second}");
        assert_eq!(path, [MemoryNode(2), MemoryNode(1)]);
        // One shared link: the copies queue on it, and the second goes direct.
        let (first, second, path) = fetch_two(&two_gpus(true));
        assert!((first - 0.1).abs() < 1e-12);
        assert!((second - 0.2).abs() < 1e-12, "{second}");
        assert_eq!(path, [MemoryNode(1)]);
    }

    /// One GPU behind a 10 GB/s link, no latency, packing at 2 GB/s.
    fn staged_gpu() -> SimPlatform {
        let rate = LinkRate {
            latency_us: 0.0,
            gb_per_s: 10.0,
        };
        SimPlatform {
            workers: Vec::new(),
            capacities: vec![None, None],
            link: Some(LinkModel {
                h2d: rate,
                d2h: rate,
                p2p: None,
                host_shared_by: 1,
            }),
            cpu_task_overhead: 0.0,
            gpu_launch: 0.0,
            staging: Some(crate::Staging {
                gb_per_s: vec![2.0],
            }),
            compute_streams: 1,
            locking: None,
        }
    }

    fn copy(handle: usize, from: MemoryNode, to: MemoryNode) -> Transfer {
        Transfer {
            handle: crate::Handle(handle),
            tile: TileRef::new(MatrixId(0), handle, 0),
            from,
            to,
            bytes: 1_000_000_000,
        }
    }

    #[test]
    fn a_tile_whose_column_is_not_locked_yet_is_staged_and_once_it_is_copied_straight() {
        // Pieces of 1 GB locked at 1 GB/s: column 0 before the run, column 1 at 1 s.
        let locking = crate::Locking::in_order(&[vec![1_000_000_000, 1_000_000_000]], 1.0);
        assert_eq!(locking.locked_at, vec![vec![0.0, 1.0]]);
        let platform = SimPlatform {
            locking: Some(locking),
            ..staged_gpu()
        };
        let gpu = MemoryNode(1);
        let in_column = |handle: usize, col: usize| Transfer {
            tile: TileRef::new(MatrixId(0), 0, col),
            ..copy(handle, HOST, gpu)
        };
        let mut copies = Copies::new(&platform, 3);
        // Column 0 is locked: straight over the link (0.1 s).
        copies.schedule(in_column(0, 0), 0.0, &[HOST]);
        assert!((copies.arrival[0][1] - 0.1).abs() < 1e-12);
        // Column 1 asked for at 0.2 s, before its lock: packed (0.5 s), then the link.
        copies.schedule(in_column(1, 1), 0.2, &[HOST]);
        assert!((copies.arrival[1][1] - 0.8).abs() < 1e-12);
        // Asked for at 1.5 s, once locked: straight.
        copies.schedule(in_column(2, 1), 1.5, &[HOST]);
        assert!((copies.arrival[2][1] - 1.6).abs() < 1e-12);
        // A download into a column not locked yet is unpacked after its link.
        let late = crate::Locking::in_order(&[vec![1, 1_000_000_000]], 0.1);
        let platform = SimPlatform {
            locking: Some(late),
            ..staged_gpu()
        };
        let mut copies = Copies::new(&platform, 1);
        let back = Transfer {
            tile: TileRef::new(MatrixId(0), 0, 1),
            ..copy(0, gpu, HOST)
        };
        copies.schedule(back, 0.0, &[gpu]);
        assert!((copies.arrival[0][0] - 0.6).abs() < 1e-12);
    }

    #[test]
    fn a_staged_upload_is_packed_before_its_link_and_a_download_unpacked_after_it() {
        let platform = staged_gpu();
        let mut copies = Copies::new(&platform, 4);
        let gpu = MemoryNode(1);
        // Two uploads of 1 GB: packing (0.5 s) is the bottleneck, the link (0.1 s)
        // carries the first while the second is packed.
        copies.schedule(copy(0, HOST, gpu), 0.0, &[HOST]);
        copies.schedule(copy(1, HOST, gpu), 0.0, &[HOST]);
        assert!((copies.arrival[0][1] - 0.6).abs() < 1e-12);
        assert!((copies.arrival[1][1] - 1.1).abs() < 1e-12);
        // Two downloads asked at 2 s: copied (0.1 s), then unpacked (0.5 s) by the one write-back
        // thread, so the second starts its copy only once the first is unpacked.
        copies.schedule(copy(2, gpu, HOST), 2.0, &[gpu]);
        copies.schedule(copy(3, gpu, HOST), 2.0, &[gpu]);
        assert!((copies.arrival[2][0] - 2.6).abs() < 1e-12);
        assert!((copies.arrival[3][0] - 3.2).abs() < 1e-12);
        // The trace holds one event a copy, from its packing's start to its unpacking's end.
        let spans: Vec<(f64, f64)> = copies.events.iter().map(|e| (e.start, e.end)).collect();
        assert_eq!(spans.len(), 4);
        assert!((spans[1].0 - 0.5).abs() < 1e-12 && (spans[1].1 - 1.1).abs() < 1e-12);
        assert!((spans[3].0 - 2.6).abs() < 1e-12 && (spans[3].1 - 3.2).abs() < 1e-12);
        // Without staging (DMA from page-locked tiles) the same uploads take the link alone.
        let direct = SimPlatform {
            staging: None,
            ..staged_gpu()
        };
        let mut copies = Copies::new(&direct, 2);
        copies.schedule(copy(0, HOST, gpu), 0.0, &[HOST]);
        copies.schedule(copy(1, HOST, gpu), 0.0, &[HOST]);
        assert!((copies.arrival[1][1] - 0.2).abs() < 1e-12);
    }

    #[test]
    fn a_copy_fills_a_gap_left_before_a_later_booking() {
        let mut busy = Busy::default();
        busy.insert(0.0, 1.0);
        busy.insert(3.0, 4.0);
        // A copy of 1 s fits between 1 and 3, one of 2.5 s only after 4.
        assert_eq!(busy.conflict(1.0, 1.0), None);
        assert_eq!(busy.conflict(0.5, 1.0), Some(1.0));
        assert_eq!(busy.conflict(1.0, 2.5), Some(4.0));
        assert_eq!(busy.conflict(4.0, 2.5), None);
    }
}
