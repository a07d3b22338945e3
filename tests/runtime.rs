//! The runtime: schedulers on synthetic graphs with fake models, failures (non-SPD pivots and
//! panics) under every scheduler, residuals under every cluster configuration this machine allows,
//! performance-model persistence and trace exports.

mod common;
use std::sync::Arc;

use faer::Par;
use hetla::check::{RESIDUAL_THRESHOLD, cholesky_residual};
use hetla::{Backend, Cholesky, ClusterSpec, Op, Precision, matgen::random_spd};
use hetla_factorizations::{TaskGraph, TaskId, TileRef, Tiling, cholesky};
use hetla_runtime::MIN_SAMPLES;
use hetla_runtime::{
    KernelKey, Mct, ModelStore, ModelTable, PerfModels, Platform, ResourceClass, ResourceKind,
    RunOptions, RunStep, SchedContext, Scheduler, SchedulerKind, Stats, TaskFailure, TaskInfo,
    WorkerId, WorkerInfo, Workload, execute,
};

fn platform(spec: &str) -> Arc<Platform> {
    let spec: ClusterSpec = spec.parse().unwrap();
    Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::None).unwrap())
}

fn cores() -> usize {
    hetla::Topology::detect().unwrap().cores().len()
}

/// Every cluster spec this machine can build: NxM grids, levels, auto and per-core lists.
fn specs() -> Vec<String> {
    let c = cores();
    let mut specs: Vec<String> = (1..=c)
        .flat_map(|n| (1..=c / n).map(move |m| format!("{n}x{m}")))
        .collect();
    specs.extend(["auto", "core", "package", "l2"].map(String::from));
    let lists: Vec<String> = hetla_clusters::available_cpus()
        .iter()
        .map(|c| c.to_string())
        .collect();
    specs.push(lists.join("/"));
    specs
}

fn worker(name: &str, kind: ResourceKind, class: ResourceClass, cores: usize) -> WorkerInfo {
    WorkerInfo {
        name: name.into(),
        kind,
        class,
        node: hetla_runtime::HOST,
        cpus: (0..cores).collect(),
    }
}

fn calibrated(mean: f64) -> Stats {
    Stats {
        samples: MIN_SAMPLES,
        mean,
        m2: 0.0,
    }
}

/// Cojean et al. (2016), section 5.2: 28 independent DGEMMs of tile 960 on one 10-core cluster and
/// one GPU, with Table 2's rates (1 core 36.46 Gflop/s; GPU 28.80x, 10 cores 7.77x), are split 6 on
/// the cluster and 22 on the GPU by MCT.
#[test]
fn mct_splits_the_papers_28_gemms_6_and_22() {
    let flops = 2.0 * 960f64.powi(3);
    let one_core = 36.46e9;
    let workers = [
        worker(
            "cluster",
            ResourceKind::Cpu,
            ResourceClass::CpuCluster { cores: 10 },
            10,
        ),
        worker(
            "gpu",
            ResourceKind::Gpu,
            ResourceClass::Gpu {
                name: "K40m".into(),
            },
            1,
        ),
    ];
    let task = TaskInfo {
        priority: flops,
        flops,
        allowed: None,
        key: 0,
    };
    let table = ModelTable {
        class_of_worker: vec![0, 1],
        classes: 2,
        stats: vec![
            calibrated(flops / (7.77 * one_core)),
            calibrated(flops / (28.80 * one_core)),
        ],
    };
    let ctx = SchedContext::new(&workers, &[task; 28], table);
    let mct = Mct::new(2);
    for t in 0..28 {
        mct.push(TaskId(t), None, 0.0, &ctx);
    }
    let count = |w| std::iter::from_fn(|| mct.pop(WorkerId(w), 0.0, &ctx)).count();
    assert_eq!((count(0), count(1)), (6, 22));
}

