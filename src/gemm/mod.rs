//! The general matrix product C <- alpha op(A) op(B) + beta C on a heterogeneous node:
//! model-driven tiling, static and dynamic allocation, and the data it moves measured
//! against lower bounds.
//!
//! One call ([`Gemm::run`] on a real [`Platform`], [`Gemm::simulate`] on a modelled one)
//! goes through the same steps:
//! 1. **Machine.** The run's workers with, for each, the seconds of one T x T x T GEMM tile
//!    at candidate tile sizes (calibrated models, or the platform model's rates), the
//!    capacity of each memory node and the host-device link.
//! 2. **Tile size** (unless given): for each candidate T, Anastasiadis's (2024) data-reuse pipeline
//!    model (its Eq. 2.5) on each memory node's share of the r x s x t subkernels, shares
//!    in proportion to speed (the heterogeneous split that makes all finish together,
//!    Ballard et al. (2011)): a node's time is `max(t_h2d, t_exec) k_in + t_exec (k - k_in) + t_in +
//!    t_out`, where k_in counts the tiles it must fetch (A and B strips of a square zone:
//!    2 sqrt(area) t, plus its C tiles) beyond the first subkernel's. The predicted time is
//!    the slowest node's; the smallest wins (ties to the larger tile). Ragged tiles count
//!    as full ones, which penalises padding, as Anastasiadis's (2024) C_padding does.
//! 3. **Strategy** (see [`Strategy`]); `auto` picks, from the same model, `dmda` without
//!    devices (no copies to save), `max-reuse` when some device cannot hold its PERI-SUM
//!    share's working set (A and B strips and C zone), else `peri-sum` with EffectiveSteal
//!    (Eyraud-Dubois and Lambert's (2018) best).
//! 4. **Run** on the runtime (real threads or the simulator), with the static plan or MCT.
//!    Device workers overlap copies and kernels (uploads on their own stream, prefetch of
//!    the next two planned tasks), reuse resident tiles, and evict LRU (or, for
//!    max-reuse, exactly what the plan releases).
//! 5. **Accounting**: bytes per link and per device from the trace, against lower bounds:
//!    for each device that performed G tile updates, at least max(3 G^{2/3}, G
//!    sqrt(27/(8m)) - m) tiles (Loomis-Whitney: the A, B and C tiles G updates touch, all
//!    starting in host memory; and Dongarra et al.'s (2007) bound with m tile buffers). The report also
//!    gives the bound for the work split that equalises finish times and, for static
//!    partitions, the PERI-SUM bound of the planned shares.
//!
//! Placements: an operand marked [`Placement::Device`] is copied to that device before
//! the clock starts (not timed, not counted); A and B stay valid on the host too, C's
//! only valid copy is then the device's. The result is always written back into the
//! caller's C (inside the timed run). Bounds that assume host-resident operands are then
//! reported as 0 for what was placed.

pub mod partition;
pub mod strategy;

use faer::{MatMut, MatRef};
use hetla_bounds::communication::{
    device_transfers_lower_bound, equal_finish_split, half_perimeter_lower_bound,
};
use hetla_clusters::ClusterSpec;
use hetla_factorizations::{MATMUL_A, MATMUL_B, MATMUL_C, MatMul, MatMulTiling, Mode, TileRef};
use serde::Serialize;

pub use partition::Discretisation;
pub use strategy::{Processor, Strategy};

use crate::model::Modelled;
use crate::runtime::{HOST, MemoryNode};
use crate::runtime::{
    KernelKey, Platform, ResourceClass, ResourceKind, RunOptions, SchedulerKind, Trace, WorkerInfo,
    execute,
};
use crate::runtime::{SimOptions, SimWork, simulate};
use crate::tile_work::{TileWork, run_error};
use crate::{Backend, Error, Result, TiledMatrix};

/// Where an operand lives when the product starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Host memory (the caller's matrix).
    #[default]
    Host,
    /// Already in the memory of device `i` (see the module documentation).
    Device(usize),
}

/// Tile sizes tried when the models know none.
const DEFAULT_TILES: [usize; 5] = [256, 512, 1024, 2048, 4096];
/// Rates assumed without a model, flop/s: per CPU core, and per device.
const GUESS_CPU_CORE: f64 = 20e9;
const GUESS_DEVICE: f64 = 1e12;

