//! Topologies, cluster specs and pinned pools.

use hetla_clusters::{ClusterError, ClusterSpec, CpuCluster, Level, Topology};

/// 2 packages x 2 L3 (one NUMA node each) x 4 cores, 2 hyperthreads per core: 32 CPUs.
fn big() -> Topology {
    Topology::synthetic(2, 2, 4, 2)
}

fn spec(s: &str) -> ClusterSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn synthetic_topology_has_the_asked_shape() {
    let t = big();
    assert_eq!(t.level(Level::Package).len(), 2);
    assert_eq!(t.level(Level::Numa).len(), 4);
    assert_eq!(t.level(Level::L3).len(), 4);
    assert_eq!(t.level(Level::L2).len(), 16);
    assert_eq!(t.cores().len(), 16);
    assert_eq!(t.cpus().len(), 32);
    assert_eq!(t.cores()[1], vec![2, 3]);
}

#[test]
fn specs_parse_and_print_back() {
    for (text, expected) in [
        ("2x10", ClusterSpec::Grid { count: 2, size: 10 }),
        ("4X16", ClusterSpec::Grid { count: 4, size: 16 }),
        ("numa", ClusterSpec::Level(Level::Numa)),
        ("L3", ClusterSpec::Level(Level::L3)),
        ("core", ClusterSpec::Level(Level::Core)),
        ("auto", ClusterSpec::Auto),
        (
            "0-3,4-7",
            ClusterSpec::Lists(vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]),
        ),
        ("0,2/1,3", ClusterSpec::Lists(vec![vec![0, 2], vec![1, 3]])),
        ("0,1,5", ClusterSpec::Lists(vec![vec![0, 1, 5]])),
    ] {
        let parsed = spec(text);
        assert_eq!(parsed, expected, "{text}");
        assert_eq!(spec(&parsed.to_string()), parsed, "round trip of {text}");
    }
}

#[test]
fn bad_specs_are_errors_that_say_why() {
    for bad in ["", "0x4", "2x0", "twox2", "2x", "socket", "3-1", "0-3/"] {
        let err = bad.parse::<ClusterSpec>().expect_err(bad);
        assert!(!err.to_string().is_empty());
    }
    assert!(matches!(
        "2x0".parse::<ClusterSpec>(),
        Err(ClusterError::ZeroSized { .. })
    ));
}

#[test]
fn grids_take_compact_runs_of_cores() {
    let t = big();
    let clusters = spec("4x4").resolve(&t).unwrap();
    assert_eq!(clusters.len(), 4);
    // Each cluster is one L3 domain: first hyperthread of its 4 cores.
    assert_eq!(clusters[0], vec![0, 2, 4, 6]);
    assert_eq!(clusters[3], vec![24, 26, 28, 30]);
    let clusters = spec("2x8").resolve(&t).unwrap();
    assert_eq!(clusters[1], (16..32).step_by(2).collect::<Vec<_>>());
    let clusters = spec("3x2").resolve(&t).unwrap();
    assert_eq!(clusters, vec![vec![0, 2], vec![4, 6], vec![8, 10]]);
}

#[test]
fn too_many_cores_is_an_error() {
    let err = spec("2x10").resolve(&big()).unwrap_err();
    assert!(matches!(
        err,
        ClusterError::TooManyCores {
            asked: 20,
            available: 16,
            ..
        }
    ));
    assert!(err.to_string().contains("16"));
    // count x size past usize (a case proptest found): the same error, not an overflow.
    let huge = spec("18446744073709551615x18446744073709551615").resolve(&big());
    assert!(matches!(
        huge,
        Err(ClusterError::TooManyCores {
            asked: usize::MAX,
            ..
        })
    ));
}

#[test]
fn levels_make_one_cluster_per_object() {
    let t = big();
    assert_eq!(spec("package").resolve(&t).unwrap().len(), 2);
    assert_eq!(spec("numa").resolve(&t).unwrap().len(), 4);
    assert_eq!(spec("l3").resolve(&t).unwrap()[1], vec![8, 10, 12, 14]);
    assert_eq!(spec("l2").resolve(&t).unwrap().len(), 16);
    assert_eq!(spec("core").resolve(&t).unwrap()[5], vec![10]);
    let flat = Topology::flat(&[0, 1, 2]);
    assert!(matches!(
        spec("l3").resolve(&flat),
        Err(ClusterError::MissingLevel { level: Level::L3 })
    ));
}

