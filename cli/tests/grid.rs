//! `hetla cholesky --grid PxQ`, `hetla lu --grid 1xQ|Px1` and `hetla qr --grid 1xQ|Px1`: refused
//! with what to do without MPI; under `mpirun` with feature `mpi`, one report from rank 0 (and
//! ScaLAPACK's peers beside it with `scalapack`).

use std::process::Command;

#[cfg(not(feature = "mpi"))]
#[test]
fn without_mpi_a_grid_is_refused_with_how_to_build_it() {
    for command in ["cholesky", "lu", "qr"] {
        let out = Command::new(env!("CARGO_BIN_EXE_hetla"))
            .args([command, "--grid", "1x2", "--n", "64"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--features mpi") && err.contains("mpirun"),
            "{command}: {err}"
        );
    }
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_rank_0_reports_the_distributed_lu_and_its_solve() {
    let compare = cfg!(feature = "scalapack");
    let args = grid_args("lu", "1x2");
    // One report, from rank 0.
    let r = report(&args);
    assert_eq!(
        (r["grid"].as_str(), r["runs"].as_u64()),
        (Some("1x2"), Some(2))
    );
    assert_eq!(r["residual_ok"], true, "{r}");
    assert_eq!(r["bytes_sent_by_rank"], r["bytes_expected_by_rank"]);
    assert_eq!(
        r["solve_bytes_sent_by_rank"],
        r["solve_bytes_expected_by_rank"]
    );
    assert!(r["solve_backward_error"].as_f64().unwrap() < 1e-14, "{r}");
    // 10 block columns: a panel each, and an update or a swap of every other one.
    let tasks = tasks_of(&r);
    assert_eq!(tasks, 100);
    // The bounds of the LU graph, from the run's own kernel durations, no longer than the run.
    let efficiency = r["efficiency"].as_f64().unwrap();
    assert!(efficiency > 0.0 && efficiency <= 1.0, "{r}");
    if compare {
        assert_eq!(r["peers"][0]["name"], "scalapack-pdgetrf");
        assert!(r["ratio_to_pdgetrf"].as_f64().unwrap() > 0.0);
        assert_eq!(r["solve_peers"][0]["name"], "scalapack-pdgetrs");
        assert!(r["solve_ratio_to_pdgetrs"].as_f64().unwrap() > 0.0);
    }
    // Two process rows: by tiles, each panel where its diagonal tile lives.
    let r = report(&grid_args("lu", "2x1"));
    assert_eq!(r["grid"], "2x1");
    assert_eq!(r["residual_ok"], true, "{r}");
    assert_eq!(r["bytes_sent_by_rank"], r["bytes_expected_by_rank"]);
    assert_eq!(
        r["solve_bytes_sent_by_rank"],
        r["solve_bytes_expected_by_rank"]
    );
    assert!(r["solve_backward_error"].as_f64().unwrap() < 1e-14, "{r}");
    // 10 x 10 tiles: a panel, 9 top interchanges and 9 in and out pairs (rows below on the
    // other process row) a step but the last, a solve and updates right of the panel.
    let pairs: u64 = (0..10u64).map(|k| if k + 1 < 10 { 2 * 9 } else { 0 }).sum();
    let updates: u64 = (0..10u64).map(|k| (9 - k) * (1 + (9 - k))).sum();
    assert_eq!(tasks_of(&r), 10 + 10 * 9 + pairs + updates);
    let efficiency = r["efficiency"].as_f64().unwrap();
    assert!(efficiency > 0.0 && efficiency <= 1.0, "{r}");
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_rank_0_reports_the_distributed_qr_and_its_least_squares() {
    let compare = cfg!(feature = "scalapack");
    let mut args = grid_args("qr", "1x2");
    args.extend(["--m", "600", "--lstsq", "3"]);
    let r = report(&args);
    assert_eq!((r["m"].as_u64(), r["n"].as_u64()), (Some(600), Some(300)));
    assert_eq!(r["residual_ok"], true, "{r}");
    assert_eq!(r["bytes_sent_by_rank"], r["bytes_expected_by_rank"]);
    // 10 block columns: a panel each, and an update of every one right of it.
    let tasks = tasks_of(&r);
    assert_eq!(tasks, 10 + 45);
    let efficiency = r["efficiency"].as_f64().unwrap();
    assert!(efficiency > 0.0 && efficiency <= 1.0, "{r}");
    let l = &r["lstsq"];
    assert_eq!(
        (l["rhs"].as_u64(), &l["residual_ok"]),
        (Some(3), &true.into()),
        "{r}"
    );
    assert_eq!(l["bytes_sent_by_rank"], l["bytes_expected_by_rank"]);
    if compare {
        assert_eq!(r["peers"][0]["name"], "scalapack-pdgeqrf");
        assert!(r["ratio_to_pdgeqrf"].as_f64().unwrap() > 0.0);
        assert_eq!(l["peers"][0]["name"], "scalapack-pdgels");
        assert!(l["ratio_to_pdgels"].as_f64().unwrap() > 0.0);
    }
    // One process column: by tiles, with the tree over it.
    let mut args = grid_args("qr", "2x1");
    args.extend(["--m", "600", "--lstsq", "3"]);
    let r = report(&args);
    assert_eq!(r["grid"], "2x1");
    assert_eq!(r["residual_ok"], true, "{r}");
    assert_eq!(r["bytes_sent_by_rank"], r["bytes_expected_by_rank"]);
    let efficiency = r["efficiency"].as_f64().unwrap();
    assert!(efficiency > 0.0 && efficiency <= 1.0, "{r}");
    let l = &r["lstsq"];
    assert_eq!(l["residual_ok"], true, "{r}");
    assert_eq!(l["bytes_sent_by_rank"], l["bytes_expected_by_rank"]);
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_rank_0_reports_the_factorisation_and_what_each_rank_sent() {
    let compare = cfg!(feature = "scalapack");
    let args = grid_args("cholesky", "2x1");
    // One report, from rank 0.
    let r = report(&args);
    assert_eq!(r["grid"], "2x1");
    assert_eq!(r["runs"], 2);
    assert_eq!(r["residual_ok"], true, "{r}");
    assert_eq!(r["bytes_sent_by_rank"], r["bytes_expected_by_rank"]);
    let tasks = tasks_of(&r);
    // 10 tile rows: 10 + 2 * 45 + 120 tasks in the whole graph.
    assert_eq!(tasks, 10 + 2 * 45 + 120);
    assert_eq!(r["tasks"], 220);
    // The network was measured, and the bounds, from the run's own shortest kernel
    // durations, are no longer than the run.
    // The solve after the factorisation, checked where the tiles live.
    assert!(r["solve_backward_error"].as_f64().unwrap() < 1e-14, "{r}");
    assert!(r["solve_seconds"].as_f64().unwrap() > 0.0);
    assert!(
        r["solve_bytes_sent_by_rank"][0].as_u64().unwrap() > 0,
        "{r}"
    );
    assert!(r["network_latency_us"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["network_gb_per_s"].as_f64().unwrap() > 0.0);
    let efficiency = r["efficiency"].as_f64().unwrap();
    assert!(efficiency > 0.0 && efficiency <= 1.0, "{r}");
    assert!(r["node_area_ms"].as_f64().unwrap() >= r["area_ms"].as_f64().unwrap() * (1.0 - 1e-9));
    assert!(r["cp_network_ms"].as_f64().unwrap() > r["cp_ms"].as_f64().unwrap());
    if compare {
        assert_eq!(r["peers"][0]["name"], "scalapack-pdpotrf");
        assert!(r["ratio_to_pdpotrf"].as_f64().unwrap() > 0.0);
        assert_eq!(r["solve_peers"][0]["name"], "scalapack-pdpotrs");
        assert!(r["solve_ratio_to_pdpotrs"].as_f64().unwrap() > 0.0);
    }
}

/// The tasks of a distributed run's report, summed over its ranks.
#[cfg(feature = "mpi")]
fn tasks_of(r: &serde_json::Value) -> u64 {
    let by_rank = r["tasks_by_rank"].as_array().unwrap();
    by_rank.iter().map(|t| t.as_u64().unwrap()).sum()
}

/// `mpirun` with `args` (as root where the tests run as root).
#[cfg(feature = "mpi")]
fn mpirun(args: &[&str]) -> std::process::Output {
    // One job at a time: ranks of several jobs sharing two cores measure their network (and
    // with it the bound the test compares with the run) at a scheduler's time slice.
    static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _job = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    Command::new("mpirun")
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (apt: openmpi-bin) must be on the PATH for --features mpi")
}

/// The `mpirun` arguments of a run of `hetla command --grid grid` on 2 ranks (n = 300, tiles of 32,
/// one core a rank, 2 timed runs, JSON; `--compare` with ScaLAPACK).
#[cfg(feature = "mpi")]
fn grid_args(command: &'static str, grid: &'static str) -> Vec<&'static str> {
    let mut args = vec!["--oversubscribe", "--timeout", "120", "-np", "2"];
    args.extend([env!("CARGO_BIN_EXE_hetla"), command, "--grid", grid]);
    args.extend([
        "--n",
        "300",
        "--tile",
        "32",
        "--clusters",
        "1x1",
        "--repeat",
        "2",
        "--json",
    ]);
    if cfg!(feature = "scalapack") {
        args.push("--compare");
    }
    args
}

/// Rank 0's one report of a successful `mpirun` with `args`.
#[cfg(feature = "mpi")]
fn report(args: &[&str]) -> serde_json::Value {
    let out = mpirun(args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn what_a_distributed_qr_does_not_run_is_refused_before_mpi_starts() {
    for (extra, says) in [
        (["--tree", "flat"], "drop --tree"),
        (["--cholqr", "--compare"], "drop --cholqr"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_hetla"))
            .args(["qr", "--grid", "2x1", "--m", "128", "--n", "64"])
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}