/// Configures general matrix products C <- alpha op(A) op(B) + beta C.
///
/// ```
/// use faer::Mat;
/// let platform = hetla::Platform::new(&hetla::ClusterSpec::Auto, hetla::Backend::Faer)?;
/// let a = Mat::from_fn(30, 20, |i, j| (i + 2 * j) as f64);
/// let b = Mat::from_fn(20, 10, |i, j| (i as f64 - j as f64));
/// let mut c = Mat::<f64>::zeros(30, 10);
/// hetla::Gemm::new().tile(8).run(&platform, a.as_ref(), b.as_ref(), c.as_mut())?;
/// let expected = &a * &b;
/// assert!((&c - &expected).norm_max() < 1e-10);
/// // The same product on the process-wide platform `solve_spd` uses.
/// let mut d = Mat::<f64>::zeros(30, 10);
/// hetla::Gemm::new().run_shared(a.as_ref(), b.as_ref(), d.as_mut())?;
/// assert!((&d - &expected).norm_max() < 1e-10);
/// # Ok::<(), hetla::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    /// op(A) = A^T.
    trans_a: bool,
    /// op(B) = B^T.
    trans_b: bool,
    /// Factor of the product (default 1).
    alpha: f64,
    /// Factor of the old C (default 0: C is overwritten, never read).
    beta: f64,
    /// Tile side (default: chosen by the model).
    tile: Option<usize>,
    /// Allocation strategy (default `auto`).
    strategy: Strategy,
    /// Where A, B and C start.
    placement: [Placement; 3],
}

impl Default for Gemm {
    fn default() -> Self {
        Self {
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
            tile: None,
            strategy: Strategy::Auto,
            placement: [Placement::Host; 3],
        }
    }
}

/// What one product did and how it compares with the bounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmReport {
    /// m, n, k.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Inner dimension.
    pub k: usize,
    /// Wall-clock (or simulated) seconds of the run.
    pub seconds: f64,
    /// 2 m n k / seconds, in Gflop/s.
    pub gflops: f64,
    /// Tile side used.
    pub tile: usize,
    /// The strategy that ran (never `auto`).
    pub strategy: String,
    /// Why: "given", or the model's reason for `auto`.
    pub strategy_reason: String,
    /// The tile model's predicted seconds at the chosen tile.
    pub predicted_seconds: f64,
    /// Bytes moved in total and per device.
    pub bytes_moved: BytesMoved,
    /// Lower bound on the bytes this run had to move, from the updates each device
    /// performed (see the module documentation).
    pub comm_lower_bound_bytes: f64,
    /// bytes moved / that bound (>= 1; `null` when the bound is 0).
    pub comm_ratio: Option<f64>,
    /// Bound for the work split that equalises the workers' finish times.
    pub split_lower_bound_bytes: f64,
    /// For static partitions, the PERI-SUM bound of the planned shares (A and B strips of
    /// zones of those areas, and their C tiles).
    pub partition_lower_bound_bytes: Option<f64>,
    /// Tile updates (tasks) per worker name.
    pub updates: Vec<(String, usize)>,
}

/// Bytes moved by a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BytesMoved {
    /// All links together.
    pub total: usize,
    /// Per device ("gpu0"): bytes into and out of its memory.
    pub per_device: Vec<(String, usize)>,
}

/// What planning needs to know of a machine, real or modelled.
struct Machine<'a> {
    workers: &'a [WorkerInfo],
    /// Capacity of each memory node (`None`: unlimited).
    capacities: Vec<Option<usize>>,
    /// Seconds of one T x T x T GEMM tile on a worker, if known.
    tile_seconds: &'a dyn Fn(usize, usize) -> Option<f64>,
    /// Seconds of one copy of `bytes` between host memory and a node.
    copy_seconds: &'a dyn Fn(MemoryNode, usize) -> f64,
    /// Tile sizes the models know.
    known_tiles: Vec<usize>,
}

