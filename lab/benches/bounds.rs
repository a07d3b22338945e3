//! Time to compute the makespan bounds of the Cholesky graph on the `sirocco` preset, as
//! `hetla bound` does (graph, critical path, area and mixed bound). Targets: 40 x 40 tiles (11,480
//! tasks) with 2x10 clusters and 4 GPUs at tile 960 in <= 1 s; 20 x 20 tiles in
//! <= 0.2 s.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hetla::{ClusterSpec, Plan, Precision};
use hetla_lab::{Modelled, PlatformModel};

fn sirocco_bounds(c: &mut Criterion) {
    let sirocco = PlatformModel::preset("sirocco").expect("sirocco is a preset");
    let mut group = c.benchmark_group("bounds_sirocco_tile960");
    group.sample_size(10);
    for (count, size, gpus) in [(2, 10, 4), (20, 1, 4)] {
        let spec = ClusterSpec::Grid { count, size };
        for tiles in [20, 40] {
            let name = format!("{count}x{size}+{gpus}gpu/{tiles}x{tiles}");
            group.bench_function(name, |b| {
                b.iter(|| {
                    let plan = Plan::new(
                        hetla::Algorithm::Cholesky {
                            n: black_box(tiles * 960),
                        },
                        960,
                        Precision::D,
                    );
                    hetla_lab::bounds(&plan.expect("plan"), &Modelled::new(&sirocco, &spec, gpus))
                        .expect("sirocco bounds")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, sirocco_bounds);
criterion_main!(benches);
