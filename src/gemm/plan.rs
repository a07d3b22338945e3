//! Planning a product: the strategy (or `auto`'s choice), the tiling, the static plan and where the
//! operands start.

use std::sync::Arc;

use hetla_bounds::communication::half_perimeter_lower_bound;
use hetla_factorizations::{MATMUL_A, MATMUL_B, MATMUL_C, MatMulTiling, Mode, TileRef};
use hetla_runtime::{HOST, MemoryNode, RunOptions, SchedulerKind};

use super::cost::{Machine, choose_tile, predict};
use super::options::{Gemm, Placement};
use super::partition::Discretisation;
use super::strategy::{self, Processor, Strategy};
use crate::plan::{Schedule, product_plan};
use crate::{Error, Plan, Result};

/// A product planned on a machine: its [`Plan`] (tiling, graph, static allocation, placements), and
/// what planning decided, for its report ([`Gemm::report`]).
#[derive(Debug, Clone)]
pub struct GemmPlan {
    plan: Plan,
    pub(super) tiling: MatMulTiling,
    pub(super) planned: Planned,
}

impl GemmPlan {
    /// The plan to run or simulate.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The same product with every C tile (so every task) on memory node `node`'s workers: the plan
    /// of a product on matrices that live there ([`Gemm::run_device`]).
    pub(super) fn only_on(&mut self, machine: &Machine<'_>, node: MemoryNode) {
        let on_node: Vec<Processor> = machine
            .processors(self.tiling.a.tile())
            .into_iter()
            .filter(|p| p.node == node.0)
            .collect();
        let plan = strategy::grid_plan(&self.tiling, &on_node);
        let schedule = Schedule {
            scheduler: Some(SchedulerKind::default()),
            plan: Some(Arc::new(plan)),
            placement: std::mem::take(&mut self.plan.schedule.placement),
            ..Schedule::default()
        };
        self.plan = product_plan(&self.tiling, machine.precision, schedule);
        self.planned.strategy = Strategy::Grid;
        self.planned.reason = "its matrices live on one GPU, which takes every product".into();
        self.planned.partition_shares =
            Some(vec![(node.0, (self.tiling.r * self.tiling.s) as f64)]);
    }
}

/// What planning decided, for the report.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub(super) strategy: Strategy,
    pub(super) reason: String,
    pub(super) predicted: f64,
    /// (node, planned C tiles) of a static partition.
    pub(super) partition_shares: Option<Vec<(usize, f64)>>,
}

/// (node, tiles owned) of an owner map over `processors`.
pub(super) fn shares(owner: &[usize], processors: &[Processor]) -> Vec<(usize, f64)> {
    processors
        .iter()
        .enumerate()
        .map(|(i, p)| (p.node, owner.iter().filter(|&&o| o == i).count() as f64))
        .collect()
}

/// `auto`: see the module documentation.
pub(super) fn auto_strategy(
    machine: &Machine<'_>,
    t: &MatMulTiling,
    processors: &[Processor],
    tile_bytes: usize,
) -> (Strategy, String) {
    if !machine.has_devices() {
        return (
            Strategy::Dmda,
            "no devices: nothing to copy, MCT balances the clusters".into(),
        );
    }
    let total: f64 = processors.iter().map(|p| p.speed).sum();
    let (r, s, steps) = (t.r as f64, t.s as f64, t.t as f64);
    for p in processors.iter().filter(|p| p.node != HOST.0) {
        let area = p.speed / total * r * s;
        let working_set =
            (half_perimeter_lower_bound(area, r, s) * steps + area) * tile_bytes as f64;
        if let Some(capacity) = machine.capacities[p.node]
            && working_set > capacity as f64
        {
            return (
                Strategy::MaxReuse,
                format!(
                    "a device's PERI-SUM share needs {:.0} MB, it holds {:.0} MB: maximum re-use",
                    working_set / 1e6,
                    capacity as f64 / 1e6
                ),
            );
        }
    }
    (
        Strategy::PeriSum {
            discretisation: Discretisation::Rounded,
            steal: true,
        },
        "devices hold their PERI-SUM shares: static partition with EffectiveSteal".into(),
    )
}

impl Gemm {
    /// Plans a product of shape (m, n, k) on `machine`: the tiling (the tile the model predicts
    /// fastest unless one was given), the strategy (or `auto`'s choice and why), and the plan, with
    /// its static allocation and placements.
    pub fn plan_on(
        &self,
        machine: &Machine<'_>,
        (m, n, k): (usize, usize, usize),
    ) -> Result<GemmPlan> {
        self.check(machine.capacities.len().saturating_sub(1))?;
        let (tiling, options, planned) = self.plan(machine, m, n, k)?;
        if self.resident {
            self.check_resident_fits(machine, &options.placement, &tiling)?;
        }
        let schedule = Schedule {
            scheduler: Some(options.scheduler),
            plan: options.plan,
            placement: options.placement,
            ..Schedule::default()
        };
        let plan = product_plan(&tiling, machine.precision, schedule);
        Ok(GemmPlan {
            plan,
            tiling,
            planned,
        })
    }