#[test]
fn mct_measures_uncalibrated_classes_first_and_respects_restrictions() {
    let workers = [
        worker(
            "small",
            ResourceKind::Cpu,
            ResourceClass::CpuCluster { cores: 1 },
            1,
        ),
        worker(
            "big",
            ResourceKind::Cpu,
            ResourceClass::CpuCluster { cores: 8 },
            8,
        ),
        worker(
            "gpu",
            ResourceKind::Gpu,
            ResourceClass::Gpu { name: "x".into() },
            1,
        ),
    ];
    let gpu_only: &[ResourceKind] = &[ResourceKind::Gpu];
    // Task 0 may run anywhere; the big class has no samples, so MCT sends it there even
    // though the small one is calibrated. Task 1 is restricted to the GPU.
    let task = |allowed| TaskInfo {
        priority: 1.0,
        flops: 1e9,
        allowed,
        key: 0,
    };
    let table = ModelTable {
        class_of_worker: vec![0, 1, 2],
        classes: 3,
        stats: vec![calibrated(1e-3), Stats::default(), calibrated(1.0)],
    };
    let ctx = SchedContext::new(&workers, &[task(None), task(Some(gpu_only))], table);
    let mct = Mct::new(3);
    mct.push(TaskId(0), None, 0.0, &ctx);
    mct.push(TaskId(1), None, 0.0, &ctx);
    assert_eq!(mct.pop(WorkerId(1), 0.0, &ctx), Some(TaskId(0)));
    assert_eq!(mct.pop(WorkerId(2), 0.0, &ctx), Some(TaskId(1)));
    assert_eq!(mct.pop(WorkerId(0), 0.0, &ctx), None);
}

/// Tasks of a Cholesky graph that do no work, optionally panicking at one task.
struct Empty {
    graph: TaskGraph,
    panic_at: Option<usize>,
}

impl Workload for Empty {
    fn graph(&self) -> &TaskGraph {
        &self.graph
    }
    fn key(&self, task: TaskId) -> KernelKey {
        KernelKey::square(self.graph.task(task).op, 1)
    }
    fn tile_bytes(&self, _tile: TileRef) -> usize {
        8
    }
    fn run(&self, task: TaskId, _par: Par) -> Result<(), hetla_kernels::KernelError> {
        if Some(task.0) == self.panic_at {
            panic!("injected panic at task {task}");
        }
        Ok(())
    }
}

fn empty(tiles: usize, panic_at: Option<usize>) -> Empty {
    Empty {
        graph: cholesky(&Tiling::square(tiles, 1).unwrap()).unwrap(),
        panic_at,
    }
}

#[test]
fn every_scheduler_runs_every_task_once_after_its_predecessors() {
    let work = empty(8, None);
    for spec in specs() {
        let platform = platform(&spec);
        for scheduler in SchedulerKind::ALL {
            let options = RunOptions {
                scheduler,
                ..RunOptions::default()
            };
            let trace = execute(&platform, &work, &options).unwrap();
            assert_eq!(trace.tasks.len(), work.graph.len(), "{spec} {scheduler}");
            let mut end = vec![f64::NAN; work.graph.len()];
            for e in &trace.tasks {
                assert!(end[e.task].is_nan(), "task {} ran twice", e.task);
                end[e.task] = e.end;
            }
            for e in &trace.tasks {
                for &p in work.graph.predecessors(e.task) {
                    assert!(
                        end[p] <= e.start,
                        "{spec} {scheduler}: {} before {p}",
                        e.task
                    );
                }
            }
        }
    }
}

#[test]
fn a_task_no_worker_may_run_is_an_error_not_a_hang() {
    let options = RunOptions {
        restrictions: vec![(Op::GemmNt, vec![ResourceKind::Gpu])],
        ..RunOptions::default()
    };
    let err = execute(&platform("1x1"), &empty(4, None), &options).unwrap_err();
    assert_eq!(err.trace.tasks.len(), 0);
    assert_eq!(err.failure, TaskFailure::NoWorker);
    assert!(matches!(err.step, RunStep::Task(_)));
}