#[test]
fn explicit_lists_are_checked() {
    let t = big();
    assert_eq!(
        spec("0-3/8-11").resolve(&t).unwrap(),
        vec![vec![0, 1, 2, 3], vec![8, 9, 10, 11]]
    );
    assert!(matches!(
        spec("0-3/3-5").resolve(&t),
        Err(ClusterError::Overlap { cpu: 3 })
    ));
    assert!(matches!(
        spec("0-40").resolve(&t),
        Err(ClusterError::UnavailableCpu { cpu: 32, .. })
    ));
}

#[test]
fn auto_follows_l3_then_numa_then_everything() {
    assert_eq!(spec("auto").resolve(&big()).unwrap().len(), 4);
    // One L3 shared by all cores: one cluster of every core.
    let one_l3 = Topology::synthetic(1, 1, 6, 1);
    assert_eq!(
        spec("auto").resolve(&one_l3).unwrap(),
        vec![(0..6).collect::<Vec<_>>()]
    );
    assert_eq!(
        spec("auto").resolve(&Topology::flat(&[0, 1])).unwrap(),
        vec![vec![0, 1]]
    );
}

#[test]
fn restriction_and_reservation_drop_cores() {
    let t = big().restrict(&(0..8).collect::<Vec<_>>());
    assert_eq!(t.cores().len(), 4);
    assert_eq!(t.level(Level::Package).len(), 1);
    let reserved = big().without_last_cores(4);
    assert_eq!(reserved.cores().len(), 12);
    assert_eq!(spec("auto").resolve(&reserved).unwrap().len(), 3);
}

#[test]
fn this_machine_has_a_topology_and_pinned_pools() {
    let t = Topology::detect().unwrap();
    let cpus = hetla_clusters::available_cpus();
    assert_eq!(t.cpus().len(), cpus.len());
    let clusters = spec(&format!("1x{}", t.cores().len())).resolve(&t).unwrap();
    let cluster = CpuCluster::new(clusters[0].clone(), "test").unwrap();
    assert_eq!(cluster.size(), t.cores().len());
    let threads = cluster.pool().install(rayon::current_num_threads);
    assert_eq!(threads, cluster.size());
}

#[cfg(target_os = "linux")]
#[test]
fn sysfs_reads_a_hand_made_tree() {
    let root = std::env::temp_dir().join(format!("hetla-sysfs-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("cpu/online", "0-3\n");
    for cpu in 0..4 {
        let package = cpu / 2;
        write(
            &format!("cpu/cpu{cpu}/topology/physical_package_id"),
            &package.to_string(),
        );
        write(
            &format!("cpu/cpu{cpu}/topology/thread_siblings_list"),
            &cpu.to_string(),
        );
        write(&format!("cpu/cpu{cpu}/cache/index0/level"), "1");
        write(&format!("cpu/cpu{cpu}/cache/index0/type"), "Data");
        write(
            &format!("cpu/cpu{cpu}/cache/index0/shared_cpu_list"),
            &cpu.to_string(),
        );
        write(&format!("cpu/cpu{cpu}/cache/index1/level"), "3");
        write(&format!("cpu/cpu{cpu}/cache/index1/type"), "Unified");
        let l3 = if package == 0 { "0-1" } else { "2-3" };
        write(&format!("cpu/cpu{cpu}/cache/index1/shared_cpu_list"), l3);
    }
    write("node/node0/cpulist", "0-3");
    let t = Topology::from_sysfs(&root).unwrap();
    std::fs::remove_dir_all(&root).ok();
    assert_eq!(t.level(Level::Package), &[vec![0, 1], vec![2, 3]]);
    assert_eq!(t.level(Level::L3), &[vec![0, 1], vec![2, 3]]);
    assert_eq!(t.level(Level::Numa), &[vec![0, 1, 2, 3]]);
    assert_eq!(
        spec("auto").resolve(&t).unwrap(),
        vec![vec![0, 1], vec![2, 3]]
    );
}

#[cfg(feature = "hwloc")]
#[test]
fn hwloc_and_sysfs_agree_on_cores() {
    let hw = Topology::detect().unwrap();
    assert_eq!(hw.source(), hetla_clusters::TopologySource::Hwloc);
    let sys = Topology::from_sysfs(std::path::Path::new("/sys/devices/system"))
        .unwrap()
        .restrict(&hetla_clusters::available_cpus());
    assert_eq!(hw.cores(), sys.cores());
    assert_eq!(hw.level(Level::L3), sys.level(Level::L3));
}
