//! Allocation strategies of the tiled product, turned into runtime options: `dmda` is the runtime's
//! MCT with transfer estimates; `grid`, `peri-sum` and `max-reuse` are [`StaticPlan`]s over the
//! product's chains of C tiles.

use std::fmt;
use std::str::FromStr;

use hetla_bounds::communication::max_reuse_mu;
use hetla_factorizations::{MatMulTiling, TaskId};

use super::partition::{Discretisation, discretise, partition};
use hetla_runtime::{StaticPlan, WorkerId};

/// How the tasks of a product are allotted to the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Picked by the model (see [`super::Gemm`]'s planning).
    #[default]
    Auto,
    /// Dynamic: the runtime's MCT with transfer estimates (StarPU's dmda).
    Dmda,
    /// Anastasiadis's (2024) 2-D grid of devices: C cut into one block per device, the inner
    /// dimension not split, no stealing.
    Grid,
    /// Eyraud-Dubois and Lambert's (2018) PERI-SUM partition of C from the processors' speeds,
    /// discretised, with or without EffectiveSteal.
    PeriSum {
        /// ROUNDED or PRECISE.
        discretisation: Discretisation,
        /// EffectiveSteal (true) or the static allocation enforced to the end.
        steal: bool,
    },
    /// Dongarra et al.'s (2007) maximum re-use order: squares of mu x mu C tiles handed to workers
    /// as they become free, each device keeping mu^2 C tiles, a row of mu B tiles and one A tile
    /// (and a second A and B buffer when copies overlap the kernels).
    MaxReuse,
}

impl Strategy {
    /// Every concrete strategy, for comparisons.
    pub const CONCRETE: [Strategy; 4] = [
        Strategy::Dmda,
        Strategy::Grid,
        Strategy::PeriSum {
            discretisation: Discretisation::Rounded,
            steal: true,
        },
        Strategy::MaxReuse,
    ];
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Dmda => f.write_str("dmda"),
            Self::Grid => f.write_str("grid"),
            Self::PeriSum {
                discretisation,
                steal,
            } => write!(
                f,
                "peri-sum:{discretisation}:{}",
                if *steal { "steal" } else { "static" }
            ),
            Self::MaxReuse => f.write_str("max-reuse"),
        }
    }
}

impl FromStr for Strategy {
    type Err = String;

    /// "auto", "dmda", "grid", "max-reuse", or `peri-sum[:rounded|precise][:steal|static]` (default
    /// rounded with stealing, Eyraud-Dubois and Lambert's (2018) best).
    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        let mut parts = lower.split(':');
        let expected =
            "expected auto, dmda, grid, max-reuse or peri-sum[:rounded|precise][:steal|static]";
        let strategy = match parts.next().unwrap_or("") {
            "auto" => Self::Auto,
            "dmda" | "mct" => Self::Dmda,
            "grid" => Self::Grid,
            "max-reuse" | "maxreuse" => Self::MaxReuse,
            "peri-sum" | "perisum" => {
                // At most one discretisation, then at most one of steal/static, each once.
                let (mut discretisation, mut steal) = (None, None);
                for part in parts.by_ref() {
                    match part {
                        "steal" | "static" if steal.is_none() => steal = Some(part == "steal"),
                        _ if steal.is_none() && discretisation.is_none() => {
                            discretisation = Some(part.parse()?)
                        }
                        _ => {
                            return Err(format!(
                                "{part:?} repeats or contradicts an earlier option in strategy {s:?}; {expected}"
                            ));
                        }
                    }
                }
                Self::PeriSum {
                    discretisation: discretisation.unwrap_or(Discretisation::Rounded),
                    steal: steal.unwrap_or(true),
                }
            }
            _ => return Err(format!("unknown strategy {s:?}; {expected}")),
        };
        if parts.next().is_some() {
            return Err(format!("unexpected options in strategy {s:?}; {expected}"));
        }
        Ok(strategy)
    }
}

/// A processor of a static allocation: workers sharing a memory node, with their summed speed.
#[derive(Debug, Clone, PartialEq)]
pub struct Processor {
    /// Worker indices.
    pub workers: Vec<usize>,
    /// Memory node index (0 = host).
    pub node: usize,
    /// Relative speed (flop/s).
    pub speed: f64,
}

