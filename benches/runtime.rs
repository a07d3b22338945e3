//! Runtime overhead: empty tasks through submit, schedule and execute, per scheduler and number of
//! workers. Criterion reports tasks per second; the time per task is its inverse (target: <= 2 us
//! per task at 1 and 2 workers).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hetla::{Backend, ClusterSpec, Par};
use hetla_factorizations::{TaskGraph, TaskId, TileRef, Tiling, cholesky};
use hetla_runtime::{
    KernelKey, ModelStore, Platform, RunOptions, SchedulerKind, Workload, execute,
};

/// The tasks of a tiled Cholesky graph, doing nothing.
struct Empty(TaskGraph);

impl Workload for Empty {
    fn graph(&self) -> &TaskGraph {
        &self.0
    }
    fn key(&self, task: TaskId) -> KernelKey {
        KernelKey::square(self.0.task(task).op, 1)
    }
    fn tile_bytes(&self, _tile: TileRef) -> usize {
        8
    }
    fn run(&self, _task: TaskId, _par: Par) -> Result<(), hetla_kernels::KernelError> {
        Ok(())
    }
}

fn overhead(c: &mut Criterion) {
    // 24 x 24 tiles: 2600 tasks with the dependency structure of a real factorisation.
    let work = Empty(cholesky(&Tiling::square(24, 1).unwrap()).unwrap());
    let cores = hetla::Topology::detect().unwrap().cores().len();
    let mut group = c.benchmark_group("runtime_overhead");
    group.throughput(Throughput::Elements(work.0.len() as u64));
    for workers in [1, 2].into_iter().filter(|&w| w <= cores) {
        let spec = ClusterSpec::Grid {
            count: workers,
            size: 1,
        };
        let platform = Platform::with_store(&spec, Backend::Faer, ModelStore::None).unwrap();
        for scheduler in SchedulerKind::ALL {
            let options = RunOptions {
                scheduler,
                ..RunOptions::default()
            };
            group.bench_function(format!("{scheduler}/{workers}x1"), |b| {
                b.iter(|| execute(&platform, &work, &options).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
