//! The simulated executor: determinism, bounds, the contention rule, memory budgets (the
//! `simulate`, `sweep` and `calibrate --output` commands are tested in `cli/tests`).

mod common;

use common::{grid, simulate_cholesky};
use hetla::{Plan, Precision, Trace};
use hetla_lab::{Error, GridSimReport, Modelled, PlatformModel, Result, SimReport};
use hetla_runtime::{HOST, RunOptions, SchedulerKind, SimOptions, WriteBack};

fn options(scheduler: SchedulerKind, seed: u64, noise: f64) -> SimOptions {
    SimOptions {
        run: RunOptions {
            scheduler,
            restrictions: Vec::new(),
            ..Default::default()
        },
        seed,
        noise,
    }
}

fn sirocco() -> PlatformModel {
    PlatformModel::preset("sirocco").unwrap()
}

/// A noise-free MCT simulation at tile 960 with 2x10 clusters.
fn run_2x10(model: &PlatformModel, gpus: usize, n: usize) -> Result<(SimReport, Trace)> {
    simulate_cholesky(
        model,
        &grid(2, 10),
        gpus,
        n,
        960,
        Precision::D,
        &SimOptions::default(),
    )
}

#[test]
fn a_fixed_seed_gives_the_same_run_and_another_seed_another() {
    let m = sirocco();
    let run = |seed| {
        simulate_cholesky(
            &m,
            &grid(2, 10),
            2,
            9600,
            960,
            Precision::D,
            &options(SchedulerKind::Mct, seed, 0.2),
        )
        .unwrap()
        .1
    };
    let (a, b, c) = (run(7), run(7), run(8));
    assert_eq!(a, b);
    assert_ne!(a.tasks, c.tasks);
    assert_eq!(a.tasks.len(), 220);
}