/// After a failed run, the platform's pools factor an SPD matrix accurately.
fn assert_pools_still_factor(
    platform: &Arc<Platform>,
    scheduler: SchedulerKind,
    a: &faer::Mat<f64>,
) {
    let f = Cholesky::new()
        .platform(platform.clone())
        .scheduler(scheduler)
        .tile(64)
        .factor(a.as_ref())
        .unwrap();
    assert!(cholesky_residual(a.as_ref(), f.storage(), Par::Seq) < RESIDUAL_THRESHOLD);
}

#[test]
fn panics_stop_the_run_and_leave_the_pools_usable() {
    let a = random_spd(300, 3);
    for spec in ["1x1", &format!("{}x1", cores()), &format!("1x{}", cores())] {
        let platform = platform(spec);
        for scheduler in SchedulerKind::ALL {
            let work = empty(8, Some(30));
            let options = RunOptions {
                scheduler,
                ..RunOptions::default()
            };
            let err = execute(&platform, &work, &options).unwrap_err();
            assert_eq!(err.step, RunStep::Task(TaskId(30)));
            assert!(
                matches!(&err.failure, TaskFailure::Panic(m) if m.contains("injected")),
                "{:?}",
                err.failure
            );
            assert!(err.trace.tasks.len() < work.graph.len());
            // The same pools factor the next matrix.
            assert_pools_still_factor(&platform, scheduler, &a);
        }
    }
}

#[test]
fn non_spd_fails_at_the_known_column_under_every_scheduler_and_tile() {
    let n = 120;
    let spd = random_spd(n, 9);
    for spec in ["1x1", &format!("{}x1", cores())] {
        let platform = platform(spec);
        for scheduler in SchedulerKind::ALL {
            for tile in [5, 7, 50, 64, 200, 300] {
                for column in [0, 57, 100, n - 1] {
                    let mut a = spd.clone();
                    a[(column, column)] = -1.0;
                    let builder = Cholesky::new()
                        .platform(platform.clone())
                        .scheduler(scheduler)
                        .tile(tile);
                    let context = format!("{spec} {scheduler} tile {tile}");
                    common::assert_not_positive_definite_at(builder, &a, column, &context);
                }
            }
            assert_pools_still_factor(&platform, scheduler, &spd);
        }
    }
}

#[test]
fn residuals_are_small_under_every_scheduler_and_cluster_configuration() {
    let n = 500;
    let a = random_spd(n, 5);
    let b = faer::Mat::from_fn(n, 2, |i, j| (i + j) as f64);
    for spec in specs() {
        let platform = platform(&spec);
        for scheduler in SchedulerKind::ALL {
            for tile in [96, 200] {
                let f = Cholesky::new()
                    .platform(platform.clone())
                    .scheduler(scheduler)
                    .tile(tile)
                    .factor(a.as_ref())
                    .unwrap();
                let r = cholesky_residual(a.as_ref(), f.storage(), Par::Seq);
                assert!(r < RESIDUAL_THRESHOLD, "{spec} {scheduler} {tile}: {r}");
                let x = f.solve(b.as_ref()).unwrap();
                let e = hetla::check::solve_backward_error(
                    a.as_ref(),
                    x.as_ref(),
                    b.as_ref(),
                    Par::Seq,
                );
                assert!(e < 1e-13, "{spec} {scheduler} {tile}: solve {e}");
            }
        }
    }
}

#[cfg(feature = "openblas")]
#[test]
fn openblas_runs_on_single_core_clusters_and_refuses_several_multicore_ones() {
    let a = random_spd(500, 4);
    let spec: ClusterSpec = format!("{}x1", cores()).parse().unwrap();
    let p = Arc::new(Platform::with_store(&spec, Backend::OpenBlas, ModelStore::None).unwrap());
    let f = Cholesky::new()
        .platform(p)
        .tile(100)
        .factor(a.as_ref())
        .unwrap();
    assert!(cholesky_residual(a.as_ref(), f.storage(), Par::Seq) < RESIDUAL_THRESHOLD);
    let two_by_two = ClusterSpec::Lists(vec![vec![0, 1], vec![2, 3]]);
    if cores() >= 4 {
        assert!(Platform::with_store(&two_by_two, Backend::OpenBlas, ModelStore::None).is_err());
    }
}

