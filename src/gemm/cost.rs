//! The cost model of a product: each worker's rate per tile, the data-reuse pipeline of
//! Anastasiadis (2024), Eq. 2.5, and the tile size it picks.

use hetla_bounds::communication::half_perimeter_lower_bound;
use hetla_kernels::Precision;
use hetla_runtime::{HOST, KernelKey, MemoryNode, ResourceKind, WorkerInfo};

use super::strategy::Processor;

/// Tile sizes tried when the models know none.
pub(super) const DEFAULT_TILES: [usize; 5] = [256, 512, 1024, 2048, 4096];

/// Rates assumed without a model, flop/s: per CPU core, and per device.
pub(super) const GUESS_CPU_CORE: f64 = 20e9;

pub(super) const GUESS_DEVICE: f64 = 1e12;

/// What planning a product needs to know of a machine, real (a platform's calibrated models,
/// [`Gemm::run`](crate::Gemm::run)) or modelled (a platform model's rates, in `hetla-lab`).
pub struct Machine<'a> {
    /// The workers.
    pub workers: &'a [WorkerInfo],
    /// Capacity of each memory node (`None`: unlimited; node 0 is the host).
    pub capacities: Vec<Option<usize>>,
    /// Seconds of one T x T x T GEMM tile (`tile_seconds(worker, T)`) on a worker, if known.
    pub tile_seconds: &'a dyn Fn(usize, usize) -> Option<f64>,
    /// Seconds of one copy of `bytes` between host memory and a node.
    pub copy_seconds: &'a dyn Fn(MemoryNode, usize) -> f64,
    /// Tile sizes the models know.
    pub known_tiles: Vec<usize>,
    /// The precision of the product.
    pub precision: Precision,
}

impl Machine<'_> {
    /// Flop/s of a worker on T x T tiles.
    pub(super) fn rate(&self, worker: usize, tile: usize) -> f64 {
        let flops = 2.0 * (tile as f64).powi(3);
        match (self.tile_seconds)(worker, tile) {
            Some(s) if s > 0.0 => flops / s,
            _ => match self.workers[worker].kind {
                ResourceKind::Cpu => GUESS_CPU_CORE * self.workers[worker].cores() as f64,
                ResourceKind::Gpu => GUESS_DEVICE,
            },
        }
    }

    /// The memory nodes with workers, as processors with their summed speeds at `tile`.
    pub(super) fn processors(&self, tile: usize) -> Vec<Processor> {
        let mut out: Vec<Processor> = Vec::new();
        for (w, info) in self.workers.iter().enumerate() {
            let speed = self.rate(w, tile);
            match out.iter_mut().find(|p| p.node == info.node.0) {
                Some(p) => {
                    p.workers.push(w);
                    p.speed += speed;
                }
                None => out.push(Processor {
                    workers: vec![w],
                    node: info.node.0,
                    speed,
                }),
            }
        }
        out
    }

    pub(super) fn has_devices(&self) -> bool {
        self.workers.iter().any(|w| w.node != HOST)
    }
}

/// Anastasiadis's (2024) Eq. 2.5 for one node: `k` subkernels of `exec` seconds, `fetched` tiles of
/// `h2d` seconds in and `returned` out.
pub(super) fn pipeline_seconds(k: f64, exec: f64, h2d: f64, fetched: f64, returned: f64) -> f64 {
    if h2d == 0.0 {
        return k * exec;
    }
    let first_in = 3.0 * h2d;
    let k_in = (fetched - 3.0).max(0.0);
    let overlapped = k_in.min(k);
    let extra = (k_in - overlapped) * h2d;
    h2d.max(exec) * overlapped + exec * (k - overlapped) + extra + first_in + returned * h2d
}

/// The predicted seconds of an (m, n, k) product in tiles of `tile` on `machine`.
pub(super) fn predict(machine: &Machine<'_>, m: usize, n: usize, k: usize, tile: usize) -> f64 {
    let (r, s, t) = (
        m.div_ceil(tile) as f64,
        n.div_ceil(tile) as f64,
        k.div_ceil(tile) as f64,
    );
    let processors = machine.processors(tile);
    let total: f64 = processors.iter().map(|p| p.speed).sum();
    let bytes = tile * tile * machine.precision.bytes();
    processors
        .iter()
        .map(|p| {
            let share = p.speed / total;
            let area = share * r * s;
            let exec = 2.0 * (tile as f64).powi(3) / p.speed;
            let h2d = if p.node == HOST.0 {
                0.0
            } else {
                (machine.copy_seconds)(MemoryNode(p.node), bytes)
            };
            let strips = half_perimeter_lower_bound(area, r, s) * t;
            pipeline_seconds(area * t, exec, h2d, strips + area, area)
        })
        .fold(0.0, f64::max)
}

/// The tile the model predicts fastest, and its prediction.
pub(super) fn choose_tile(machine: &Machine<'_>, m: usize, n: usize, k: usize) -> (usize, f64) {
    let largest = m.max(n).max(k).max(1);
    let mut candidates: Vec<usize> = if machine.known_tiles.is_empty() {
        DEFAULT_TILES.to_vec()
    } else {
        machine.known_tiles.clone()
    };
    candidates.retain(|&t| t <= largest);
    if candidates.is_empty() {
        candidates.push(largest);
    }
    let mut best = (candidates[0], predict(machine, m, n, k, candidates[0]));
    for &tile in &candidates[1..] {
        let seconds = predict(machine, m, n, k, tile);
        if seconds <= best.1 * 1.0001 {
            best = (tile, seconds);
        }
    }
    best
}

/// Square GEMM tile sizes with a calibrated model on every worker class.
pub(super) fn known_gemm_tiles(
    models: &hetla_runtime::PerfModels,
    workers: &[WorkerInfo],
    precision: hetla_kernels::Precision,
) -> Vec<usize> {
    DEFAULT_TILES
        .into_iter()
        .chain([128, 384, 768, 960, 1536, 1920, 3072])
        .filter(|&tile| {
            workers.iter().all(|w| {
                models
                    .get(
                        &KernelKey::square(hetla_kernels::Op::GemmNt, tile).in_precision(precision),
                        &w.class,
                    )
                    .and_then(|s| s.calibrated_mean())
                    .is_some()
            })
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn the_pipeline_model_overlaps_copies_with_kernels() {
        // Compute-bound: 100 kernels of 1 s, 10 fetched tiles of 0.1 s: 100 s + fill.
        let t = pipeline_seconds(100.0, 1.0, 0.1, 10.0, 4.0);
        assert!((t - (100.0 + 0.3 + 0.4)).abs() < 1e-9, "{t}");
        // Transfer-bound: 10 kernels of 0.01 s, 100 tiles of 0.1 s.
        let t = pipeline_seconds(10.0, 0.01, 0.1, 100.0, 1.0);
        assert!(t > 9.7 && t < 10.2, "{t}");
        // Host node: no copies.
        assert_eq!(pipeline_seconds(5.0, 2.0, 0.0, 10.0, 1.0), 10.0);
    }
}