/// The chains (one per C tile, in k order) of a product.
fn chain(t: &MatMulTiling, i: usize, j: usize) -> Vec<TaskId> {
    (0..t.t).map(|l| t.task(i, j, l)).collect()
}

/// A static plan that gives each processor the chains of the C tiles `owner` names (row-major),
/// queued in row-major order.
fn owner_plan(
    t: &MatMulTiling,
    owner: &[usize],
    processors: &[Processor],
    steal: bool,
) -> StaticPlan {
    let mut plan = StaticPlan {
        processors: processors
            .iter()
            .map(|p| p.workers.iter().copied().map(WorkerId).collect())
            .collect(),
        steal,
        prefetch: true,
        ..Default::default()
    };
    for i in 0..t.r {
        for j in 0..t.s {
            plan.groups.push(chain(t, i, j));
            plan.owner.push(owner[i * t.s + j]);
        }
    }
    plan
}

/// The PERI-SUM allocation: the partition of the r x s tile grid among `processors` by speed,
/// discretised, as a plan. Also returns each processor's planned tile count.
pub fn peri_sum_plan(
    t: &MatMulTiling,
    processors: &[Processor],
    discretisation: Discretisation,
    steal: bool,
) -> (StaticPlan, Vec<usize>) {
    let speeds: Vec<f64> = processors.iter().map(|p| p.speed).collect();
    let continuous = partition(&speeds, t.r as f64, t.s as f64);
    let owner = discretise(&continuous, &speeds, t.r, t.s, discretisation);
    let mut counts = vec![0; processors.len()];
    owner.iter().for_each(|&p| counts[p] += 1);
    (owner_plan(t, &owner, processors, steal), counts)
}

/// The grid (rows x cols) of `devices` devices whose blocks of an r x s tile grid are the closest
/// to square.
pub fn device_grid(devices: usize, r: usize, s: usize) -> (usize, usize) {
    (1..=devices)
        .filter(|d| devices.is_multiple_of(*d))
        .map(|dr| (dr, devices / dr))
        .min_by(|a, b| {
            let skew = |(dr, dc): (usize, usize)| {
                ((r as f64 / dr as f64) / (s as f64 / dc as f64)).ln().abs()
            };
            skew(*a).total_cmp(&skew(*b))
        })
        .unwrap_or((1, 1))
}

/// Anastasiadis's (2024) grid allocation over `processors` (one per device): C cut into blocks of a
/// [`device_grid`], one per device, no stealing.
pub fn grid_plan(t: &MatMulTiling, processors: &[Processor]) -> StaticPlan {
    let (dr, dc) = device_grid(processors.len(), t.r, t.s);
    let owner: Vec<usize> = (0..t.r * t.s)
        .map(|cell| {
            let (i, j) = (cell / t.s, cell % t.s);
            (i * dr / t.r.max(1)) * dc + j * dc / t.s.max(1)
        })
        .collect();
    owner_plan(t, &owner, processors, false)
}

/// The side mu of the maximum re-use squares for a device of `buffers` tiles, and whether it is
/// double-buffered (room for the next A tile and B row while the kernels run: mu^2 + 2 mu + 2
/// tiles), else single-buffered (1 + mu + mu^2). `None` below 3 tiles.
pub fn max_reuse_layout(buffers: usize) -> Option<(usize, bool)> {
    let single = max_reuse_mu(buffers).ok()?;
    // mu^2 + 2 mu + 2 <= B  <=>  (mu + 1)^2 <= B - 1.
    let double = ((buffers as u128 - 1).isqrt() as usize)
        .checked_sub(1)
        .filter(|&mu| mu >= 1)
        .map(|mu| mu.min(single));
    Some(match double {
        // Double buffering only when it does not shrink the squares.
        Some(mu) if mu == single => (mu, true),
        _ => (single, false),
    })
}