#[test]
fn models_are_learned_saved_and_loaded() {
    let dir = std::env::temp_dir().join(format!("hetla-models-{}", std::process::id()));
    let spec: ClusterSpec = "1x1".parse().unwrap();
    let p =
        Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::Dir(dir.clone())).unwrap());
    assert!(p.models().is_empty());
    let a = random_spd(256, 1);
    Cholesky::new()
        .platform(p.clone())
        .tile(64)
        .factor(a.as_ref())
        .unwrap();
    let learned = p.models();
    let gemm = KernelKey::square(Op::GemmNt, 64);
    let class = ResourceClass::CpuCluster { cores: 1 };
    assert_eq!(learned.get(&gemm, &class).unwrap().samples, 4);
    let file = p.save_models().unwrap().unwrap();
    let loaded = PerfModels::load(&file).unwrap();
    assert_eq!(loaded.len(), learned.len());
    assert_eq!(loaded.get(&gemm, &class).unwrap().samples, 4);
    // A new platform starts from the saved models and adds to them.
    let q =
        Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::Dir(dir.clone())).unwrap());
    Cholesky::new()
        .platform(q.clone())
        .tile(64)
        .factor(a.as_ref())
        .unwrap();
    assert_eq!(q.models().get(&gemm, &class).unwrap().samples, 8);
    // Saving merges: what q saved (p's 4 samples and its own 4) plus p's nothing new.
    q.save_models().unwrap();
    p.save_models().unwrap();
    assert_eq!(
        PerfModels::load(&file)
            .unwrap()
            .get(&gemm, &class)
            .unwrap()
            .samples,
        8
    );
    // A corrupt file is moved aside (kept) and the platform starts from empty models.
    std::fs::write(&file, "{not json").unwrap();
    let r = Platform::with_store(&spec, Backend::Faer, ModelStore::Dir(dir.clone())).unwrap();
    assert!(r.models().is_empty());
    let kept = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let e = e.as_ref().unwrap();
            e.file_name().to_string_lossy().contains(".corrupt-")
                && std::fs::read_to_string(e.path()).unwrap() == "{not json"
        })
        .count();
    assert_eq!(kept, 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn calibration_samples_are_kept_apart_from_run_samples_and_saved_so() {
    let dir = std::env::temp_dir().join(format!("hetla-calibrations-{}", std::process::id()));
    let spec: ClusterSpec = "1x1".parse().unwrap();
    let p =
        Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::Dir(dir.clone())).unwrap());
    let calibration = hetla::KernelCalibration {
        ops: vec![Op::GemmNt],
        tiles: vec![64],
        samples: 3,
        precision: hetla::Precision::D,
    };
    calibration.run(&p, || {}).unwrap();
    Cholesky::new()
        .platform(p.clone())
        .tile(64)
        .factor(random_spd(256, 1).as_ref())
        .unwrap();
    let gemm = KernelKey::square(Op::GemmNt, 64);
    let class = ResourceClass::CpuCluster { cores: 1 };
    let (all, calibrated) = {
        let m = p.models();
        (
            *m.get(&gemm, &class).unwrap(),
            *m.calibration(&gemm, &class).unwrap(),
        )
    };
    assert_eq!((all.samples, calibrated.samples), (7, 3));
    let file = p.save_models().unwrap().unwrap();
    let loaded = PerfModels::load(&file).unwrap();
    let reloaded = loaded.get(&gemm, &class).unwrap();
    assert_eq!(reloaded.samples, 7);
    assert!((reloaded.mean - all.mean).abs() <= 1e-12 * all.mean);
    assert_eq!(loaded.calibration(&gemm, &class).unwrap().samples, 3);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("\"calibration\": true").count(), 1, "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn traces_export_to_chrome_json() {
    let a = random_spd(300, 2);
    let mut l = a.clone();
    let trace = Cholesky::new()
        .platform(platform(&format!("{}x1", cores())))
        .tile(60)
        .factor_in_place_traced(l.as_mut())
        .unwrap();
    assert_eq!(trace.tasks.len(), 35);
    let json = trace.to_chrome_json();
    let events = json["traceEvents"].as_array().unwrap();
    let complete = events.iter().filter(|e| e["ph"] == "X").count();
    assert_eq!(complete, 35);
    let summary = trace.summary();
    assert_eq!(summary.workers.iter().map(|w| w.tasks).sum::<usize>(), 35);
    assert!(
        summary
            .workers
            .iter()
            .all(|w| w.busy_fraction <= 1.0 + 1e-9)
    );
    assert_eq!(summary.kernels.iter().map(|k| k.count).sum::<usize>(), 35);
}

