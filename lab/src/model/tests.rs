//! The platform models' unit tests, on the presets.

use hetla_clusters::ClusterSpec;
use hetla_runtime::ResourceClass;

use super::platform::*;
use crate::Error;

#[test]
fn amdahl_fit_passes_through_the_points_and_is_monotone() {
    let m = PlatformModel::preset("sirocco").unwrap();
    let gemm = &m.cpu.kernels.iter().find(|k| k.op == "gemm").unwrap();
    assert!((gemm.speedup(10) - 7.77).abs() < 1e-12);
    // The fitted curve also gives 7.77 at 10 cores, 1 at 1 core, and grows sublinearly.
    let s = gemm.serial_fraction();
    assert!((10.0 / (1.0 + 9.0 * s) - 7.77).abs() < 1e-9);
    assert!((gemm.speedup(1) - 1.0).abs() < 1e-12);
    let mut last = 1.0;
    for c in 2..=24 {
        let sp = gemm.speedup(c);
        assert!(sp > last && sp < c as f64, "{c}: {sp}");
        last = sp;
    }
}

#[test]
fn gpus_reserve_cores_before_clusters_are_formed() {
    let m = PlatformModel::preset("sirocco").unwrap();
    let grid = |count, size| ClusterSpec::Grid { count, size };
    let classes = m.classes(&grid(2, 10), 4).unwrap();
    assert_eq!(
        classes,
        [
            (ResourceClass::CpuCluster { cores: 10 }, 2),
            (
                ResourceClass::Gpu {
                    name: "K40m".into()
                },
                4
            )
        ]
    );
    assert_eq!(
        m.classes(&grid(20, 1), 1).unwrap()[0],
        (ResourceClass::CpuCluster { cores: 1 }, 20)
    );
    // 24 cores minus 1 for the GPU: 3 x 8 does not fit, 23 single cores do.
    assert!(m.classes(&grid(3, 8), 1).is_err());
    assert!(m.classes(&grid(23, 1), 1).is_ok());
    assert!(matches!(
        m.classes(&grid(2, 10), 5),
        Err(Error::InvalidOption { option: "gpus", .. })
    ));
}

#[test]
fn toml_round_trip_and_errors() {
    for name in PRESETS {
        let m = PlatformModel::preset(name).unwrap();
        assert_eq!(PlatformModel::from_toml(&m.to_toml()).unwrap(), m);
    }
    let m = PlatformModel::preset("sirocco").unwrap();
    let bad = m
        .to_toml()
        .replacen("core_gflops = 27.78", "core_gflops = -1.0", 1);
    let err = PlatformModel::from_toml(&bad).unwrap_err().to_string();
    assert!(err.contains("rates > 0"), "{err}");
    let unknown = m.to_toml().replacen("op = \"gemm\"", "op = \"gemv\"", 1);
    assert!(PlatformModel::from_toml(&unknown).is_err());
    assert!(PlatformModel::from_toml("name = 1").is_err());
    let knl = PlatformModel::preset("knl").unwrap().to_toml();
    let uneven = knl.replacen("numa_per_package = 4", "numa_per_package = 5", 1);
    let err = PlatformModel::from_toml(&uneven).unwrap_err().to_string();
    assert!(err.contains("must divide"), "{err}");
    assert!(PlatformModel::resolve("no-such-platform").is_err());
    let a100 = PlatformModel::preset("a100x8").unwrap().to_toml();
    assert!(a100.contains("host_shared_by = 2"), "{a100}");
    for shared in [0, 9] {
        let bad = a100.replacen(
            "host_shared_by = 2",
            &format!("host_shared_by = {shared}"),
            1,
        );
        let err = PlatformModel::from_toml(&bad).unwrap_err().to_string();
        assert!(err.contains("host_shared_by"), "{err}");
    }
    // Files without the field (each GPU with its own link) still read.
    let own = PlatformModel::from_toml(&a100.replacen("host_shared_by = 2\n", "", 1));
    assert_eq!(own.unwrap().gpu.unwrap().link.host_shared_by, 1);
}