/// Dongarra et al.'s (2007) maximum re-use order: squares of mu x mu C tiles (ragged at the edges),
/// each run as `for l: for i in square: for j in square: task(i, j, l)` by one worker, the squares
/// handed out in order to whichever worker is free; after its last use in a square, each A tile, B
/// tile and C tile is released from the worker's node (C written back), so a device holds exactly
/// the square's tiles, one row of B and one A tile.
pub fn max_reuse_plan(
    t: &MatMulTiling,
    workers: &[usize],
    mu: usize,
    prefetch: bool,
) -> StaticPlan {
    let mut plan = StaticPlan {
        processors: vec![workers.iter().copied().map(WorkerId).collect()],
        steal: false,
        prefetch,
        ..Default::default()
    };
    for i0 in (0..t.r).step_by(mu) {
        for j0 in (0..t.s).step_by(mu) {
            let (i1, j1) = ((i0 + mu).min(t.r), (j0 + mu).min(t.s));
            let mut group = Vec::new();
            for l in 0..t.t {
                for i in i0..i1 {
                    for j in j0..j1 {
                        let task = t.task(i, j, l);
                        group.push(task);
                        if j + 1 == j1 {
                            plan.releases.push((task, 0)); // A(i, l)
                        }
                        if i + 1 == i1 {
                            plan.releases.push((task, 1)); // B(l, j)
                        }
                        if l + 1 == t.t {
                            plan.releases.push((task, 2)); // C(i, j)
                        }
                    }
                }
            }
            plan.groups.push(group);
            plan.owner.push(0);
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla_factorizations::MatMul;

    #[test]
    fn strategies_parse_and_print() {
        for s in [
            "auto",
            "dmda",
            "grid",
            "max-reuse",
            "peri-sum:precise:static",
        ] {
            assert_eq!(s.parse::<Strategy>().unwrap().to_string(), s);
        }
        assert_eq!(
            "peri-sum".parse::<Strategy>().unwrap(),
            Strategy::PeriSum {
                discretisation: Discretisation::Rounded,
                steal: true
            }
        );
        assert!("peri-sum:fancy".parse::<Strategy>().is_err());
        for contradictory in [
            "peri-sum:rounded:static:steal",
            "peri-sum:precise:precise",
            "peri-sum:steal:rounded",
            "peri-sum:static:static",
        ] {
            let err = contradictory.parse::<Strategy>().unwrap_err();
            assert!(
                err.contains("repeats or contradicts"),
                "{contradictory}: {err}"
            );
        }
        assert!("peri-sum:steal".parse::<Strategy>().is_ok());
        assert!("grid:x".parse::<Strategy>().is_err());
        assert!(
            "best"
                .parse::<Strategy>()
                .unwrap_err()
                .contains("expected auto")
        );
    }

    #[test]
    fn grids_are_as_square_as_the_matrix_allows() {
        assert_eq!(device_grid(4, 8, 8), (2, 2));
        assert_eq!(device_grid(8, 16, 8), (4, 2));
        assert_eq!(device_grid(8, 8, 16), (2, 4));
        assert_eq!(device_grid(3, 9, 9), (1, 3));
        let t = MatMulTiling::new(40, 40, 10, 10, MatMul::ACCUMULATE).unwrap();
        let procs: Vec<Processor> = (0..4)
            .map(|d| Processor {
                workers: vec![d],
                node: d + 1,
                speed: 1.0,
            })
            .collect();
        let plan = grid_plan(&t, &procs);
        assert!(plan.check(4 * 4, 4).is_ok());
        let mut per = [0; 4];
        plan.owner.iter().for_each(|&p| per[p] += 1);
        assert_eq!(per, [4, 4, 4, 4]);
    }

    #[test]
    fn max_reuse_layouts_fit_their_buffers() {
        assert_eq!(max_reuse_layout(21), Some((4, false)));
        assert_eq!(max_reuse_layout(26), Some((4, true)));
        assert_eq!(max_reuse_layout(3), Some((1, false)));
        assert_eq!(max_reuse_layout(5), Some((1, true)));
        assert_eq!(max_reuse_layout(2), None);
        // An unlimited (emulated) device is planned at once, not in 2^31 steps.
        let (mu, _) = max_reuse_layout(usize::MAX / 4).unwrap();
        assert!(mu > 1 << 30);
        let t = MatMulTiling::new(4, 4, 3, 1, MatMul::ACCUMULATE).unwrap();
        let plan = max_reuse_plan(&t, &[0], 2, false);
        assert!(plan.check(48, 1).is_ok());
        assert_eq!(plan.groups.len(), 4);
        // Per square: 2 A releases and 2 B releases per step, 4 C releases at the end.
        assert_eq!(plan.releases.len(), 4 * (3 * 4 + 4));
    }
}