#[test]
fn a_clusters_pieces_are_in_its_trace_each_on_its_own_thread() {
    let n = cores();
    if n < 2 {
        return;
    }
    let a = random_spd(1024, 5);
    let mut l = a.clone();
    let trace = Cholesky::new()
        .platform(platform(&format!("1x{n}")))
        .tile(512)
        .factor_in_place_traced(l.as_mut())
        .unwrap();
    assert!(!trace.pieces.is_empty());
    let cpus = &trace.workers[0].cpus;
    for p in &trace.pieces {
        // Every kernel of tile 512 splits into one piece per core: piece i on thread i.
        assert_eq!(p.thread, p.index % n, "{p:?}");
        assert!(
            trace
                .tasks
                .iter()
                .any(|t| t.task == p.task && t.start <= p.start + 1e-9 && p.end <= t.end + 1e-9)
        );
        if let Some(cpu) = p.cpu {
            assert_eq!(cpu, cpus[p.thread], "{p:?}");
        }
    }
    let summary = trace.summary();
    assert_eq!(summary.pieces.len(), 1);
    let pieces = &summary.pieces[0];
    assert_eq!(pieces.threads, n);
    assert_eq!(
        pieces.pieces_per_thread.iter().sum::<usize>(),
        trace.pieces.len()
    );
    assert!(pieces.pieces_per_thread.iter().all(|&c| c > 0));
    assert_eq!(pieces.off_core, 0);
    assert!(pieces.busy_fraction > 0.0 && pieces.busy_fraction <= 1.0 + 1e-9);
    assert!((0.0..=1.0).contains(&pieces.straggler_share));
    let json = trace.to_chrome_json();
    let events = json["traceEvents"].as_array().unwrap();
    let drawn = events.iter().filter(|e| e["cat"] == "piece").count();
    assert_eq!(drawn, trace.pieces.len());
}

/// Tasks that do no work but count those that ran while their cluster was marked idle.
struct SeesLender {
    work: Empty,
    /// Each cluster's lender and CPUs.
    clusters: Vec<(hetla_clusters::Lender, Vec<usize>)>,
    idle_seen: std::sync::atomic::AtomicUsize,
}

