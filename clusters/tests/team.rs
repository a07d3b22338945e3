//! A cluster's team: piece i on thread i, pinned where the OS allows, a refused pin reported, a
//! panicking piece resumed on the leader with the team left usable.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

use hetla_clusters::{ClusterError, CpuCluster, Team, available_cpus, run_pieces, take_pieces};

/// Four CPUs for a four-thread team: the available ones, repeated on a smaller machine (threads may
/// share a CPU; each still has its own).
fn four_cpus() -> Vec<usize> {
    let cpus = available_cpus();
    (0..4).map(|i| cpus[i % cpus.len()]).collect()
}

#[test]
fn each_piece_of_a_four_thread_team_runs_on_its_own_thread_and_cpu() {
    let cpus = four_cpus();
    let team = Team::new(&cpus, "test-team").unwrap();
    let ran: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
    let pieces = team.lead(true, || {
        // Several calls, as a blocked kernel makes; every one on the team.
        for _ in 0..3 {
            let body = |i: usize| {
                ran[i].fetch_add(1, Ordering::Relaxed);
                // Long enough that a thread stealing a second piece would show.
                let until = std::time::Instant::now() + std::time::Duration::from_millis(2);
                while std::time::Instant::now() < until {}
            };
            assert!(run_pieces(4, &body));
        }
        take_pieces()
    });
    assert!(ran.iter().all(|r| r.load(Ordering::Relaxed) == 3));
    assert_eq!(pieces.len(), 12);
    for p in &pieces {
        assert_eq!(
            p.thread, p.index,
            "piece {} ran on thread {}",
            p.index, p.thread
        );
        if let Some(cpu) = p.cpu {
            assert_eq!(cpu, cpus[p.thread], "piece {} ran on CPU {cpu}", p.index);
        }
        assert!(p.end >= p.start);
    }
    let calls: std::collections::BTreeSet<u64> = pieces.iter().map(|p| p.call).collect();
    assert_eq!(calls.len(), 3);
    // Outside `lead` the thread leads no team: the caller runs pieces its own way.
    assert!(!run_pieces(2, &|_| ()));
    assert!(take_pieces().is_empty());
}

#[test]
fn more_pieces_than_threads_go_round_the_team() {
    let team = Team::new(&four_cpus()[..2], "test-round").unwrap();
    let pieces = team.lead(true, || {
        assert!(run_pieces(5, &|_| ()));
        take_pieces()
    });
    let mut by_index: Vec<(usize, usize)> = pieces.iter().map(|p| (p.index, p.thread)).collect();
    by_index.sort_unstable();
    assert_eq!(by_index, vec![(0, 0), (1, 1), (2, 0), (3, 1), (4, 0)]);
}

#[test]
fn a_refused_pin_is_an_error_naming_the_cpu() {
    // CPU 1000 is not one this process may use on any machine the tests run on.
    let mut cpus = vec![available_cpus()[0]];
    cpus.push(1000);
    if hetla_clusters::unpinned_allowed() {
        return;
    }
    let err = Team::new(&cpus, "test-refused").unwrap_err();
    assert!(
        matches!(err, ClusterError::Pin { cpu: 1000, ref thread } if thread == "test-refused-t1"),
        "{err:?}"
    );
    assert!(err.to_string().contains("--allow-unpinned"), "{err}");
    let err = CpuCluster::new(cpus, "test-refused").unwrap_err();
    assert!(
        matches!(err, ClusterError::Pin { cpu: 1000, .. }),
        "{err:?}"
    );
}

#[test]
fn a_panicking_piece_reaches_the_leader_and_the_team_goes_on() {
    let team = Team::new(&four_cpus(), "test-panic").unwrap();
    for bad in [0, 2] {
        let caught = catch_unwind(AssertUnwindSafe(|| {
            team.lead(false, || {
                run_pieces(4, &|i| {
                    if i == bad {
                        panic!("piece {i} fails");
                    }
                })
            })
        }));
        let message = caught.unwrap_err();
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert_eq!(text, format!("piece {bad} fails"));
    }
    // The team still runs every piece afterwards.
    let count = AtomicUsize::new(0);
    team.lead(false, || {
        assert!(run_pieces(4, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        }))
    });
    assert_eq!(count.load(Ordering::Relaxed), 4);
}

#[test]
fn a_cluster_runs_its_work_on_its_first_cpu_leading_its_team() {
    let cpus = available_cpus();
    let cluster = CpuCluster::new(cpus.clone(), "test-run").unwrap();
    let (cpu, threads, pieces) = cluster.run(true, || {
        assert!(run_pieces(cpus.len(), &|_| ()));
        (
            hetla_clusters::current_cpu(),
            rayon::current_num_threads(),
            take_pieces(),
        )
    });
    if let Some(cpu) = cpu {
        assert_eq!(cpu, cpus[0]);
    }
    assert_eq!(threads, cpus.len());
    assert_eq!(pieces.len(), cpus.len());
}
