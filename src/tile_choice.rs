//! The tile size of a Cholesky factorisation, chosen from the platform's performance
//! models instead of a constant.
//!
//! A matrix of order n <= 512 is one tile (direct kernel calls, no runtime). Otherwise the
//! candidates are the sizes of [`CANDIDATES`] (and [`DEVICE_CANDIDATES`] on a platform
//! with devices: one tile size for CPU clusters and GPUs, chosen from both's models) that
//! cut n into 2 to 32 tiles per side. For
//! each candidate b, every worker class needs the mean duration of the four Cholesky
//! kernels on b x b tiles; the classes that lack one are measured first with
//! [`calibrate`] (two samples per kernel, every worker of a class at once, as in a run),
//! and the samples join the models (the CLI stores them with the models after the run).
//! The prediction for b is the makespan of the Cholesky graph of n in tiles of b simulated
//! on this platform's workers with the same scheduler as a run (`runtime::sim`, MCT), each
//! task's duration its flops at its kernel's measured rate on b x b tiles (a ragged edge
//! tile at the same rate); on a platform with devices, whose links and memories the
//! simulation would need modelled, the mixed makespan bound instead. The candidate with
//! the smallest prediction wins: large tiles run the kernels near their peak, small ones
//! give the scheduler parallel work and a short critical path, and the simulation weighs
//! both for this backend, this cluster shape and this n (the bound alone is optimistic
//! about parallelism: it picked 4 x 4 tiles of 2048 at n = 8192 on two single-core
//! clusters, which ran at 0.84 of their bound). The choice is remembered per platform
//! and n.

use crate::calibrate::{CHOLESKY_OPS, calibrate};
use crate::graph_bounds::{cholesky_flops, cholesky_graph, graph_bounds};
use crate::model::model_flops;
use crate::{Result, default_tile_size};
use hetla_kernels::Precision;
use hetla_runtime::{KernelKey, Platform, ResourceClass, count_classes};
use hetla_runtime::{SimOptions, SimPlatform, SimWork, simulate};

/// Tile sizes a choice considers.
pub const CANDIDATES: [usize; 7] = [256, 384, 512, 768, 1024, 1536, 2048];

/// Larger tile sizes a choice also considers on a platform with devices: a big GPU runs
/// its kernels near peak only on tiles of 2048 and more, and each task costs it a launch
/// and copies.
pub const DEVICE_CANDIDATES: [usize; 2] = [3072, 4096];

/// Matrices up to this order are one tile.
pub const SINGLE_TILE_UP_TO: usize = 512;

/// Most tiles per side a candidate may cut the matrix into (the bound's graph grows as its
/// cube: 32 tiles are 5984 tasks).
const MAX_TILES_PER_SIDE: usize = 32;

/// Calibration samples per kernel, class and candidate measured on first use.
const FIRST_USE_SAMPLES: usize = 2;

pub use hetla_runtime::TileChoice;

/// The candidates for order `n`, with the larger ones when the platform has devices.
pub fn candidates(n: usize, devices: bool) -> Vec<usize> {
    let larger: &[usize] = if devices { &DEVICE_CANDIDATES } else { &[] };
    CANDIDATES
        .iter()
        .chain(larger)
        .copied()
        .filter(|&b| 2 * b <= n && n.div_ceil(b) <= MAX_TILES_PER_SIDE)
        .collect()
}

/// Whether the models of `class` know all four kernels on b x b tiles.
fn known(platform: &Platform, class: &ResourceClass, b: usize) -> bool {
    let models = platform.models();
    CHOLESKY_OPS.iter().all(|&op| {
        models
            .get(&KernelKey::square(op, b), class)
            .is_some_and(|s| s.samples > 0)
    })
}

/// The tile size for a Cholesky factorisation of order `n` on `platform` (see the module
/// doc): may calibrate the candidates the models lack, and remembers its answer.
pub fn choose_cholesky_tile(platform: &Platform, n: usize) -> Result<TileChoice> {
    if n <= SINGLE_TILE_UP_TO {
        return Ok(TileChoice {
            tile: n.max(1),
            predictions: Vec::new(),
            calibrated: Vec::new(),
        });
    }
    if let Some(choice) = platform.remembered_tile(n) {
        return Ok(choice);
    }
    let candidates = candidates(n, !platform.devices().is_empty());
    let classes = count_classes(platform.workers().iter().map(|w| w.class.clone()));
    let missing: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&b| classes.iter().any(|(c, _)| !known(platform, c, b)))
        .collect();
    if !missing.is_empty() {
        // The platform's pools time the kernels: no run may share them meanwhile.
        let _busy = platform.lock_run();
        calibrate(platform, &missing, FIRST_USE_SAMPLES, Precision::D, || {})?;
    }
    let models = platform.models();
    let mut predictions = Vec::with_capacity(candidates.len());
    for &b in &candidates {
        let (graph, keys) = cholesky_graph(n, b, Precision::D)?;
        // Seconds per flop of each kernel and class at b, applied to every task's flops.
        let duration = |key: &KernelKey, class: &ResourceClass| {
            let square = KernelKey::square(key.op, b);
            let stats = models.get(&square, class).filter(|s| s.samples > 0)?;
            Some(stats.mean / model_flops(&square) * model_flops(key))
        };
        let predicted_ms = if platform.devices().is_empty() {
            let sim = SimPlatform {
                workers: platform.workers().to_vec(),
                capacities: vec![None],
                link: None,
                cpu_task_overhead: 0.0,
            };
            let tile_bytes = |_| b * b * size_of::<f64>();
            let work = SimWork {
                graph: &graph,
                keys: &keys,
                tile_bytes: &tile_bytes,
                duration: &duration,
            };
            simulate(&sim, &work, &SimOptions::default())?.makespan * 1e3
        } else {
            graph_bounds(
                &graph,
                &keys,
                &classes,
                duration,
                cholesky_flops(n, Precision::D),
            )?
            .mixed_ms
        };
        predictions.push((b, predicted_ms));
    }
    drop(models);
    let tile = predictions
        .iter()
        .min_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
        .map_or_else(
            || default_tile_size(n, platform.backend(), hetla_kernels::Precision::D),
            |&(b, _)| b,
        );
    let choice = TileChoice {
        tile,
        predictions,
        calibrated: missing,
    };
    platform.remember_tile(n, choice.clone());
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_add_the_large_tiles_where_they_cut_the_matrix_in_two_or_more() {
        assert_eq!(candidates(32768, false), vec![1024, 1536, 2048]);
        assert_eq!(candidates(32768, true), vec![1024, 1536, 2048, 3072, 4096]);
        assert_eq!(
            candidates(7000, true),
            vec![256, 384, 512, 768, 1024, 1536, 2048, 3072]
        );
        assert!(candidates(1000, true).iter().all(|&b| 2 * b <= 1000));
    }
}
