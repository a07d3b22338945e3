//! Tuned defaults: a builder whose user set nothing takes the configuration `hetla tune` saved on
//! this machine for its factorisation near the order asked for; one whose user set anything keeps
//! what was set. One test (it points `HETLA_PERFMODEL_DIR`, process-wide, at its own directory).

use hetla::{Cholesky, ClusterSpec, Family, Lu, Precision, matgen};
use hetla_runtime::{Tuned, TunedChoice};

fn choice(factorization: Family, n: usize, tile: usize) -> TunedChoice<Family> {
    TunedChoice {
        factorization,
        precision: Precision::D,
        n,
        clusters: "1x1".into(),
        tile,
        scheduler: "eager".into(),
    }
}

#[test]
fn builders_that_set_nothing_take_the_tuned_configuration() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: no other thread of this test binary reads or writes the environment (one test).
    unsafe { std::env::set_var("HETLA_PERFMODEL_DIR", dir.path()) };
    let path = Tuned::file_in(dir.path(), hetla::Backend::Faer);
    let a = matgen::random_in::<f64>(700, 700, 1);
    let spd = matgen::random_hpd::<f64>(700, 2);
    let untuned_lu = Lu::new().factor(a.as_ref()).unwrap().tile();
    let untuned_cholesky = Cholesky::new().factor(spd.as_ref()).unwrap().tile();
    assert_ne!(untuned_lu, 96);
    assert_ne!(untuned_cholesky, 160);

    Tuned::save(&path, choice(Family::Lu, 1024, 96)).unwrap();
    Tuned::save(&path, choice(Family::Cholesky, 1024, 160)).unwrap();
    // 700 is within a factor of two of 1024: the tuned tiles, on the tuned clusters.
    let lu = Lu::new().factor(a.as_ref()).unwrap();
    assert_eq!(lu.tile(), 96);
    let factor = Cholesky::new().factor(spd.as_ref()).unwrap();
    assert_eq!(factor.tile(), 160);
    // Every path takes them: the plans of builders that set nothing, what `factor_planned` runs.
    assert_eq!(Lu::new().plan(700, Precision::D).unwrap().tile(), 96);
    assert_eq!(Cholesky::new().plan(700, Precision::D).unwrap().tile(), 160);
    assert_eq!(
        Lu::new().tile(64).plan(700, Precision::D).unwrap().tile(),
        64
    );
    // The inverse of that factor takes the tile tuned for the inverse: its run has the tasks of the
    // inverse's graph in tiles of 224; a factor whose builder set its tile keeps its own.
    Tuned::save(&path, choice(Family::Inverse, 1024, 224)).unwrap();
    let tasks = |tile| {
        hetla::Plan::new(
            hetla::Algorithm::CholeskyInverse { n: 700 },
            tile,
            Precision::D,
        )
        .unwrap()
        .graph()
        .len()
    };
    assert_ne!(tasks(224), tasks(160));
    let (inverse, trace) = factor.inverse_traced().unwrap();
    assert_eq!(trace.unwrap().tasks.len(), tasks(224));
    let product = &spd * &inverse - faer::Mat::<f64>::identity(700, 700);
    assert!(product.norm_max() < 1e-8, "{}", product.norm_max());
    let set = Cholesky::new().tile(160).factor(spd.as_ref()).unwrap();
    let (_, trace) = set.inverse_traced().unwrap();
    assert_eq!(trace.unwrap().tasks.len(), tasks(160));
    // Still right.
    let x = lu.solve(faer::Mat::<f64>::ones(700, 1).as_ref()).unwrap();
    let r = &a * &x - faer::Mat::<f64>::ones(700, 1);
    assert!(r.norm_max() < 1e-8, "{}", r.norm_max());
    // Anything set by the user keeps the builder's own defaults for the rest.
    assert_eq!(Lu::new().tile(64).factor(a.as_ref()).unwrap().tile(), 64);
    let one_core = Lu::new().clusters(ClusterSpec::Grid { count: 1, size: 1 });
    assert_eq!(one_core.factor(a.as_ref()).unwrap().tile(), untuned_lu);
    let eager = Lu::new().scheduler(hetla::SchedulerKind::Eager);
    assert_eq!(eager.factor(a.as_ref()).unwrap().tile(), untuned_lu);
    // Another precision, or an order more than twice away, is not tuned.
    let a32 = matgen::random_in::<f32>(700, 700, 1);
    assert_eq!(Lu::new().factor(a32.as_ref()).unwrap().tile(), untuned_lu);
    let small = matgen::random_in::<f64>(400, 400, 3);
    assert_eq!(Lu::new().factor(small.as_ref()).unwrap().tile(), 400);
    // A broken file is no file.
    std::fs::write(&path, "[{").unwrap();
    assert_eq!(Lu::new().factor(a.as_ref()).unwrap().tile(), untuned_lu);
}
