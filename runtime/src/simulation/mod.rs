//! The simulated executor: the [engine](crate::engine) on a virtual clock, with durations and link
//! costs from a platform model (StarPU-SimGrid style).
//!
//! Everything that decides runs as in a real run, because it is the same code: [`crate::prepare`]
//! prepares the same scheduler context (priorities, restrictions, model table), and the engine
//! makes the same `push`/`pop`/`done` calls on the same scheduler objects and the same
//! [`DataRegistry`] operations (replicas, prefetches, evictions, write-backs). This file holds only
//! what is virtual: the clock, and the links on which the engine's copies are booked ([`Carrier`]).
//!
//! - **Events.** The only events are task ends, processed in time order (ties by the order they
//!   were scheduled, so a run is a pure function of its inputs and seed). After each, the finished
//!   task's successors whose last predecessor it was are pushed, and every idle worker, in index
//!   order, pops.
//! - **Tasks.** A popped task pins its tiles on the worker's memory node; it starts when the worker
//!   is free (plus the model's per-task runtime overhead on CPU workers, as measured by
//!   `hetla calibrate --output`, and its launch latency on GPU workers) and every copy it needs has
//!   arrived, and lasts the model's duration for its (kernel, class), times `1 + noise * u` with
//!   `u` uniform in [-1, 1) from a ChaCha8 stream seeded by [`SimOptions::seed`] (mean-preserving;
//!   0 noise by default).
//! - **GPUs of several compute streams** ([`SimPlatform::compute_streams`], `HETLA_GPU_STREAMS` on
//!   a real run): a GPU worker holds up to that many tasks at once, whose kernels share the GPU's
//!   rate by the rule of [`GpuSharing`] (each at its own rate until their occupancies fill the GPU,
//!   then all slower); a kernel's begin is then an event, and each begin or end beside it moves its
//!   end. With one stream (the default) a GPU runs one kernel at a time, as a CPU cluster does.
//! - **Schedulers' knowledge.** The scheduler's table holds the model's duration of every (kernel,
//!   class) as a calibrated mean: a simulated run schedules like a real run whose performance
//!   models are calibrated and exact. Durations are not recorded back.
//! - **Copies.** A copy takes `latency + bytes / bandwidth` on its link direction (each GPU has a
//!   host-to-device and a device-to-host link, or shares them with its group when the model says
//!   GPUs share host links; GPU-to-GPU copies go through the switch when the model has peer links,
//!   else are staged: device to host, then host to device). A copy to a GPU takes the route that
//!   delivers it first (see [`Copies::schedule`]). *Contention rule:* one copy at a time per link
//!   direction and per switch port; a copy takes the earliest interval, after its request and its
//!   source replica's arrival, in which all it uses is free (copies requested later may fill gaps
//!   left earlier).
//! - **Prefetch.** When the scheduler binds a pushed task to a worker at push time (MCT), the
//!   task's tiles are prefetched to that worker's node at once; MCT's completion estimate includes
//!   the copies still missing on each candidate worker's node.
//! - **Static plans** ([`crate::schedulers::Planned`]): after a worker starts a task, the inputs of
//!   its next two planned tasks that are safe to copy are prefetched; the tiles a plan releases
//!   after a task are dropped (written back if last) when it ends. Tiles placed on a node before
//!   the run (`RunOptions::placement`) are there at time 0.
//! - **End.** After the last task, tiles whose only valid copy is on a GPU are written back to host
//!   memory; the makespan includes those copies (the matrix starts and ends in host memory, as in a
//!   real run).
//!
//! - **Several nodes** ([`simulate_grid`], a distributed run as `mpirun` starts it): each node
//!   (rank) has its own platform, scheduler, data registry and links, the engine of one node once
//!   per node, and all share the clock; [`simulate`] is its case of one node and no message. A task
//!   that reads a remote tile waits for it as an input from outside its node's run (as the real
//!   distributed executor's tasks do). When the task that makes a tile final ends, the tile leaves
//!   its node's host memory (copied back first if only a GPU holds it) once per destination
//!   ([`SimMessage`]), and its arrival releases the readers there; it then lives in that node's
//!   host memory, from where the registry copies it to a GPU like any tile. *Network rule:* a
//!   message takes `latency + bytes / bandwidth` and occupies its sender's NIC (sending side) and
//!   its receiver's NIC (receiving side), one message at a time on each, earliest free interval as
//!   for copies; every pair of nodes has a link of that rate, which only its sender's NIC feeds, so
//!   the NICs are what messages contend for (a non-blocking switch). After each event, only the
//!   node it concerns pops.
//!
//! The result is a [`Trace`] like a real run's (one per node for several): Gantt charts, Chrome
//! traces and summaries work unchanged.
//!
//! Files: `model.rs` (what a caller gives and gets: the modelled machine, the work, the options,
//! the traces), `links.rs` (copies booked on a node's links), `network.rs` (messages booked on the
//! NICs), `sharing.rs` (a GPU's kernels running at once), `grid.rs` (the event loop of one or
//! several nodes) and here [`simulate`], the case of one node.

mod grid;
mod links;
mod model;
mod network;
mod sharing;

pub use grid::simulate_grid;
pub use model::{
    GridTrace, Locking, MessageEvent, SimMessage, SimOptions, SimPlatform, SimRank, SimWork,
    Staging,
};
pub use sharing::GpuSharing;

use crate::Result;
use crate::trace::Trace;

/// Simulates `work` on `platform` and returns its trace.
pub fn simulate(platform: &SimPlatform, work: &SimWork<'_>, options: &SimOptions) -> Result<Trace> {
    let rank = SimRank {
        platform,
        work: *work,
        priorities: None,
    };
    let mut run = simulate_grid(&[rank], &[], None, options)?;
    Ok(run.ranks.remove(0))
}
