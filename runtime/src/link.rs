//! Links between memory nodes: the cost of one copy, per direction, and which GPUs share a host
//! link. One type for the real platform (measured by `hetla calibrate`), platform models and
//! simulations.

use serde::{Deserialize, Serialize};

use crate::data::{HOST, MemoryNode};

/// How data moves between host memory and a GPU, per direction, and between GPUs.
///
/// Each GPU has its own host link unless `host_shared_by` > 1: then GPUs `0..s`, `s..2s`, ... share
/// one (two GPUs behind one PCIe switch, as on an HGX A100 board), whose rate is `h2d`/`d2h`, one
/// copy at a time per direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkModel {
    /// Host to device.
    pub h2d: LinkRate,
    /// Device to host.
    pub d2h: LinkRate,
    /// Device to device, when GPUs can copy to each other directly; without it a copy between GPUs
    /// is staged through host memory (device to host, then host to device).
    #[serde(default)]
    pub p2p: Option<LinkRate>,
    /// How many GPUs (consecutive indices) share one host link; 1: each has its own.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub host_shared_by: usize,
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// The cost of one copy on a link direction: latency plus bytes over bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRate {
    /// Latency of one copy, in microseconds.
    pub latency_us: f64,
    /// Bandwidth, in GB/s (10^9 bytes per second).
    pub gb_per_s: f64,
}

impl LinkRate {
    /// Seconds one copy of `bytes` bytes takes.
    pub fn seconds(&self, bytes: usize) -> f64 {
        self.latency_us * 1e-6 + bytes as f64 / (self.gb_per_s * 1e9)
    }
}

fn one() -> usize {
    1
}

/// One link direction a copy takes: from, to, and its rate.
pub(crate) type Hop = (MemoryNode, MemoryNode, LinkRate);

/// The link directions a copy from `from` to `to` takes (at most two), where `link(node)` is the
/// link of the GPU on memory node `node`: host to GPU over its `h2d`, GPU to host over its `d2h`,
/// GPU to GPU over the source's peer link when it has one, else staged through host memory (down
/// one link, up the other). Real platforms (links measured per device) and simulations (one link
/// model for all GPUs) both route copies by it.
pub(crate) fn hops(
    link: impl Fn(MemoryNode) -> LinkModel,
    from: MemoryNode,
    to: MemoryNode,
) -> [Option<Hop>; 2] {
    match (from == HOST, to == HOST) {
        (true, true) => [None, None],
        (true, false) => [Some((from, to, link(to).h2d)), None],
        (false, true) => [Some((from, to, link(from).d2h)), None],
        (false, false) => match link(from).p2p {
            Some(p2p) => [Some((from, to, p2p)), None],
            None => [
                Some((from, HOST, link(from).d2h)),
                Some((HOST, to, link(to).h2d)),
            ],
        },
    }
}

/// Seconds one copy of `bytes` from `from` to `to` takes on idle links (see [`hops`]).
pub(crate) fn copy_seconds(
    link: impl Fn(MemoryNode) -> LinkModel,
    from: MemoryNode,
    to: MemoryNode,
    bytes: usize,
) -> f64 {
    hops(link, from, to)
        .into_iter()
        .flatten()
        .map(|(_, _, rate)| rate.seconds(bytes))
        .sum()
}