    /// Plans a product on `machine`: tiling, strategy and the runtime options.
    pub(super) fn plan(
        &self,
        machine: &Machine<'_>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(MatMulTiling, RunOptions, Planned)> {
        let (tile, predicted) = match self.tile {
            // A tile larger than every dimension is one tile of the largest.
            Some(tile) => {
                let tile = tile.min(m.max(n).max(k).max(1));
                (tile, predict(machine, m, n, k, tile))
            }
            None => choose_tile(machine, m, n, k),
        };
        let tiling = MatMulTiling::new(m, n, k, tile, self.params())?;
        crate::limits::check_graph(
            &format!("the product graph of {m} x {n} x {k} in tiles of {tile}"),
            (tiling.r as u128 * tiling.s as u128).saturating_mul(tiling.t as u128),
            0,
        )?;
        let processors = machine.processors(tile);
        let tile_bytes = tile * tile * machine.precision.bytes();
        let (strategy, reason) = match self.strategy {
            Strategy::Auto => auto_strategy(machine, &tiling, &processors, tile_bytes),
            given => (given, "given".to_owned()),
        };
        let mut options = RunOptions::default();
        let mut partition_shares = None;
        match strategy {
            Strategy::Auto => unreachable!("resolved above"),
            Strategy::Dmda => options.scheduler = SchedulerKind::Dmda,
            Strategy::Grid => {
                let devices: Vec<Processor> = processors
                    .iter()
                    .filter(|p| p.node != HOST.0 || !machine.has_devices())
                    .cloned()
                    .collect();
                let plan = strategy::grid_plan(&tiling, &devices);
                partition_shares = Some(shares(&plan.owner, &devices));
                options.plan = Some(Arc::new(plan));
            }
            Strategy::PeriSum {
                discretisation,
                steal,
            } => {
                let (plan, counts) =
                    strategy::peri_sum_plan(&tiling, &processors, discretisation, steal);
                partition_shares = Some(
                    processors
                        .iter()
                        .zip(counts)
                        .map(|(p, c)| (p.node, c as f64))
                        .collect(),
                );
                options.plan = Some(Arc::new(plan));
            }
            Strategy::MaxReuse => {
                let buffers = machine
                    .capacities
                    .iter()
                    .skip(1)
                    .flatten()
                    .map(|&c| c / tile_bytes)
                    .min()
                    .unwrap_or(usize::MAX / 4);
                let Some((mu, double)) = strategy::max_reuse_layout(buffers) else {
                    return Err(Error::InvalidOption {
                        option: "strategy",
                        reason: format!(
                            "max-reuse needs at least 3 tiles of {tile_bytes} bytes on each device, \
                             a device holds {buffers}: raise the GPU memory budget or use smaller tiles"
                        ),
                    });
                };
                // Large memories would allow squares of the whole C, one worker's work:
                // keep at least four squares per worker so that all of them get some.
                let all: Vec<usize> = (0..machine.workers.len()).collect();
                let spread = ((tiling.r * tiling.s) as f64 / (4 * all.len()) as f64).sqrt();
                let mu = mu.min(spread.floor() as usize).max(1);
                let plan = strategy::max_reuse_plan(&tiling, &all, mu, double);
                options.plan = Some(Arc::new(plan));
            }
        }
        options.placement = self.placements(&tiling);
        Ok((
            tiling,
            options,
            Planned {
                strategy,
                reason,
                predicted,
                partition_shares,
            },
        ))
    }

    /// A resident product keeps A, B and C on its GPU for the whole run: they must fit its budget
    /// (an eviction would copy inside the timed run).
    fn check_resident_fits(
        &self,
        machine: &Machine<'_>,
        placement: &[(TileRef, MemoryNode, Mode)],
        tiling: &MatMulTiling,
    ) -> Result<()> {
        let element = machine.precision.bytes();
        let bytes: usize = placement
            .iter()
            .map(|&(tile, ..)| {
                let (r, c) = tiling
                    .tiling(tile.matrix)
                    .map_or((0, 0), |t| t.tile_shape(tile.row, tile.col));
                r * c * element
            })
            .sum();
        let node = placement.first().map_or(1, |&(_, node, _)| node.0);
        match machine.capacities.get(node).copied().flatten() {
            Some(budget) if bytes > budget => Err(Error::InvalidOption {
                option: "resident",
                reason: format!(
                    "A, B and C take {:.1} MB, more than GPU {}'s budget of {:.1} MB: a resident \
                     product keeps them all on the GPU (give it more memory, or multiply from host \
                     memory)",
                    bytes as f64 / 1e6,
                    node - 1,
                    budget as f64 / 1e6
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The tiles placed on devices before the run.
    pub(super) fn placements(&self, t: &MatMulTiling) -> Vec<(TileRef, MemoryNode, Mode)> {
        let mut out = Vec::new();
        for (matrix, placement) in [MATMUL_A, MATMUL_B, MATMUL_C]
            .into_iter()
            .zip(self.placement)
        {
            let Placement::Device(d) = placement else {
                continue;
            };
            let tiling = t.tiling(matrix).expect("the three matrices have tilings");
            let mode = if matrix == MATMUL_C {
                Mode::ReadWrite
            } else {
                Mode::Read
            };
            for i in 0..tiling.row_tiles() {
                for j in 0..tiling.col_tiles() {
                    out.push((TileRef::new(matrix, i, j), MemoryNode(d + 1), mode));
                }
            }
        }
        out
    }
}
