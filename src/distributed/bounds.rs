//! The bounds of a distributed run, beside its time: the network between two ranks, measured in the
//! job, and the [`DistributedBounds`] of the run's own kernel durations (the same bounds
//! `hetla simulate --nodes` gives a modelled run).
//!
//! - **Network** ([`measure_network`]): ranks 0 and 1 exchange messages of 8 bytes and of one tile;
//!   half the best round trip of each gives the latency and the bandwidth. Other pairs are assumed
//!   alike (one rank per node of a homogeneous cluster, or ranks on one machine). A job measures
//!   before its runs and again after them and keeps the faster figures of the two
//!   ([`faster_network`]): a bound is only a bound on a network no slower than the run's own, and
//!   ranks sharing their cores with other processes (several jobs on one machine) can measure a
//!   round trip at a scheduler's time slice for a while.
//! - **Durations** ([`DistributedRun::bounds`]): each kernel on each class of worker lasts the
//!   shortest time any rank measured for it in this run, and a class that never ran a kernel is
//!   taken not to run it, as the bounds of a run on one node do: these are bounds of this run.
//!   Every rank must have the same workers (the same `--clusters` and GPUs inside the same number
//!   of cores).

use std::time::Instant;

use hetla_runtime::{KernelKey, LinkRate, ResourceClass, count_classes};
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};

use super::exchange::max_within;
use super::run::DistributedRun;
use crate::plan::kernel_types;
use crate::{DistributedBounds, Error, Result};

/// Round trips of each size timed (after as many again to warm up).
const ROUND_TRIPS: usize = 20;

/// The network between ranks 0 and 1, for [`DistributedRun::bounds`]: they exchange messages of 8
/// and of `bytes` bytes (one tile, say), 20 round trips of each after 20 to warm up, and half the
/// best round trip of each gives the latency and the bandwidth. Other pairs of ranks are taken to
/// be alike. `None` with one rank. Collective: every rank calls it and gets rank 0's figures.
/// Measure again after the runs and keep the faster figures ([`faster_network`]): ranks that share
/// their cores with other processes can measure a scheduler's time slice for a while.
pub fn measure_network<C: Communicator>(comm: &C, bytes: usize) -> Option<LinkRate> {
    if comm.size() < 2 {
        return None;
    }
    let rank = comm.rank();
    let half_round_trip = |buf: &mut [u8]| {
        let mut best = f64::INFINITY;
        for i in 0..2 * ROUND_TRIPS {
            comm.barrier();
            let start = Instant::now();
            match rank {
                0 => {
                    comm.process_at_rank(1).send(&buf[..]);
                    comm.process_at_rank(1).receive_into(&mut buf[..]);
                }
                1 => {
                    comm.process_at_rank(0).receive_into(&mut buf[..]);
                    comm.process_at_rank(0).send(&buf[..]);
                }
                _ => {}
            }
            if i >= ROUND_TRIPS {
                best = best.min(start.elapsed().as_secs_f64() / 2.0);
            }
        }
        best
    };
    let small = half_round_trip(&mut [0u8; 8]);
    let large = half_round_trip(&mut vec![0u8; bytes.max(8)]);
    // The latency, and the bandwidth of what the latency does not explain (all of the
    // large message's time when the small one's is not below it).
    let transfer = if large > small { large - small } else { large };
    let mut rate = [small * 1e6, bytes.max(8) as f64 / transfer / 1e9];
    comm.process_at_rank(0).broadcast_into(&mut rate[..]);
    Some(LinkRate {
        latency_us: rate[0],
        gb_per_s: rate[1],
    })
}

/// The network measured as `before` and again now (collective, as [`measure_network`]): the lower
/// latency and the higher bandwidth of the two measurements.
pub fn faster_network<C: Communicator>(comm: &C, bytes: usize, before: LinkRate) -> LinkRate {
    match measure_network(comm, bytes) {
        Some(now) => LinkRate {
            latency_us: before.latency_us.min(now.latency_us),
            gb_per_s: before.gb_per_s.max(now.gb_per_s),
        },
        None => before,
    }
}

impl DistributedRun {
    /// The bounds of this run on `network` (see the module documentation): collective, every rank
    /// calls it with its own run and gets the same bounds.
    pub fn bounds<C: Communicator>(
        &self,
        comm: &C,
        network: LinkRate,
    ) -> Result<DistributedBounds> {
        let plan = &self.plan;
        let split = plan.split(&self.grid).map_err(|e| Error::Distributed {
            rank: comm.rank() as usize,
            reason: e.to_string(),
        })?;
        let mine = &split.ranks[comm.rank() as usize];
        let classes = count_classes(self.trace.workers.iter().map(|w| w.class.clone()));
        // The same workers on every rank, or no bounds.
        // Non-blocking reductions, waiting no longer than a run waits for a rank.
        let timeout = super::exchange::DEFAULT_PROGRESS_TIMEOUT;
        let signature = fnv1a(format!("{classes:?}").as_bytes());
        let both = [signature, !signature];
        let most = max_within(comm, &both, timeout, "the comparison of the ranks' workers")?;
        // The largest signature and the smallest (the complement of the largest complement).
        if most[0] != !most[1] {
            return Err(Error::InvalidOption {
                option: "grid",
                reason: "the ranks have different workers; the bounds of a distributed run need the same clusters and GPUs on every rank".into(),
            });
        }
        // A GPU of several streams ran kernels at once: each class counts as many resources as
        // its workers ran tasks at once on any rank (the run respects that; 1 on one stream).
        let local: Vec<u64> = (classes.iter())
            .map(|(class, _)| {
                let workers = self.trace.workers.iter().enumerate();
                let of_class = workers.filter(|(_, w)| w.class == *class);
                of_class
                    .map(|(w, _)| {
                        let events = self.trace.tasks.iter().filter(|e| e.worker.0 == w);
                        crate::plan::most_at_once(events).max(1) as u64
                    })
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        let at_once = max_within(comm, &local, timeout, "the tasks the workers ran at once")?;
        let classes: Vec<(ResourceClass, usize)> = (classes.iter().zip(&at_once))
            .map(|((class, count), &k)| (class.clone(), count * k as usize))
            .collect();
        // The same kernels in the same order on every rank: one table to reduce.
        let (types, kinds) = kernel_types(plan.keys());
        let class_of = |class: &ResourceClass| classes.iter().position(|(c, _)| c == class);
        let mut shortest = vec![f64::INFINITY; kinds.len() * classes.len()];
        for event in &self.trace.tasks {
            let kind = types[mine.whole[event.task.0].0];
            if let Some(c) = class_of(&self.trace.workers[event.worker].class) {
                let slot = &mut shortest[kind * classes.len() + c];
                *slot = slot.min(event.end - event.start);
            }
        }
        // The minimum over the ranks as a maximum of complemented bits: a duration is not
        // negative, so its bits order as it does.
        let flipped: Vec<u64> = shortest.iter().map(|d| !d.to_bits()).collect();
        let most = max_within(comm, &flipped, timeout, "the shortest kernel durations")?;
        let all: Vec<f64> = most.iter().map(|&b| f64::from_bits(!b)).collect();
        let duration = |key: &KernelKey, class: &ResourceClass| {
            let kind = kinds.iter().position(|k| *k == key)?;
            let d = all[kind * classes.len() + class_of(class)?];
            d.is_finite().then_some(d)
        };
        let sharing = hetla_runtime::GpuSharing::alone();
        plan.distributed_bounds(&split, &self.grid, &classes, duration, network, &sharing)
    }
}

/// FNV-1a, to compare the ranks' workers in one reduction.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
