//! The area and mixed bounds: their defining properties on random instances, and the mixed bound
//! against a second formulation of the same LP.
//!
//! The second formulation (tests only) is the compact LP with a completion time per task: minimise
//! T over x(i, r) >= 0 with sum_r x(i, r) = 1, C_i >= d_i(x) for every task, C_i >= C_j + d_i(x)
//! for every edge j -> i, C_i <= T, and the area constraints. For fixed x, the least T is the
//! longest path under d(x), so its optimum is the mixed bound with every path constraint; it is
//! solved from scratch in one go, without constraint generation, paths or warm starts.

use hetla_bounds::{Class, Instance};
use hetla_factorizations::{Op, Tiling, cholesky};
use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, Problem};
use proptest::prelude::*;

/// The compact LP's optimum T.
fn compact_lp(inst: &Instance) -> f64 {
    let mut lp = Problem::new(OptimizationDirection::Minimize);
    let t = lp.add_var(1.0, (0.0, f64::INFINITY));
    let classes = inst.classes().len();
    let mut area = vec![LinearExpr::empty(); classes];
    let mut duration = Vec::new();
    let mut completion = Vec::new();
    for &k in inst.types() {
        let shares: Vec<_> = inst
            .allowed(k)
            .map(|(r, p)| (r, p, lp.add_var(0.0, (0.0, 1.0))))
            .collect();
        let all: LinearExpr = shares.iter().map(|&(_, _, v)| (v, 1.0)).collect();
        lp.add_constraint(all, ComparisonOp::Eq, 1.0);
        for &(r, p, v) in &shares {
            area[r].add(v, p);
        }
        duration.push(shares);
        completion.push(lp.add_var(0.0, (0.0, f64::INFINITY)));
    }
    for (r, mut work) in area.into_iter().enumerate() {
        work.add(t, -(inst.classes()[r].count as f64));
        lp.add_constraint(work, ComparisonOp::Le, 0.0);
    }
    for i in 0..inst.len() {
        // C_i - d_i >= 0 and C_i - C_j - d_i >= 0 for each predecessor j; C_i <= T.
        let after = |j: Option<usize>| {
            let mut e = LinearExpr::empty();
            e.add(completion[i], 1.0);
            if let Some(j) = j {
                e.add(completion[j], -1.0);
            }
            for &(_, p, v) in &duration[i] {
                e.add(v, -p);
            }
            e
        };
        lp.add_constraint(after(None), ComparisonOp::Ge, 0.0);
        for &j in &inst.predecessors()[i] {
            lp.add_constraint(after(Some(j)), ComparisonOp::Ge, 0.0);
        }
        lp.add_constraint([(completion[i], 1.0), (t, -1.0)], ComparisonOp::Le, 0.0);
    }
    let solution = lp.solve().unwrap().into_solution().unwrap();
    solution.var_value(t)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-12)
}

/// A random instance: up to 12 tasks of up to 3 types, 1 to 3 classes with 0 to 3 resources; some
/// classes cannot run some types.
fn instances() -> impl Strategy<Value = Instance> {
    let tasks = prop::collection::vec(
        (
            0usize..3,
            prop::collection::vec(any::<prop::sample::Index>(), 0..3),
        ),
        1..12,
    );
    let class = (
        0usize..4,
        prop::collection::vec(prop::option::weighted(0.8, 0.1f64..10.0), 3),
    );
    let classes = prop::collection::vec(class, 1..4);
    (tasks, classes).prop_filter_map("every task needs a class", |(tasks, classes)| {
        let types = tasks.iter().map(|t| t.0).collect();
        let preds = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut p: Vec<usize> = if i == 0 {
                    vec![]
                } else {
                    t.1.iter().map(|x| x.index(i)).collect()
                };
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect();
        let classes = classes
            .into_iter()
            .enumerate()
            .map(|(r, (count, d))| Class::new(format!("c{r}"), count, d))
            .collect();
        Instance::new(types, preds, classes).ok()
    })
}

