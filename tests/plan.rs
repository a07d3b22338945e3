//! The plan a driver builds: its tile chosen from the platform's models (timing first the
//! candidates they lack), remembered per platform and order, and not inherited by another platform.

use std::sync::Arc;

use hetla::{Algorithm, Backend, Cholesky, ClusterSpec, ModelStore, Platform, Precision, matgen};

fn platform() -> Arc<Platform> {
    let spec = ClusterSpec::Grid { count: 1, size: 1 };
    Arc::new(Platform::with_store(&spec, Backend::Faer, ModelStore::None).unwrap())
}

#[test]
fn the_tile_is_chosen_from_the_models_once_per_platform_and_order() {
    let n = 1600;
    let first = platform();
    let builder = Cholesky::new().platform(first.clone());
    let plan = builder.plan(n, Precision::D).unwrap();
    assert_eq!(plan.algorithm(), Algorithm::Cholesky { n });
    let choice = plan
        .tile_choice()
        .expect("the models chose the tile")
        .clone();
    // 4 to 32 tiles per side of 1600: 256 and 384; neither was in the empty models.
    let candidates: Vec<usize> = choice.predictions.iter().map(|p| p.0).collect();
    assert_eq!(candidates, [256, 384]);
    assert_eq!(choice.calibrated, [256, 384]);
    assert!(candidates.contains(&choice.tile));
    assert_eq!(plan.tile(), choice.tile);
    assert!(
        choice
            .predictions
            .iter()
            .all(|p| p.1 > 0.0 && p.1.is_finite())
    );
    // The chosen tile is the largest predicted within the tolerance of the fastest.
    let best = choice
        .predictions
        .iter()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min);
    let fastest = choice.fastest.unwrap();
    assert!(choice.predictions.contains(&(fastest, best)));
    assert!(choice.tolerance >= 0.03 && choice.tolerance.is_finite());
    let within = |p: &&(usize, f64)| p.1 <= best * (1.0 + choice.tolerance);
    let largest = choice.predictions.iter().filter(within).map(|p| p.0).max();
    assert_eq!(Some(choice.tile), largest);
    assert!(choice.reason().starts_with(&choice.tile.to_string()));

    // Asked again on the same platform: the same answer, nothing timed.
    let again = builder.plan(n, Precision::D).unwrap();
    assert_eq!(again.tile_choice(), Some(&choice));
    assert_eq!(builder.tile_size_for(n), choice.tile);

    // The plan factors: the factor's residual by the plan's own check.
    let a = matgen::random_spd(n, 11);
    let mut l = a.clone();
    builder.factor_planned(&again, l.as_mut()).unwrap();
    let residual = again
        .residual(a.as_ref(), l.as_ref(), faer::Par::Seq)
        .unwrap();
    assert!(
        residual < hetla::check::RESIDUAL_THRESHOLD,
        "residual {residual}"
    );

    // Another platform has no models yet: it times its own candidates.
    let second = platform();
    let other = Cholesky::new()
        .platform(second)
        .plan(n, Precision::D)
        .unwrap();
    assert_eq!(other.tile_choice().unwrap().calibrated, [256, 384]);

    // A given tile is not a choice; small matrices are one tile; another precision is chosen
    // from its own kernels' calibrations.
    let given = Cholesky::new().platform(first.clone()).tile(300);
    assert_eq!(given.plan(n, Precision::D).unwrap().tile(), 300);
    assert!(given.plan(n, Precision::D).unwrap().tile_choice().is_none());
    let small = Cholesky::new()
        .platform(first.clone())
        .plan(400, Precision::D)
        .unwrap();
    assert_eq!(small.tile(), 400);
    let single = Cholesky::new()
        .platform(first)
        .plan(n, Precision::S)
        .unwrap();
    let single = single.tile_choice().unwrap();
    assert_eq!(single.calibrated, [256, 384]);
    assert_ne!(single.predictions, choice.predictions);
}