impl Workload for SeesLender {
    fn graph(&self) -> &TaskGraph {
        self.work.graph()
    }
    fn key(&self, task: TaskId) -> KernelKey {
        self.work.key(task)
    }
    fn tile_bytes(&self, tile: TileRef) -> usize {
        self.work.tile_bytes(tile)
    }
    fn run(&self, task: TaskId, par: Par) -> Result<(), hetla_kernels::KernelError> {
        // The worker runs the task on its cluster's first core.
        let cpu = hetla_clusters::current_cpu();
        let mine = self
            .clusters
            .iter()
            .find(|(_, cpus)| cpu == cpus.first().copied());
        if mine.is_some_and(|(lender, _)| lender.idle()) {
            self.idle_seen
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.work.run(task, par)
    }
}

#[test]
fn a_cluster_is_busy_while_it_runs_a_kernel_and_lends_its_cores_again_after_the_run() {
    for spec in ["1x1", "auto"] {
        let platform = platform(spec);
        let work = SeesLender {
            work: empty(6, None),
            clusters: platform
                .clusters()
                .iter()
                .map(|c| (c.lender(), c.cpus().to_vec()))
                .collect(),
            idle_seen: Default::default(),
        };
        let idle = || work.clusters.iter().all(|(l, _)| l.idle());
        assert!(idle(), "{spec}: idle before the run");
        let trace = execute(&platform, &work, &RunOptions::default()).unwrap();
        assert_eq!(trace.tasks.len(), work.graph().len());
        assert!(idle(), "{spec}: idle after the run");
        assert_eq!(
            work.idle_seen.into_inner(),
            0,
            "{spec}: a kernel ran while its cluster was marked idle"
        );
    }
}

#[test]
fn bad_specs_are_clear_errors() {
    let err = Platform::new(
        &ClusterSpec::Grid {
            count: 64,
            size: 64,
        },
        Backend::Faer,
    )
    .unwrap_err();
    assert!(err.to_string().contains("4096 cores"), "{err}");
}

/// Tasks of a Cholesky graph that do no work, each also waiting for one input from outside the run
/// (as a distributed run's tiles from other ranks).
struct Gated(Empty);

impl Workload for Gated {
    fn graph(&self) -> &TaskGraph {
        self.0.graph()
    }
    fn key(&self, task: TaskId) -> KernelKey {
        self.0.key(task)
    }
    fn tile_bytes(&self, tile: TileRef) -> usize {
        self.0.tile_bytes(tile)
    }
    fn run(&self, task: TaskId, par: Par) -> Result<(), hetla_kernels::KernelError> {
        self.0.run(task, par)
    }
    fn outside_inputs(&self, _task: TaskId) -> usize {
        1
    }
}

#[test]
fn a_task_waiting_for_an_input_from_outside_starts_only_once_it_arrived() {
    let work = Gated(empty(5, None));
    let n = work.graph().len();
    for scheduler in SchedulerKind::ALL {
        let options = RunOptions {
            scheduler,
            ..RunOptions::default()
        };
        // Delivered last task first, a millisecond apart: the run follows the deliveries.
        let (trace, delivered) =
            hetla_runtime::execute_beside(&platform("1x1"), &work, &options, |inbox| {
                let start = std::time::Instant::now();
                let mut at = vec![0.0; n];
                for t in (0..n).rev() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    at[t] = start.elapsed().as_secs_f64();
                    inbox.arrived(TaskId(t));
                }
                while !inbox.stopped() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                assert!(!inbox.failed());
                at
            });
        let trace = trace.unwrap();
        assert_eq!(trace.tasks.len(), n, "{scheduler}");
        // The trace's clock starts before `beside`'s: a start after the delivery reads as
        // after it on both clocks.
        let first = trace
            .tasks
            .iter()
            .map(|e| e.start)
            .fold(f64::INFINITY, f64::min);
        assert!(
            first >= delivered[0] - 1e-3,
            "{scheduler}: {first} < {}",
            delivered[0]
        );
    }
}