/// The same instance with one more resource in class `r`.
fn with_one_more(inst: &Instance, r: usize) -> Instance {
    let mut classes = inst.classes().to_vec();
    classes[r].count += 1;
    Instance::new(inst.types().to_vec(), inst.predecessors().to_vec(), classes).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn mixed_dominates_area_and_critical_path(inst in instances()) {
        let b = inst.bounds().unwrap();
        let floor = b.area.makespan.max(b.critical_path.length);
        prop_assert!(b.mixed.makespan >= floor * (1.0 - 1e-9) - 1e-9,
            "mixed {} < max(area {}, cp {})", b.mixed.makespan, b.area.makespan, b.critical_path.length);
        // The fractions are a distribution per task over classes that can run it.
        for i in 0..inst.len() {
            let k = inst.types()[i];
            let mut sum = 0.0;
            for r in 0..inst.classes().len() {
                let x = b.mixed.fraction(i, r);
                prop_assert!(x >= -1e-9);
                if inst.duration(k, r).is_none() { prop_assert!(x.abs() < 1e-9); }
                sum += x;
            }
            prop_assert!((sum - 1.0).abs() < 1e-9);
        }
        prop_assert_eq!(b.mixed.iterations, b.mixed.paths.len());
    }

    #[test]
    fn mixed_equals_the_compact_lp(inst in instances()) {
        let mixed = inst.mixed().unwrap().makespan;
        let compact = compact_lp(&inst);
        prop_assert!(close(mixed, compact, 1e-6), "mixed {mixed}, compact {compact}");
    }

    #[test]
    fn no_bound_increases_with_one_more_resource(inst in instances(), pick in any::<prop::sample::Index>()) {
        let r = pick.index(inst.classes().len());
        let before = inst.bounds().unwrap();
        let after = with_one_more(&inst, r).bounds().unwrap();
        let le = |a: f64, b: f64| a <= b * (1.0 + 1e-9) + 1e-9;
        prop_assert!(le(after.critical_path.length, before.critical_path.length));
        prop_assert!(le(after.area.makespan, before.area.makespan));
        prop_assert!(le(after.mixed.makespan, before.mixed.makespan),
            "mixed {} -> {} with one more resource in class {r}", before.mixed.makespan, after.mixed.makespan);
    }

    #[test]
    fn plentiful_resources_leave_the_critical_path(inst in instances()) {
        // As many resources in every usable class as there are tasks: each task can run on
        // its fastest class at once, so only the longest chain remains.
        let classes = inst.classes().iter().map(|c| {
            let count = if c.count > 0 { inst.len() } else { 0 };
            Class::new(c.name.clone(), count, c.durations.clone())
        }).collect();
        let plenty = Instance::new(inst.types().to_vec(), inst.predecessors().to_vec(), classes).unwrap();
        let b = plenty.bounds().unwrap();
        prop_assert!(close(b.mixed.makespan, b.critical_path.length, 1e-9),
            "mixed {} cp {}", b.mixed.makespan, b.critical_path.length);
    }

    #[test]
    fn without_edges_mixed_is_the_area_bound(inst in instances(), copies in 1usize..4) {
        // Drop the edges and repeat each task so that every type has at least as many tasks
        // as there are resources: then spreading each type evenly meets the area bound and
        // keeps every task below it, so paths (single tasks) add nothing.
        let resources: usize = inst.classes().iter().map(|c| c.count).sum();
        let reps = resources.max(1) * copies;
        let types: Vec<usize> = inst.types().iter().flat_map(|&k| std::iter::repeat_n(k, reps)).collect();
        let preds = vec![Vec::new(); types.len()];
        let flat = Instance::new(types, preds, inst.classes().to_vec()).unwrap();
        let b = flat.bounds().unwrap();
        prop_assert!(close(b.mixed.makespan, b.area.makespan, 1e-9),
            "mixed {} area {}", b.mixed.makespan, b.area.makespan);
    }
}

