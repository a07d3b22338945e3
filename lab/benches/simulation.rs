//! Time to simulate the Cholesky factorisation on the `sirocco` preset. Target: 40 x 40 tiles
//! (11,480 tasks) with 2x10 clusters and 4 GPUs at tile 960 in <= 1 s.
//!
//! `simulate` is the simulated run alone (the graph built once, outside the timing);
//! `simulate_and_bound` is all `hetla simulate` computes: graph, simulated run and the three
//! bounds.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hetla::{ClusterSpec, Plan, Precision};
use hetla_lab::{Modelled, PlatformModel};
use hetla_runtime::{RunOptions, SchedulerKind, SimOptions, SimWork, simulate};

fn sirocco_simulation(c: &mut Criterion) {
    let sirocco = PlatformModel::preset("sirocco").expect("sirocco is a preset");
    let mut group = c.benchmark_group("simulate_sirocco_tile960");
    group.sample_size(10);
    let tile = 960;
    for (count, size, gpus, tiles) in [(2, 10, 4, 20), (2, 10, 4, 40), (20, 1, 4, 40)] {
        let spec = ClusterSpec::Grid { count, size };
        let n = tiles * tile;
        let platform = sirocco.sim_platform(&spec, gpus).expect("platform");
        let plan = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D).expect("plan");
        let tile_bytes = |t| plan.tile_bytes(t);
        let duration = |k: &_, class: &_| sirocco.duration(k, tile, class);
        for scheduler in [SchedulerKind::Mct, SchedulerKind::Eager] {
            let options = SimOptions {
                run: RunOptions {
                    scheduler,
                    restrictions: Vec::new(),
                    ..Default::default()
                },
                ..SimOptions::default()
            };
            let work = SimWork {
                graph: plan.graph(),
                keys: plan.keys(),
                tile_bytes: &tile_bytes,
                duration: &duration,
            };
            let name = format!("simulate/{scheduler}/{count}x{size}+{gpus}gpu/{tiles}x{tiles}");
            group.bench_function(name, |b| {
                b.iter(|| simulate(&platform, black_box(&work), &options).expect("simulation"))
            });
        }
        let name = format!("simulate_and_bound/mct/{count}x{size}+{gpus}gpu/{tiles}x{tiles}");
        group.bench_function(name, |b| {
            b.iter(|| {
                let plan = Plan::new(
                    hetla::Algorithm::Cholesky { n: black_box(n) },
                    tile,
                    Precision::D,
                )
                .expect("plan");
                let machine = Modelled::new(&sirocco, &spec, gpus);
                hetla_lab::simulate(&plan, &machine, &SimOptions::default()).expect("simulation")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sirocco_simulation);
criterion_main!(benches);