#[test]
fn no_simulated_run_of_a_small_sweep_beats_its_mixed_bound() {
    let m = sirocco();
    let mut runs = 0;
    for scheduler in SchedulerKind::ALL {
        for spec in [grid(20, 1), grid(2, 10), grid(4, 5)] {
            for gpus in [0, 1, 4] {
                for n in [1920, 4800, 9600] {
                    let (r, trace) = simulate_cholesky(
                        &m,
                        &spec,
                        gpus,
                        n,
                        960,
                        Precision::D,
                        &options(scheduler, 0, 0.0),
                    )
                    .unwrap();
                    assert!(
                        r.makespan_ms >= r.bounds.mixed_ms * (1.0 - 1e-9),
                        "{scheduler} {spec} + {gpus}, n = {n}: {} ms < mixed {} ms",
                        r.makespan_ms,
                        r.bounds.mixed_ms
                    );
                    assert!(r.efficiency <= 1.0 + 1e-9);
                    assert_eq!(trace.tasks.len(), r.bounds.tasks);
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 27 * SchedulerKind::ALL.len());
}

#[test]
fn dmda_moves_less_data_than_mct_for_the_same_makespan() {
    // sirocco 2x10 + 4 GPUs, n = 19200: MCT hides copies under busy queues and moves
    // 21.4 GB; dmda charges them and moves 13.3 GB, within 2% of MCT's makespan.
    let bytes = |r: &SimReport| r.bytes.iter().map(|l| l.bytes).sum::<usize>() as f64;
    let run = |scheduler| {
        simulate_cholesky(
            &sirocco(),
            &grid(2, 10),
            4,
            19200,
            960,
            Precision::D,
            &options(scheduler, 0, 0.0),
        )
        .unwrap()
        .0
    };
    let (mct, dmda) = (run(SchedulerKind::Mct), run(SchedulerKind::Dmda));
    assert!(
        bytes(&dmda) < 0.7 * bytes(&mct),
        "{} {}",
        bytes(&dmda),
        bytes(&mct)
    );
    assert!(dmda.makespan_ms < 1.02 * mct.makespan_ms);
    assert_eq!(dmda.scheduler, SchedulerKind::Dmda);
}

#[test]
fn knl_orders_its_cluster_shapes_as_paper_002_with_loaded_rates() {
    // Cojean et al. (2016), Fig. 6/8: at tile 2880 and n = 34560, 4 clusters of 16 cores are best
    // (1495.62 Gflop/s); with small tiles 16 x 4 beats 8 x 8, with large ones 8 x 8 beats
    // 16 x 4.
    let knl = PlatformModel::preset("knl").unwrap();
    let rate = |count, size, tile| {
        simulate_cholesky(
            &knl,
            &grid(count, size),
            0,
            34560,
            tile,
            Precision::D,
            &SimOptions::default(),
        )
        .unwrap()
        .0
        .gflops
    };
    let best = rate(4, 16, 2880);
    assert!((best / 1495.62 - 1.0).abs() < 0.05, "4x16 at 2880: {best}");
    for (count, size, tile) in [(64, 1, 960), (16, 4, 960), (8, 8, 2880), (2, 32, 2880)] {
        let other = rate(count, size, tile);
        assert!(other < best, "{count}x{size} at {tile}: {other} >= {best}");
    }
    assert!(rate(16, 4, 960) > rate(8, 8, 960));
    assert!(rate(8, 8, 2880) > rate(16, 4, 2880));
}

#[test]
fn one_worker_runs_every_task_back_to_back() {
    // A single 1-core cluster: no transfers, no idle time, so the makespan is the sum of
    // the durations, which is also the area bound.
    let one_core = |model: &PlatformModel| {
        let options = SimOptions::default();
        simulate_cholesky(model, &grid(1, 1), 0, 4800, 960, Precision::D, &options).unwrap()
    };
    let (r, trace) = one_core(&sirocco());
    assert!((r.makespan_ms - r.bounds.area_ms).abs() < 1e-9 * r.makespan_ms);
    assert!(trace.transfers.is_empty());
    for pair in trace.tasks.windows(2) {
        assert!((pair[1].start - pair[0].end).abs() < 1e-12);
    }
    // With a runtime overhead of 100 us per task, each task starts 100 us after the last.
    let mut slow = sirocco();
    slow.cpu.task_overhead_us = 100.0;
    let (with_overhead, _) = one_core(&slow);
    let expected = r.makespan_ms + 0.1 * r.bounds.tasks as f64;
    assert!((with_overhead.makespan_ms - expected).abs() < 1e-9 * expected);
    assert_eq!(with_overhead.bounds.mixed_ms, r.bounds.mixed_ms);
}

#[test]
fn copies_cost_latency_plus_size_over_bandwidth_one_at_a_time_per_direction() {
    let m = sirocco();
    let link = m.gpu.as_ref().unwrap().link;
    let (r, trace) = run_2x10(&m, 4, 9600).unwrap();
    assert!(!trace.transfers.is_empty());
    let mut by_direction: std::collections::HashMap<_, Vec<_>> = Default::default();
    for t in &trace.transfers {
        let rate = if t.transfer.from == HOST {
            link.h2d
        } else {
            link.d2h
        };
        assert_ne!(t.transfer.from, t.transfer.to);
        assert!(((t.end - t.start) - rate.seconds(t.transfer.bytes)).abs() < 1e-12);
        by_direction
            .entry((t.transfer.from, t.transfer.to))
            .or_default()
            .push((t.start, t.end));
    }
    for spans in by_direction.values_mut() {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1 - 1e-12,
                "overlapping copies {pair:?}"
            );
        }
    }
    // A GPU task never starts before its worker's previous task ends.
    for w in 0..trace.workers.len() {
        let mine: Vec<_> = trace.tasks.iter().filter(|e| e.worker.0 == w).collect();
        for pair in mine.windows(2) {
            assert!(pair[1].start >= pair[0].end - 1e-12);
        }
    }
    let total: usize = r.bytes.iter().map(|l| l.bytes).sum();
    assert_eq!(
        total,
        trace
            .transfers
            .iter()
            .map(|t| t.transfer.bytes)
            .sum::<usize>()
    );
    assert!(r.bytes.iter().any(|l| l.link == "host->gpu0"));
    assert!(r.bytes.iter().any(|l| l.link == "gpu0->host"));
}

/// sirocco with GPUs of `gb` GB.
fn small_gpus(gb: f64) -> PlatformModel {
    let mut m = sirocco();
    m.gpu.as_mut().unwrap().memory_gb = gb;
    PlatformModel::from_toml(&m.to_toml()).unwrap()
}

#[test]
fn a_small_gpu_memory_forces_evictions_and_write_backs_and_the_run_completes() {
    let tile_bytes = 960 * 960 * 8;
    let roomy = run_2x10(&sirocco(), 2, 14400).unwrap().0;
    // Room for 6 tiles per GPU: a GEMM pins 3.
    let tight_model = small_gpus(6.0 * tile_bytes as f64 / 1e9);
    let (tight, trace) = run_2x10(&tight_model, 2, 14400).unwrap();
    assert_eq!(trace.tasks.len(), roomy.bounds.tasks);
    let moved = |r: &SimReport| r.bytes.iter().map(|l| l.bytes).sum::<usize>();
    assert!(
        moved(&tight) > moved(&roomy),
        "tight {} bytes, roomy {}",
        moved(&tight),
        moved(&roomy)
    );
    assert!(tight.makespan_ms >= tight.bounds.mixed_ms);

    // Two tiles of memory cannot hold a GEMM's three: a clear error, not a hang.
    let too_small = small_gpus(2.0 * tile_bytes as f64 / 1e9);
    let err = run_2x10(&too_small, 2, 9600).unwrap_err();
    assert!(
        matches!(err, Error::Runtime(hetla_runtime::Error::Memory(_))),
        "{err}"
    );
    assert!(err.to_string().contains("too few"), "{err}");
}

#[test]
fn gpus_take_their_host_cores_and_their_own_memory_nodes() {
    let p = sirocco().sim_platform(&grid(2, 10), 4).unwrap();
    assert_eq!(p.workers.len(), 6);
    assert_eq!(p.capacities.len(), 5);
    let gpu_cores: Vec<usize> = p.workers[2..].iter().map(|w| w.cpus[0]).collect();
    assert_eq!(gpu_cores, [20, 21, 22, 23]);
    assert!(
        p.workers[..2]
            .iter()
            .all(|w| w.cpus.iter().all(|&c| c < 20))
    );
    assert!(sirocco().sim_platform(&grid(2, 12), 1).is_err());
    assert!(sirocco().sim_platform(&grid(2, 10), 5).is_err());
}

#[test]
fn sweep_direction_matches_paper_002_with_one_gpu() {
    // Fig. 9 of Cojean et al. (2016): with one GPU, 2 x 10 clusters beat 20 single cores on small
    // matrices, and the gap narrows as n grows.
    let m = sirocco();
    let rate = |spec, n| {
        simulate_cholesky(&m, &spec, 1, n, 960, Precision::D, &SimOptions::default())
            .unwrap()
            .0
            .gflops
    };
    let ratio = |n| rate(grid(2, 10), n) / rate(grid(20, 1), n);
    let (small, medium, large) = (ratio(4800), ratio(9600), ratio(28800));
    assert!(small > 1.0 && medium > 1.0, "{small} {medium}");
    assert!(large < small, "{small} -> {large}");
}

/// Bytes written back to host memory after the last task ended: the flush at the end.
fn flushed_after_last_task(trace: &hetla::Trace) -> usize {
    let last_end = trace.tasks.iter().map(|t| t.end).fold(0.0, f64::max);
    trace
        .transfers
        .iter()
        .filter(|t| t.transfer.to == HOST && t.start >= last_end)
        .map(|t| t.transfer.bytes)
        .sum()
}

#[test]
fn final_tiles_go_back_to_host_memory_during_the_run_unless_asked_for_at_the_end() {
    let m = sirocco();
    let run = |write_back| {
        let mut o = options(SchedulerKind::Mct, 0, 0.0);
        o.run.write_back = write_back;
        simulate_cholesky(&m, &grid(2, 10), 2, 14400, 960, Precision::D, &o).unwrap()
    };
    let (final_report, final_trace) = run(WriteBack::Final);
    let (end_report, end_trace) = run(WriteBack::AtEnd);
    let tile_bytes = 960 * 960 * 8;
    // At the end, a tile's last copy on a GPU goes back: StarPU's flush moves many tiles,
    // hetla's policy at most the last POTRF's tile per GPU (the rest went back when final).
    let (early, late) = (
        flushed_after_last_task(&final_trace),
        flushed_after_last_task(&end_trace),
    );
    assert!(early <= 2 * tile_bytes, "final: {early} bytes flushed");
    assert!(late > 5 * tile_bytes, "end: {late} bytes flushed");
    assert_eq!(final_trace.tasks.len(), end_trace.tasks.len());
    assert!(final_report.makespan_ms >= final_report.bounds.mixed_ms);
    assert!(end_report.makespan_ms >= end_report.bounds.mixed_ms);
}

/// A noise-free distributed simulation of sirocco nodes (2x10 clusters, `gpus` GPUs) at tile 960 on
/// `grid` with `network`.
fn run_grid(gpus: usize, n: usize, grid_: &str, network: &str) -> Result<(GridSimReport, Trace)> {
    let plan = Plan::new(hetla::Algorithm::Cholesky { n }, 960, Precision::D)?;
    let model = sirocco();
    let spec = grid(2, 10);
    hetla_lab::simulate_grid(
        &plan,
        &Modelled::new(&model, &spec, gpus),
        grid_.parse().unwrap(),
        hetla_lab::parse_network(network).unwrap(),
        &SimOptions::default(),
    )
}

#[test]
fn one_node_of_a_distributed_simulation_is_the_single_node_simulation() {
    let (single, _) = run_2x10(&sirocco(), 2, 9600).unwrap();
    let (grid, trace) = run_grid(2, 9600, "1x1", "1us,100Gb/s").unwrap();
    assert_eq!(grid.makespan_ms, single.makespan_ms);
    assert_eq!(grid.messages, 0);
    assert_eq!(trace.tasks.len(), single.bounds.tasks);
    assert_eq!(grid.bounds.bound_by, "mixed");
    assert_eq!(grid.bounds.mixed_ms, Some(single.bounds.mixed_ms));
}

#[test]
fn a_distributed_simulation_sends_the_block_cyclic_count_and_respects_its_bounds() {
    for g in ["1x2", "2x2", "2x3"] {
        let (r, trace) = run_grid(2, 13440, g, "1.5us,100Gb/s").unwrap();
        assert_eq!(trace.tasks.len(), r.bounds.tasks, "{g}");
        assert!(r.messages > 0);
        for node in &r.ranks {
            assert_eq!(
                node.bytes_sent, node.bytes_expected,
                "{g} rank {}",
                node.rank
            );
            assert!(node.tasks > 0);
        }
        assert!(r.makespan_ms >= r.bounds.bound_ms, "{g}: {r:?}");
        let mixed = r.bounds.mixed_ms.unwrap();
        assert!(
            r.bounds.bound_ms >= r.bounds.network_ms
                && r.bounds.bound_ms >= mixed
                && mixed >= r.bounds.area_ms
        );
        assert!(
            r.bounds.cp_network_ms > r.bounds.cp_ms && r.bounds.bound_ms >= r.bounds.cp_network_ms
        );
        // A node's own share takes at least the whole's time on every node's workers.
        assert!(
            r.bounds.node_area_ms >= r.bounds.area_ms * (1.0 - 1e-9)
                && r.bounds.bound_ms >= r.bounds.node_area_ms
        );
        // Every task is on its own node's workers, once.
        let mut seen = vec![false; r.bounds.tasks];
        for e in &trace.tasks {
            assert!(!std::mem::replace(&mut seen[e.task.0], true));
        }
    }
}

/// `plan` simulated on one sirocco node (2x10 clusters, no GPU) and on 1 x 2 and 1 x 4 grids of
/// them (1.5 us, 100 Gb/s): the one node's report, and each grid's (Q, report, trace).
fn one_row_runs(plan: &Plan) -> (SimReport, Vec<(usize, GridSimReport, Trace)>) {
    let model = sirocco();
    let spec = grid(2, 10);
    let machine = Modelled::new(&model, &spec, 0);
    let network = hetla_lab::parse_network("1.5us,100Gb/s").unwrap();
    let options = SimOptions::default();
    let (one, _) = hetla_lab::simulate(plan, &machine, &options).unwrap();
    let rows = [2, 4]
        .map(|q| {
            let g = format!("1x{q}").parse().unwrap();
            let (r, t) = hetla_lab::simulate_grid(plan, &machine, g, network, &options).unwrap();
            (q, r, t)
        })
        .into();
    (one, rows)
}

#[test]
fn a_distributed_lu_simulation_sends_each_panel_once_to_each_node_and_respects_its_bounds() {
    let (n, b) = (19200, 960);
    let plan = Plan::new(hetla::Algorithm::Lu { n }, b, Precision::D).unwrap();
    let (one, rows) = one_row_runs(&plan);
    for (q, r, trace) in rows {
        assert_eq!(trace.tasks.len(), r.bounds.tasks);
        // Each panel from its diagonal down with its interchanges, to every other node.
        let panels: usize = (0..n / b).map(|k| ((n - k * b) * 8 + 8) * b).sum();
        assert_eq!(r.bytes_sent, panels * (q - 1), "1x{q}");
        for node in &r.ranks {
            assert_eq!(node.bytes_sent, node.bytes_expected, "1x{q}");
        }
        assert!(r.makespan_ms >= r.bounds.bound_ms, "1x{q}: {r:?}");
        // More nodes, a shorter run than one node's.
        assert!(r.makespan_ms < one.makespan_ms, "1x{q}: {r:?} {one:?}");
    }
}

#[test]
fn a_distributed_qr_simulation_sends_each_panel_with_its_t_to_the_nodes_right_of_it() {
    let (m, n, b, inner) = (38400, 9600, 960, 32);
    let plan = Plan::new(
        hetla::Algorithm::QrColumns {
            m,
            n,
            rhs: 0,
            inner,
        },
        b,
        Precision::D,
    )
    .unwrap();
    let (one, rows) = one_row_runs(&plan);
    for (q, r, trace) in rows {
        assert_eq!(trace.tasks.len(), r.bounds.tasks);
        // Each panel from its diagonal down with its T (32 rows), to every other node holding a
        // block column right of it.
        let panels: usize = (0..n / b)
            .map(|k| {
                let right = (k + 1..n / b).map(|j| j % q).filter(|&r| r != k % q);
                let to: std::collections::BTreeSet<usize> = right.collect();
                to.len() * (m - k * b + inner) * b * 8
            })
            .sum();
        assert_eq!(r.bytes_sent, panels, "1x{q}");
        for node in &r.ranks {
            assert_eq!(node.bytes_sent, node.bytes_expected, "1x{q}");
        }
        assert!(r.makespan_ms >= r.bounds.bound_ms, "1x{q}: {r:?}");
        assert!(r.makespan_ms < one.makespan_ms, "1x{q}: {r:?} {one:?}");
    }
}

#[test]
fn a_distributed_qr_simulation_on_one_process_column_sends_the_tops_rows_to_their_merges_and_home()
{
    // Tall and skinny: 40 x 4 tiles of 960.
    let (m, n, b) = (38400, 3840, 960);
    let (mt, nt) = (m / b, n / b);
    let model = sirocco();
    let spec = grid(2, 10);
    let machine = Modelled::new(&model, &spec, 0);
    let network = hetla_lab::parse_network("1.5us,100Gb/s").unwrap();
    let options = SimOptions::default();
    let one = Plan::new(
        hetla::Algorithm::Qr {
            m,
            n,
            rhs: 0,
            tree: hetla::QrTree::Auto,
        },
        b,
        Precision::D,
    )
    .unwrap();
    let (one, _) = hetla_lab::simulate(&one, &machine, &options).unwrap();
    for p in [2, 4] {
        let plan = Plan::new(
            hetla::Algorithm::Qr {
                m,
                n,
                rhs: 0,
                tree: hetla::QrTree::Domains(p),
            },
            b,
            Precision::D,
        )
        .unwrap();
        let g = format!("{p}x1").parse().unwrap();
        let (r, trace) = hetla_lab::simulate_grid(&plan, &machine, g, network, &options).unwrap();
        assert_eq!(trace.tasks.len(), r.bounds.tasks);
        // The tops' rows of step k merged pairwise: on 2 x 1 the diagonal row goes to the other
        // rank and home (2 messages a tile); on 4 x 1 it goes to rank 1, then to rank 2 (which
        // row k + 2 comes back to from rank 3) and home (5 messages a tile).
        let tiles: usize = (0..nt).filter(|&k| k + 1 < mt).map(|k| nt - k).sum();
        let per_tile = if p == 4 { 5 } else { p };
        assert_eq!(r.bytes_sent, tiles * per_tile * b * b * 8, "{p}x1");
        for node in &r.ranks {
            assert_eq!(node.bytes_sent, node.bytes_expected, "{p}x1");
        }
        assert!(r.makespan_ms >= r.bounds.bound_ms, "{p}x1: {r:?}");
        assert!(r.makespan_ms < one.makespan_ms, "{p}x1: {r:?} {one:?}");
    }
}

#[test]
fn a_slow_network_slows_the_run_and_bounds_it() {
    let (fast, _) = run_grid(4, 19200, "2x2", "1us,100Gb/s").unwrap();
    let (slow, _) = run_grid(4, 19200, "2x2", "1us,1Gb/s").unwrap();
    assert!(
        slow.makespan_ms > 2.0 * fast.makespan_ms,
        "{fast:?} {slow:?}"
    );
    assert_eq!(slow.bounds.bound_by, "network");
    assert!(slow.makespan_ms >= slow.bounds.network_ms);
    // The same messages either way.
    assert_eq!(slow.bytes_sent, fast.bytes_sent);
}

#[test]
fn a_network_is_read_with_its_units_and_refused_without_a_rate() {
    use hetla_lab::parse_network;
    let r = parse_network("1.5us,100Gb/s").unwrap();
    assert_eq!((r.latency_us, r.gb_per_s), (1.5, 12.5));
    let r = parse_network("2, 12.5").unwrap();
    assert_eq!((r.latency_us, r.gb_per_s), (2.0, 12.5));
    let r = parse_network("500ns,800MB/s").unwrap();
    assert!((r.latency_us - 0.5).abs() < 1e-12 && (r.gb_per_s - 0.8).abs() < 1e-12);
    for bad in ["12.5", "1us,0GB/s", "fast,12", "1us,-3", "1us,lots"] {
        let e = parse_network(bad).unwrap_err();
        assert!(e.contains("latency,bandwidth"), "{bad}: {e}");
    }
}

#[test]
fn a_gpu_of_several_streams_overlaps_its_kernels_and_stays_above_its_bounds_in_every_precision() {
    // The h200 model's GPU alone, Cholesky 16384 in tiles of 2048 resident in its memory: with
    // one stream the GPU runs every kernel back to back; with more, a step's POTRF and TRSMs (a
    // sixth and a fifth of the GPU's full rate) run beside the GEMMs, up to the streams at once.
    let h200 = PlatformModel::preset("h200").unwrap();
    let none = hetla::ClusterSpec::None;
    for precision in [Precision::S, Precision::D, Precision::C, Precision::Z] {
        let plan = Plan::new(hetla::Algorithm::Cholesky { n: 16384 }, 2048, precision).unwrap();
        let run = |streams: usize, noise: f64| {
            let machine = Modelled {
                compute_streams: streams,
                ..Modelled::new(&h200, &none, 1).precision(precision)
            };
            let mut options = options(SchedulerKind::Mct, 3, noise);
            options.run.placement = plan.placed_on(hetla_runtime::MemoryNode(1));
            options.run.write_back = WriteBack::Resident;
            hetla_lab::simulate(&plan, &machine, &options).unwrap()
        };
        let (one, one_trace) = run(1, 0.0);
        let most_at_once = |trace: &Trace| {
            let mut edges: Vec<(f64, i32)> = (trace.tasks.iter())
                .flat_map(|e| [(e.start, 1), (e.end, -1)])
                .collect();
            edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut now = 0;
            edges
                .iter()
                .map(|&(_, d)| {
                    now += d;
                    now
                })
                .max()
                .unwrap_or(0)
        };
        assert_eq!(most_at_once(&one_trace), 1, "{precision}");
        for streams in [2, 4] {
            for noise in [0.0, 0.2] {
                let (shared, trace) = run(streams, noise);
                assert_eq!(shared.compute_streams, streams);
                let at_once = most_at_once(&trace);
                assert!(
                    (2..=streams as i32).contains(&at_once),
                    "{precision} {streams}: {at_once}"
                );
                // Honest bounds: a kernel's share of the GPU in the area, never above the run.
                assert!(shared.bounds.area_ms < one.bounds.area_ms, "{precision}");
                // The bounds of the run from its own durations count the GPU as many times as
                // it ran kernels at once: still below the run.
                let own = plan.run_bounds(&trace).unwrap();
                assert_eq!(own.classes[0].count, at_once as usize, "{precision}");
                assert!(
                    own.mixed_ms * 1e-3 <= trace.makespan * (1.0 + 1e-9),
                    "{precision}"
                );
                if noise == 0.0 {
                    assert!(shared.efficiency <= 1.0 + 1e-9, "{precision} {streams}");
                    assert!(
                        shared.makespan_ms < 0.9 * one.makespan_ms,
                        "{precision} {streams}: {} vs {}",
                        shared.makespan_ms,
                        one.makespan_ms
                    );
                }
            }
        }
    }
}

#[test]
fn a_page_locked_run_that_locks_beside_the_workers_stages_the_tiles_it_reaches_first() {
    use hetla::ClusterSpec;
    use hetla_runtime::HostMemory;
    // The h200 model (its packing rates) with the H100 node's locking rate (lease 3).
    let mut model = PlatformModel::preset("h200").unwrap();
    model.gpu.as_mut().unwrap().lock_gb_per_s = 8.59 / 0.427;
    let spec = ClusterSpec::None;
    let (n, tile) = (16384, 2048);
    let plan = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D).unwrap();
    let run = |machine: Modelled<'_>| {
        let (report, trace) =
            hetla_lab::simulate(&plan, &machine, &options(SchedulerKind::Mct, 0, 0.0)).unwrap();
        (report.makespan_ms, trace)
    };
    let locked = Modelled::new(&model, &spec, 1).host_memory(HostMemory::PageLocked);
    let (beside, trace) = run(locked);
    let (before, _) = run(locked.locked_before_the_run());
    let (staged, _) = run(Modelled::new(&model, &spec, 1));
    if std::env::var_os("HETLA_PRINT_LOCKING").is_some() {
        for (n, tile, streams) in [(16384, 4096, 4), (32768, 4096, 1), (32768, 4096, 4)] {
            let plan = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D).unwrap();
            let ms = |mut machine: Modelled<'_>| {
                machine.compute_streams = streams;
                let o = options(SchedulerKind::Mct, 0, 0.0);
                hetla_lab::simulate(&plan, &machine, &o)
                    .unwrap()
                    .0
                    .makespan_ms
            };
            eprintln!(
                "n {n} tile {tile} streams {streams}: beside {:.1} ms, before {:.1}, staged {:.1}",
                ms(locked),
                ms(locked.locked_before_the_run()),
                ms(Modelled::new(&model, &spec, 1))
            );
        }
    }
    // Locking 2.1 GB at 20 GB/s takes longer than the run: the first step's tiles beyond the
    // first column are packed as on a staged run, so the run sits between the two.
    assert!(
        beside > before * 1.01,
        "beside {beside} ms, before {before} ms"
    );
    assert!(
        beside <= staged * 1.0001,
        "beside {beside} ms, staged {staged} ms"
    );
    assert!((trace.makespan * 1e3 - beside).abs() < 1e-9);
    // A model without a locking rate locks before the run, as before.
    let plain = PlatformModel::preset("h200").unwrap();
    let (old, _) = run(Modelled::new(&plain, &spec, 1).host_memory(HostMemory::PageLocked));
    assert!((old - before).abs() < 1e-9, "{old} against {before}");
}