/// The Cholesky graph of `nt x nt` tiles with sirocco-like durations (ms at tile 960, from Cojean
/// et al. (2016) Table 2) on `cpu` clusters of 10 cores, `cores` single cores and `gpus` GPUs.
fn cholesky_instance(nt: usize, clusters: usize, cores: usize, gpus: usize) -> Instance {
    let graph = cholesky(&Tiling::square(nt * 960, 960).unwrap()).unwrap();
    let op_type = |op| {
        [Op::Potrf, Op::Trsm, Op::Syrk, Op::GemmNt]
            .iter()
            .position(|&o| o == op)
            .unwrap()
    };
    let types = graph.tasks().iter().map(|t| op_type(t.op)).collect();
    let preds = graph
        .ids()
        .map(|i| graph.predecessors(i).iter().map(|p| p.0).collect())
        .collect();
    let gflop = [0.295, 0.885, 0.885, 1.769];
    let core = [27.78, 34.42, 31.52, 36.46];
    let ten = [5.55, 6.75, 6.90, 7.77];
    let gpu = [1.72, 8.72, 26.96, 28.80];
    let ms = |speedup: &dyn Fn(usize) -> f64| {
        (0..4)
            .map(|k| Some(gflop[k] / (core[k] * speedup(k)) * 1e3))
            .collect()
    };
    let classes = vec![
        Class::new("cluster10", clusters, ms(&|k| ten[k])),
        Class::new("core", cores, ms(&|_| 1.0)),
        Class::new("gpu", gpus, ms(&|k| gpu[k])),
    ];
    Instance::new(types, preds, classes).unwrap()
}

#[test]
fn mixed_equals_the_compact_lp_on_cholesky_graphs() {
    // Cases where paths had to be added and the mixed bound is above both the area bound
    // and the critical path: the agreement then says something about constraint generation.
    let mut strictly_above = 0;
    for nt in 1..=8 {
        for (clusters, cores, gpus) in [(2, 0, 1), (0, 20, 1), (2, 0, 4), (1, 10, 2), (0, 1, 0)] {
            let inst = cholesky_instance(nt, clusters, cores, gpus);
            let mixed = inst.mixed().unwrap();
            let compact = compact_lp(&inst);
            assert!(
                close(mixed.makespan, compact, 1e-6),
                "{nt}x{nt} tiles, {clusters} clusters, {cores} cores, {gpus} GPUs: mixed {} ({} LPs), compact {compact}",
                mixed.makespan,
                mixed.iterations
            );
            let area = inst.area().unwrap().makespan;
            let cp = inst.critical_path().length;
            assert!(mixed.makespan >= area.max(cp) * (1.0 - 1e-9));
            if mixed.iterations > 1 && mixed.makespan > area.max(cp) * (1.0 + 1e-3) {
                strictly_above += 1;
            }
        }
    }
    assert!(
        strictly_above >= 5,
        "only {strictly_above} instances needed paths"
    );
}

#[test]
fn empty_and_invalid_instances() {
    let empty = Instance::new(vec![], vec![], vec![Class::new("c", 1, vec![])]).unwrap();
    let b = empty.bounds().unwrap();
    assert_eq!(
        (b.critical_path.length, b.area.makespan, b.mixed.makespan),
        (0.0, 0.0, 0.0)
    );
    // A type no class with resources can run.
    let none = Instance::new(
        vec![0],
        vec![vec![]],
        vec![Class::new("c", 0, vec![Some(1.0)])],
    );
    assert!(matches!(
        none,
        Err(hetla_bounds::BoundsError::NoClassCanRun {
            task: 0,
            task_type: 0
        })
    ));
    let short = Instance::new(
        vec![1],
        vec![vec![]],
        vec![Class::new("c", 1, vec![Some(1.0)])],
    );
    assert!(matches!(
        short,
        Err(hetla_bounds::BoundsError::MissingDurations { .. })
    ));
    let negative = Instance::new(
        vec![0],
        vec![vec![]],
        vec![Class::new("c", 1, vec![Some(-1.0)])],
    );
    assert!(matches!(
        negative,
        Err(hetla_bounds::BoundsError::InvalidClassDuration { .. })
    ));
}

