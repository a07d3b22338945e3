//! Calibration ahead of runs: times each tile kernel on each class of worker of a platform
//! and records the samples in its performance models.
//!
//! Runs are otherwise calibrated on the fly (MCT sends uncalibrated kernels to be
//! measured), which costs the first run of a new configuration some balance; `hetla
//! calibrate` fills the models beforehand.

use faer::Mat;
use hetla_kernels::Op;

use super::perfmodel::KernelKey;
use super::platform::Platform;
use crate::{Result, matgen};

/// The operations of the tiled Cholesky, which calibration measures.
pub const CHOLESKY_OPS: [Op; 4] = [Op::Potrf, Op::Trsm, Op::Syrk, Op::Gemm];

/// Number of kernel executions [`calibrate`] performs.
pub fn calibration_steps(platform: &Platform, tiles: &[usize], samples: usize) -> usize {
    distinct_classes(platform).len() * tiles.len() * CHOLESKY_OPS.len() * samples
}

/// The first worker of each class.
fn distinct_classes(platform: &Platform) -> Vec<usize> {
    let workers = platform.workers();
    (0..workers.len())
        .filter(|&w| !workers[..w].iter().any(|o| o.class == workers[w].class))
        .collect()
}

/// Times every Cholesky kernel `samples` times on b x b tiles for each b in `tiles`, on one
/// worker of each class, and records the durations; `step` is called after each execution.
pub fn calibrate(
    platform: &Platform,
    tiles: &[usize],
    samples: usize,
    mut step: impl FnMut(),
) -> Result<()> {
    let backend = platform.backend();
    for w in distinct_classes(platform) {
        let cluster = &platform.clusters()[w];
        let class = platform.workers()[w].class.clone();
        let par = crate::peers::par(cluster.size());
        for &b in tiles {
            let spd = matgen::random_spd(b, b as u64);
            let other = Mat::from_fn(b, b, |i, j| ((i * 13 + j * 7) % 17) as f64 / 17.0);
            for op in CHOLESKY_OPS {
                let key = KernelKey::square(op, b);
                for _ in 0..samples {
                    let mut out = match op {
                        Op::Potrf => spd.clone(),
                        _ => other.clone(),
                    };
                    let reads: Vec<_> = match op {
                        Op::Potrf => vec![],
                        Op::Trsm => vec![spd.as_ref()],
                        Op::Syrk => vec![other.as_ref()],
                        _ => vec![other.as_ref(), spd.as_ref()],
                    };
                    let start = std::time::Instant::now();
                    cluster
                        .pool()
                        .install(|| backend.run(op, &reads, out.as_mut(), par))?;
                    let seconds = start.elapsed().as_secs_f64();
                    platform.update_models(|m| m.record(&key, &class, seconds));
                    step();
                }
            }
        }
    }
    Ok(())
}