#[test]
fn a_choice_is_the_same_in_the_next_process_whatever_runs_added_to_the_models() {
    let dir = std::env::temp_dir().join(format!("hetla-steady-choice-{}", std::process::id()));
    let spec = ClusterSpec::Grid { count: 1, size: 1 };
    let stored = || {
        let store = ModelStore::Dir(dir.clone());
        Arc::new(Platform::with_store(&spec, Backend::Faer, store).unwrap())
    };
    let n = 1600;
    let first = stored();
    let builder = Cholesky::new().platform(first.clone());
    let plan = builder.plan(n, Precision::D).unwrap();
    let choice = plan.tile_choice().unwrap().clone();
    // Runs add their own samples of the candidates' kernels (here of every candidate).
    let a = matgen::random_spd(n, 3);
    for tile in [256, 384] {
        let mut l = a.clone();
        builder
            .clone()
            .tile(tile)
            .factor_in_place(l.as_mut())
            .unwrap();
    }
    first.save_models().unwrap();
    // The next process (a new platform on the same store) chooses from the same calibrations.
    let next = Cholesky::new()
        .platform(stored())
        .plan(n, Precision::D)
        .unwrap();
    let again = next.tile_choice().unwrap();
    assert!(again.calibrated.is_empty(), "{again:?}");
    // The same tile from the same candidates' predictions. A prediction may move by an ulp: the
    // save merges the process's calibration statistics with the file's copy of the same samples
    // (seen once in CI: 244.6262264335327 against 244.62622643353268).
    assert_eq!(again.tile, choice.tile);
    assert_eq!(again.predictions.len(), choice.predictions.len());
    for ((b, ms), (b0, ms0)) in again.predictions.iter().zip(&choice.predictions) {
        assert_eq!(b, b0);
        assert!(
            (ms / ms0 - 1.0).abs() < 1e-12,
            "tile {b}: {ms} ms against {ms0} ms"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_inverse_plan_checks_an_inverse_by_lapacks_ratio_and_refuses_other_shapes() {
    fn check<T: hetla::Scalar>() {
        let n = 150;
        let a = matgen::random_hpd::<T>(n, 5);
        let x = Cholesky::new()
            .tile(40)
            .factor(a.as_ref())
            .unwrap()
            .inverse()
            .unwrap();
        let plan =
            hetla::Plan::new(hetla::Algorithm::CholeskyInverse { n }, 40, T::PRECISION).unwrap();
        let good = plan
            .residual(a.as_ref(), x.as_ref(), faer::Par::Seq)
            .unwrap();
        assert!(
            good < hetla::check::RESIDUAL_THRESHOLD,
            "{}: {good}",
            T::PRECISION
        );
        // An inverse with one wrong entry in its lower triangle fails.
        let mut wrong = x.clone();
        wrong[(7, 3)] = wrong[(7, 3)] + wrong[(7, 7)] * T::from_f64(0.5);
        let bad = plan
            .residual(a.as_ref(), wrong.as_ref(), faer::Par::Seq)
            .unwrap();
        assert!(bad > 100.0, "{}: {bad}", T::PRECISION);
        // Another order than the plan's is an error, not a ratio.
        let small = a.as_ref().submatrix(0, 0, n - 1, n - 1);
        assert!(plan.residual(small, x.as_ref(), faer::Par::Seq).is_err());
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}

#[test]
fn lu_and_qr_plans_check_their_factors_by_lapacks_ratios_and_refuse_another_outcome() {
    fn check<T: hetla::Scalar>() {
        let n = 120;
        let a = matgen::random_in::<T>(n, n, 9);
        let lu = hetla::Lu::new().tile(32);
        let plan = lu.plan(n, T::PRECISION).unwrap();
        let f = lu.factor(a.as_ref()).unwrap();
        let good = plan.residual(a.as_ref(), &f, faer::Par::Seq).unwrap();
        assert!(
            good < hetla::check::RESIDUAL_THRESHOLD,
            "{}: {good}",
            T::PRECISION
        );
        // The factor of another matrix fails; a matrix alone is not an LU's result.
        let other = matgen::random_in::<T>(n, n, 10);
        assert!(plan.residual(other.as_ref(), &f, faer::Par::Seq).unwrap() > 1e3);
        let err = plan
            .residual(a.as_ref(), f.storage(), faer::Par::Seq)
            .unwrap_err();
        assert!(err.to_string().contains("interchanges"), "{err}");
        // Interchanges that are not an LU's are refused.
        let swapped = vec![0; n];
        let bad = hetla::Outcome::Pivoted {
            lu: f.storage(),
            ipiv: &swapped,
        };
        assert!(plan.residual(a.as_ref(), bad, faer::Par::Seq).is_err());

        let (m, k) = (150, 60);
        let tall = matgen::random_block_in::<T>(m, 4, 0..m, 0..k);
        let qr = hetla::Qr::new().tile(40);
        let plan = qr.plan(m, k, T::PRECISION).unwrap();
        let f = qr.factor(tall.as_ref()).unwrap();
        let (q, r) = (f.thin_q().unwrap(), f.r());
        let thin = hetla::Outcome::Orthogonal {
            q: q.as_ref(),
            r: r.as_ref(),
        };
        let good = plan.residual(tall.as_ref(), thin, faer::Par::Seq).unwrap();
        assert!(
            good < hetla::check::RESIDUAL_THRESHOLD,
            "{}: {good}",
            T::PRECISION
        );
        let mut wrong = r.clone();
        wrong[(2, 5)] += T::from_f64(1.0);
        let thin = hetla::Outcome::Orthogonal {
            q: q.as_ref(),
            r: wrong.as_ref(),
        };
        assert!(plan.residual(tall.as_ref(), thin, faer::Par::Seq).unwrap() > 100.0);
        // A square Q is not the thin one the plan computes.
        let square = faer::Mat::<T>::identity(m, m);
        let thin = hetla::Outcome::Orthogonal {
            q: square.as_ref(),
            r: r.as_ref(),
        };
        let err = plan
            .residual(tall.as_ref(), thin, faer::Par::Seq)
            .unwrap_err();
        assert!(err.to_string().contains("150x60"), "{err}");
    }
    for precision in hetla::Precision::ALL {
        hetla_kernels::with_scalar!(precision, T => check::<T>());
    }
}