#[test]
fn paper_002_split_of_28_gemms() {
    // 28 independent GEMMs of tile 960 on one 10-core cluster and one GPU: the area bound
    // gives the cluster about 6 and the GPU about 22 (Cojean et al. (2016), section 5.2).
    let gemm = 2.0 * 960f64.powi(3) / 1e9;
    let cluster = gemm / (36.46 * 7.77) * 1e3;
    let gpu = gemm / (36.46 * 28.80) * 1e3;
    let inst = Instance::new(
        vec![0; 28],
        vec![vec![]; 28],
        vec![
            Class::new("cluster", 1, vec![Some(cluster)]),
            Class::new("gpu", 1, vec![Some(gpu)]),
        ],
    )
    .unwrap();
    let area = inst.area().unwrap();
    assert!((area.counts[0][0] - 6.0).abs() < 0.1, "{:?}", area.counts);
    assert!((area.counts[0][1] - 22.0).abs() < 0.1);
    assert!(close(inst.mixed().unwrap().makespan, area.makespan, 1e-9));
}

#[test]
fn tasks_that_share_their_resource_take_their_occupancy_in_the_area_and_their_duration_on_paths() {
    // Four independent tasks of 1 s at a quarter of a shared GPU, then one of 2 s after the first:
    // the area is 4 x 0.25 + 2 x 1 = 3 s, the longest path 1 + 2 = 3 s; without sharing 6 s.
    let classes = |occupancy: Vec<f64>| {
        vec![Class::new("gpu", 1, vec![Some(1.0), Some(2.0)]).with_occupancy(occupancy)]
    };
    let shared = Instance::new(
        vec![0, 0, 0, 0, 1],
        vec![vec![], vec![], vec![], vec![], vec![0]],
        classes(vec![0.25, 1.0]),
    )
    .unwrap();
    let b = shared.bounds().unwrap();
    assert!((b.area.makespan - 3.0).abs() < 1e-9, "{}", b.area.makespan);
    assert!((b.critical_path.length - 3.0).abs() < 1e-9);
    assert!(
        (b.mixed.makespan - 3.0).abs() < 1e-9,
        "{}",
        b.mixed.makespan
    );
    let alone = Instance::new(
        vec![0, 0, 0, 0, 1],
        vec![vec![], vec![], vec![], vec![], vec![0]],
        classes(Vec::new()),
    )
    .unwrap();
    assert!((alone.bounds().unwrap().mixed.makespan - 6.0).abs() < 1e-9);
    // Beside a CPU class that runs the quarter tasks in 2 s alone, the mixed bound's area rows
    // weigh each share by its own class's occupancy: the GPU alone is still fastest.
    let mixed = Instance::new(
        vec![0, 0, 0, 0, 1],
        vec![vec![], vec![], vec![], vec![], vec![0]],
        vec![
            Class::new("gpu", 1, vec![Some(1.0), Some(2.0)]).with_occupancy(vec![0.25, 1.0]),
            Class::new("cpu", 1, vec![Some(2.0), None]),
        ],
    )
    .unwrap();
    let m = mixed.bounds().unwrap();
    assert!(m.mixed.makespan <= 3.0 + 1e-9 && m.mixed.makespan >= 3.0 - 1e-9);
    // An occupancy outside (0, 1], or missing for a type, is refused.
    for bad in [
        vec![0.0, 1.0],
        vec![1.5, 1.0],
        vec![f64::NAN, 1.0],
        vec![0.5],
    ] {
        let refused = Instance::new(vec![0, 1], vec![vec![], vec![]], classes(bad.clone()));
        assert!(
            matches!(
                refused,
                Err(hetla_bounds::BoundsError::InvalidOccupancy { .. }
                    | hetla_bounds::BoundsError::MissingDurations { .. })
            ),
            "{bad:?}"
        );
    }
}