/// A Cholesky plan that ends in smaller tiles is simulated with each task at its own tile's rate
/// (`Plan::rate_tile`): on the h100 model (measured rates at 2048 and 4096), n = 16384 in tiles of
/// 4096 with the last half in tiles of 2048 has a shorter critical path than 4096 alone (17.1
/// against 20.8 ms: the last panels' kernels are smaller) and a larger area (the small tiles' rates
/// are lower); a tail whose tile the model has no rate for is refused, naming it.
#[test]
fn a_tail_of_smaller_tiles_is_simulated_at_its_own_tiles_rates() {
    let model = PlatformModel::preset("h100").unwrap();
    let machine = Modelled::new(&model, &hetla::ClusterSpec::None, 1);
    let plan = Plan::new(hetla::Algorithm::Cholesky { n: 16384 }, 4096, Precision::D).unwrap();
    let mut options = SimOptions::default();
    options.run.placement = plan.placed_on(hetla_runtime::MemoryNode(1));
    options.run.write_back = WriteBack::Resident;
    let (alone, _) = hetla_lab::simulate(&plan, &machine, &options).unwrap();
    let tail = hetla::Tail {
        from: 8192,
        tile: 2048,
    };
    let tailed = plan.with_tail(tail).unwrap();
    // Every tile of the tailed plan placed on the GPU, as `simulate --resident` does.
    options.run.placement = tailed.placed_on(hetla_runtime::MemoryNode(1));
    let (ends, _) = hetla_lab::simulate(&tailed, &machine, &options).unwrap();
    assert_eq!((ends.tail, alone.tail), (Some(tail), None));
    let (cp, area) = (ends.bounds.cp_ms, ends.bounds.area_ms);
    assert!(
        cp < alone.bounds.cp_ms * 0.85,
        "{cp} against {}",
        alone.bounds.cp_ms
    );
    assert!(
        area > alone.bounds.area_ms,
        "{area} against {}",
        alone.bounds.area_ms
    );
    assert!(ends.makespan_ms >= cp * (1.0 - 1e-9));
    let err = plan
        .with_tail(hetla::Tail {
            from: 8192,
            tile: 1024,
        })
        .map(|p| hetla_lab::simulate(&p, &machine, &options).map(|_| ()))
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("tile 1024"), "{err}");
}