impl Machine<'_> {
    /// Flop/s of a worker on T x T tiles.
    fn rate(&self, worker: usize, tile: usize) -> f64 {
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
    fn processors(&self, tile: usize) -> Vec<Processor> {
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

    fn has_devices(&self) -> bool {
        self.workers.iter().any(|w| w.node != HOST)
    }
}

/// Anastasiadis's (2024) Eq. 2.5 for one node: `k` subkernels of `exec` seconds, `fetched` tiles of
/// `h2d` seconds in and `returned` out.
fn pipeline_seconds(k: f64, exec: f64, h2d: f64, fetched: f64, returned: f64) -> f64 {
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
fn predict(machine: &Machine<'_>, m: usize, n: usize, k: usize, tile: usize) -> f64 {
    let (r, s, t) = (
        m.div_ceil(tile) as f64,
        n.div_ceil(tile) as f64,
        k.div_ceil(tile) as f64,
    );
    let processors = machine.processors(tile);
    let total: f64 = processors.iter().map(|p| p.speed).sum();
    let bytes = tile * tile * size_of::<f64>();
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
fn choose_tile(machine: &Machine<'_>, m: usize, n: usize, k: usize) -> (usize, f64) {
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

impl Gemm {
    /// C <- A B (alpha 1, beta 0), tile and strategy chosen by the model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Transposes: op(A) = A^T when `a`, op(B) = B^T when `b`.
    pub fn transpose(mut self, a: bool, b: bool) -> Self {
        self.trans_a = a;
        self.trans_b = b;
        self
    }

    /// The scalars alpha and beta.
    pub fn scalars(mut self, alpha: f64, beta: f64) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// A fixed tile side.
    pub fn tile(self, tile: usize) -> Self {
        self.tile_or_model(Some(tile))
    }

    /// A fixed tile side, or (`None`) the one the model chooses.
    pub fn tile_or_model(mut self, tile: Option<usize>) -> Self {
        self.tile = tile;
        self
    }

    /// The allocation strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Where A, B and C start.
    pub fn placement(mut self, a: Placement, b: Placement, c: Placement) -> Self {
        self.placement = [a, b, c];
        self
    }

    /// Whether op(A) and op(B) are transposes.
    pub fn transposes(&self) -> (bool, bool) {
        (self.trans_a, self.trans_b)
    }

    /// alpha and beta.
    pub fn factors(&self) -> (f64, f64) {
        (self.alpha, self.beta)
    }

    fn params(&self) -> MatMul {
        MatMul::new(self.trans_a, self.trans_b, self.alpha, self.beta)
    }

    /// Checks the options against a machine with `devices` devices.
    fn check(&self, devices: usize) -> Result<()> {
        if self.tile == Some(0) {
            return Err(Error::InvalidOption {
                option: "tile",
                reason: "the tile side must be at least 1".into(),
            });
        }
        for (name, value) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !value.is_finite() {
                return Err(Error::InvalidOption {
                    option: if name == "alpha" { "alpha" } else { "beta" },
                    reason: format!("{name} must be finite, got {value}"),
                });
            }
        }
        for p in self.placement {
            if let Placement::Device(d) = p
                && d >= devices
            {
                return Err(Error::InvalidOption {
                    option: "placement",
                    reason: format!(
                        "operand placed on device {d}, but the platform has {devices} device(s)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Plans a product on `machine`: tiling, strategy and the runtime options.
    fn plan(
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
        let tile_bytes = tile * tile * size_of::<f64>();
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
                options.plan = Some(std::sync::Arc::new(plan));
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
                options.plan = Some(std::sync::Arc::new(plan));
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
                options.plan = Some(std::sync::Arc::new(plan));
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

    /// The tiles placed on devices before the run.
    fn placements(&self, t: &MatMulTiling) -> Vec<(TileRef, MemoryNode, Mode)> {
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

    /// Computes C <- alpha op(A) op(B) + beta C on the process-wide platform that
    /// `solve_spd` and `Cholesky::new()` use ([`Platform::shared`]: `auto` clusters, faer
    /// kernels), built on first use.
    pub fn run_shared(
        &self,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        c: MatMut<'_, f64>,
    ) -> Result<GemmReport> {
        let platform = Platform::shared(&ClusterSpec::default(), Backend::default())?;
        self.run(&platform, a, b, c)
    }

    /// Computes C <- alpha op(A) op(B) + beta C on `platform`.
    pub fn run(
        &self,
        platform: &Platform,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        c: MatMut<'_, f64>,
    ) -> Result<GemmReport> {
        self.run_traced(platform, a, b, c).map(|(report, _)| report)
    }

    /// As [`Gemm::run`], with the trace of the run (empty when there was nothing to
    /// multiply).
    pub fn run_traced(
        &self,
        platform: &Platform,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        mut c: MatMut<'_, f64>,
    ) -> Result<(GemmReport, Trace)> {
        self.check(platform.devices().len())?;
        let (m, n, k) = self.dimensions(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            (c.nrows(), c.ncols()),
        )?;
        if k == 0 || m == 0 || n == 0 {
            // Nothing to multiply: C <- beta C (BLAS's quick return).
            platform.backend().matmul(
                faer::Mat::<f64>::zeros(m, 0).as_ref(),
                faer::Mat::<f64>::zeros(0, n).as_ref(),
                c.as_mut(),
                self.alpha,
                self.beta,
                faer::Par::Seq,
            )?;
            let empty = Trace::new(platform.workers().to_vec(), Vec::new(), 0.0);
            return Ok((self.empty_report(m, n, k), empty));
        }
        let models = platform.models();
        let workers = platform.workers();
        let tile_seconds = |w: usize, tile: usize| {
            models
                .get(
                    &KernelKey::square(hetla_kernels::Op::Gemm, tile),
                    &workers[w].class,
                )
                .and_then(|s| s.calibrated_mean())
        };
        let links = platform.links();
        let copy_seconds = |node: MemoryNode, bytes: usize| {
            crate::runtime::copy_seconds(&links, HOST, node, bytes)
        };
        let mut capacities = vec![None];
        capacities.extend(platform.devices().iter().map(|d| Some(d.device.budget())));
        let known_tiles = known_gemm_tiles(&models, workers);
        let machine = Machine {
            workers,
            capacities,
            tile_seconds: &tile_seconds,
            copy_seconds: &copy_seconds,
            known_tiles,
        };
        let (tiling, options, planned) = self.plan(&machine, m, n, k)?;
        let graph = hetla_factorizations::matmul(&tiling);
        let ta = TiledMatrix::read_only(a, tiling.a.tile(), "A")?;
        let tb = TiledMatrix::read_only(b, tiling.b.tile(), "B")?;
        let tc = TiledMatrix::new(c, tiling.c.tile(), "C")?;
        let work = TileWork {
            graph: &graph,
            matrices: &[&ta, &tb, &tc],
            backend: platform.backend(),
        };
        let trace = execute(platform, &work, &options).map_err(|e| run_error(&graph, None, e))?;
        Ok((self.report(&machine, &tiling, &planned, &trace), trace))
    }

    /// Simulates C <- alpha op(A) op(B) + beta C of shape (m, n, k) on a modelled machine.
    pub fn simulate(
        &self,
        machine: &Modelled<'_>,
        shape: (usize, usize, usize),
        options: &SimOptions,
    ) -> Result<GemmReport> {
        self.simulate_traced(machine, shape, options)
            .map(|(report, _)| report)
    }

    /// [`Gemm::simulate`], with the simulated run's trace.
    pub fn simulate_traced(
        &self,
        machine: &Modelled<'_>,
        (m, n, k): (usize, usize, usize),
        options: &SimOptions,
    ) -> Result<(GemmReport, Trace)> {
        let (model, gpus) = (machine.model, machine.gpus);
        let platform = machine.sim_platform()?;
        self.check(gpus)?;
        if m == 0 || n == 0 || k == 0 {
            return Err(Error::InvalidOption {
                option: "m/n/k",
                reason: "a simulated product needs m, n and k of at least 1".into(),
            });
        }
        let workers = platform.workers.clone();
        let tile_seconds = |w: usize, tile: usize| {
            model.duration(
                &KernelKey::square(hetla_kernels::Op::Gemm, tile),
                tile,
                &workers[w].class,
            )
        };
        let copy_seconds =
            |node: MemoryNode, bytes: usize| platform.copy_seconds(HOST, node, bytes);
        let mut known_tiles = model.tiles();
        known_tiles.retain(|&t| {
            workers
                .iter()
                .all(|w| model.rate(hetla_kernels::Op::Gemm, t, &w.class).is_some())
        });
        let machine = Machine {
            workers: &workers,
            capacities: platform.capacities.clone(),
            tile_seconds: &tile_seconds,
            copy_seconds: &copy_seconds,
            known_tiles,
        };
        let (tiling, run, planned) = self.plan(&machine, m, n, k)?;
        let graph = hetla_factorizations::matmul(&tiling);
        let keys: Vec<KernelKey> = graph
            .tasks()
            .iter()
            .map(|task| {
                KernelKey::of_task(task, |t| {
                    tiling
                        .tiling(t.matrix)
                        .map_or((0, 0), |x| x.tile_shape(t.row, t.col))
                })
            })
            .collect();
        let tile_bytes = |t: TileRef| {
            let (rows, cols) = tiling
                .tiling(t.matrix)
                .map_or((0, 0), |x| x.tile_shape(t.row, t.col));
            rows * cols * size_of::<f64>()
        };
        let tile = tiling.c.tile();
        let duration = |key: &KernelKey, class: &ResourceClass| model.duration(key, tile, class);
        let work = SimWork {
            graph: &graph,
            keys: &keys,
            tile_bytes: &tile_bytes,
            duration: &duration,
        };
        // The strategy's scheduler, plan and placement; the caller's restrictions and beta.
        let options = SimOptions {
            run: RunOptions {
                scheduler: run.scheduler,
                plan: run.plan,
                placement: run.placement,
                ..options.run.clone()
            },
            ..options.clone()
        };
        let trace = simulate(&platform, &work, &options)?;
        Ok((self.report(&machine, &tiling, &planned, &trace), trace))
    }

    /// (m, n, k) from the stored shapes of A, B and C; errors name the operand.
    fn dimensions(
        &self,
        a: (usize, usize),
        b: (usize, usize),
        c: (usize, usize),
    ) -> Result<(usize, usize, usize)> {
        let p = self.params();
        let (m, k) = p.op_a(a);
        let (kb, n) = p.op_b(b);
        let mismatch = |reason: String| {
            Err(Error::InvalidOption {
                option: "shapes",
                reason,
            })
        };
        if kb != k {
            return mismatch(format!(
                "op(A) is {m}x{k} but op(B) is {kb}x{n}: the inner dimensions differ"
            ));
        }
        if c != (m, n) {
            return mismatch(format!("C is {}x{} but op(A) op(B) is {m}x{n}", c.0, c.1));
        }
        Ok((m, n, k))
    }

    fn empty_report(&self, m: usize, n: usize, k: usize) -> GemmReport {
        GemmReport {
            m,
            n,
            k,
            seconds: 0.0,
            gflops: 0.0,
            tile: 0,
            strategy: "none".into(),
            strategy_reason: "nothing to multiply".into(),
            predicted_seconds: 0.0,
            bytes_moved: BytesMoved {
                total: 0,
                per_device: Vec::new(),
            },
            comm_lower_bound_bytes: 0.0,
            comm_ratio: None,
            split_lower_bound_bytes: 0.0,
            partition_lower_bound_bytes: None,
            updates: Vec::new(),
        }
    }

    /// The report of a run: time, bytes and bounds.
    fn report(
        &self,
        machine: &Machine<'_>,
        tiling: &MatMulTiling,
        planned: &Planned,
        trace: &Trace,
    ) -> GemmReport {
        let (m, n) = (tiling.c.rows(), tiling.c.cols());
        let k = if tiling.params.trans_a {
            tiling.a.rows()
        } else {
            tiling.a.cols()
        };
        let tile = tiling.c.tile();
        let tile_bytes = (tile * tile * size_of::<f64>()) as f64;
        let seconds = trace.makespan;
        let summary = trace.summary();
        let workers = machine.workers;
        // Bytes per device: every copy into or out of its node.
        let devices: Vec<usize> = {
            let mut nodes: Vec<usize> = workers
                .iter()
                .map(|w| w.node.0)
                .filter(|&n| n != 0)
                .collect();
            nodes.sort_unstable();
            nodes.dedup();
            nodes
        };
        let per_device: Vec<(String, usize)> = devices
            .iter()
            .map(|&node| {
                let bytes = trace
                    .transfers
                    .iter()
                    .filter(|t| t.transfer.from.0 == node || t.transfer.to.0 == node)
                    .map(|t| t.transfer.bytes)
                    .sum();
                (crate::runtime::node_name(MemoryNode(node)), bytes)
            })
            .collect();
        let total = trace.transfers.iter().map(|t| t.transfer.bytes).sum();
        let updates_on = |node: usize| {
            trace
                .tasks
                .iter()
                .filter(|e| workers[e.worker].node.0 == node)
                .count() as f64
        };
        let placed = self.placement.iter().any(|p| *p != Placement::Host);
        let device_bound = |node: usize, updates: f64| -> f64 {
            if placed || updates == 0.0 {
                return 0.0;
            }
            let buffers = machine.capacities[node]
                .map_or(usize::MAX / 4, |c| (c as f64 / tile_bytes) as usize);
            let lw = device_transfers_lower_bound(updates, buffers.max(3)).unwrap_or(0.0);
            lw.max(3.0 * updates.powf(2.0 / 3.0))
        };
        let bound_tiles: f64 = devices
            .iter()
            .map(|&d| device_bound(d, updates_on(d)))
            .sum();
        let comm_lower_bound_bytes = bound_tiles * tile_bytes;
        // The split that equalises finish times, by worker speed.
        let costs: Vec<f64> = (0..workers.len())
            .map(|w| 1.0 / machine.rate(w, tile))
            .collect();
        let total_updates = (tiling.r * tiling.s * tiling.t) as f64;
        let split_lower_bound_bytes = equal_finish_split(&costs, total_updates)
            .map(|split| {
                devices
                    .iter()
                    .map(|&d| {
                        let g: f64 = (0..workers.len())
                            .filter(|&w| workers[w].node.0 == d)
                            .map(|w| split.work[w])
                            .sum();
                        device_bound(d, g)
                    })
                    .sum::<f64>()
                    * tile_bytes
            })
            .unwrap_or(0.0);
        let partition_lower_bound_bytes = planned.partition_shares.as_ref().map(|shares| {
            let (r, s, t) = (tiling.r as f64, tiling.s as f64, tiling.t as f64);
            shares
                .iter()
                .filter(|&&(node, area)| node != HOST.0 && area > 0.0 && !placed)
                .map(|&(_, area)| t * half_perimeter_lower_bound(area, r, s) + area)
                .sum::<f64>()
                * tile_bytes
        });
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        GemmReport {
            m,
            n,
            k,
            seconds,
            gflops: flops / seconds.max(f64::MIN_POSITIVE) / 1e9,
            tile,
            strategy: planned.strategy.to_string(),
            strategy_reason: planned.reason.clone(),
            predicted_seconds: planned.predicted,
            bytes_moved: BytesMoved { total, per_device },
            comm_lower_bound_bytes,
            comm_ratio: (comm_lower_bound_bytes > 0.0)
                .then(|| total as f64 / comm_lower_bound_bytes),
            split_lower_bound_bytes,
            partition_lower_bound_bytes,
            updates: summary
                .workers
                .iter()
                .map(|w| (w.name.clone(), w.tasks))
                .collect(),
        }
    }
}

/// What planning decided, for the report.
struct Planned {
    strategy: Strategy,
    reason: String,
    predicted: f64,
    /// (node, planned C tiles) of a static partition.
    partition_shares: Option<Vec<(usize, f64)>>,
}

/// (node, tiles owned) of an owner map over `processors`.
fn shares(owner: &[usize], processors: &[Processor]) -> Vec<(usize, f64)> {
    processors
        .iter()
        .enumerate()
        .map(|(i, p)| (p.node, owner.iter().filter(|&&o| o == i).count() as f64))
        .collect()
}

/// `auto`: see the module documentation.
fn auto_strategy(
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

/// Square GEMM tile sizes with a calibrated model on every worker class.
fn known_gemm_tiles(models: &crate::runtime::PerfModels, workers: &[WorkerInfo]) -> Vec<usize> {
    DEFAULT_TILES
        .into_iter()
        .chain([128, 384, 768, 960, 1536, 1920, 3072])
        .filter(|&tile| {
            workers.iter().all(|w| {
                models
                    .get(&KernelKey::square(hetla_kernels::Op::Gemm, tile), &w.class)
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
    fn the_pipeline_model_overlaps_copies_with_kernels() {
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