#[test]
fn inputs_from_outside_that_never_come_end_the_run_instead_of_hanging() {
    let work = Gated(empty(4, None));
    // Only task 0's input comes, then the delivering side gives up.
    let (result, ()) =
        hetla_runtime::execute_beside(&platform("1x1"), &work, &RunOptions::default(), |inbox| {
            inbox.arrived(TaskId(0));
        });
    let err = result.unwrap_err();
    assert_eq!(err.step, RunStep::Outside);
    assert!(
        matches!(&err.failure, TaskFailure::Outside(why) if why.contains("ended before")),
        "{:?}",
        err.failure
    );
    // With no task waiting for inputs from outside, a delivering side may return at once.
    let plain = empty(4, None);
    let (result, ()) =
        hetla_runtime::execute_beside(&platform("1x1"), &plain, &RunOptions::default(), |_| ());
    assert_eq!(result.unwrap().tasks.len(), plain.graph.len());
    // An input nobody waits for is refused, and a failure from outside stops the run.
    let (result, ()) =
        hetla_runtime::execute_beside(&platform("1x1"), &work, &RunOptions::default(), |inbox| {
            inbox.arrived(TaskId(0));
            inbox.arrived(TaskId(0));
        });
    let err = result.unwrap_err();
    assert!(
        matches!(&err.failure, TaskFailure::Outside(why) if why.contains("waits for no input")),
        "{:?}",
        err.failure
    );
    let (result, ()) =
        hetla_runtime::execute_beside(&platform("1x1"), &work, &RunOptions::default(), |inbox| {
            inbox.fail("rank 1 failed".into());
            assert!(inbox.stopped() && inbox.failed());
        });
    assert_eq!(
        result.unwrap_err().failure,
        TaskFailure::Outside("rank 1 failed".into())
    );
}

#[test]
fn an_ldlt_run_saves_only_models_a_file_can_hold() {
    // LDL^T's band chain ends on tasks with an empty operand; their samples once went into the
    // saved file, which every later load warned it left out.
    let dir = std::env::temp_dir().join(format!("hetla-empty-keys-{}", std::process::id()));
    let spec: ClusterSpec = "1x1".parse().unwrap();
    let p =
        Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::Dir(dir.clone())).unwrap());
    let a = hetla::matgen::random_hermitian::<f64>(512, 3);
    hetla::Ldlt::new()
        .platform(p.clone())
        .tile(64)
        .factor(a.as_ref())
        .unwrap();
    let mut models = PerfModels::new();
    let empty = KernelKey {
        op: Op::LdltBand,
        shapes: vec![(64, 64), (64, 0)],
        precision: hetla::Precision::D,
    };
    assert!(empty.has_empty_operand());
    let class = ResourceClass::CpuCluster { cores: 1 };
    models.record(&empty, &class, 1e-3);
    models.record_calibration(&empty, &class, 1e-3);
    assert!(models.is_empty());
    let file = p.save_models().unwrap().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let loaded = PerfModels::load(&file).unwrap();
    assert_eq!(loaded.len(), p.models().len(), "{text}");
    assert!(!p.models().is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

/// A real run of each family on a small matrix (8 x 8 tiles: Cholesky's panels long enough for
/// OpenBLAS's panel inverses), on each backend this build has: traced, each trace the tasks of the
/// plan it is paired with (with OpenBLAS, whose platforms factor by default with panel inverses,
/// the inverse's factorisation once ran another graph than its plan's, and
/// `hetla calibrate --backend openblas` indexed past the plan's keys). Here rather than beside
/// `Family`: the build with every feature runs this file, not the library's unit tests.
#[test]
fn every_family_runs_and_is_traced() {
    let spec = ClusterSpec::Grid { count: 2, size: 1 };
    for backend in Backend::available() {
        let platform = Arc::new(Platform::new(&spec, backend).unwrap());
        for f in hetla::Family::ALL {
            let run = f
                .run(
                    &platform,
                    (512, 512),
                    64,
                    SchedulerKind::Mct,
                    Precision::D,
                    1,
                )
                .unwrap();
            assert!(run.seconds > 0.0);
            assert_eq!(
                run.traces.len(),
                f.plans(512, 512, 64, Precision::D, (2, 0)).unwrap().len()
            );
            for (plan, trace) in &run.traces {
                assert_eq!(trace.tasks.len(), plan.graph().len(), "{f} on {backend}");
                assert!(trace.tasks.iter().all(|e| e.task.0 < plan.keys().len()));
            }
        }
    }
}
