//! GPU selection, device reports and device calibration from the command line (emulated devices on
//! a machine without GPUs).

mod common;

fn cores() -> usize {
    hetla::Topology::detect().unwrap().cores().len()
}

#[test]
fn the_command_line_selects_gpus_and_reports_bytes_per_gpu() {
    assert!(common::json("info")["gpus"].is_array());
    if cores() >= 2 {
        let r = common::json(
            "cholesky --n 600 --tile 100 --clusters 1x1 --gpus emulated:1 --gpu-memory 1MiB",
        );
        assert!(r["residual_ok"].as_bool().unwrap());
        assert_eq!(r["gpus"][0]["budget_bytes"], 1 << 20);
        let links: Vec<&str> = common::each(&r["bytes"], "link");
        assert!(links.contains(&"host->gpu0"), "{links:?}");
        let workers = r["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2);
        assert!(
            workers
                .iter()
                .all(|w| w["busy_fraction"].as_f64().unwrap() >= 0.0)
        );
        assert_eq!(r["host_memory"], "staged");
        assert!(r.get("page_locked").is_none());
        // The matrix page-locked for the run (in place: 600 x 600 doubles), by tile columns:
        // the first (600 x 100) before the run, the others beside it as far as the run lasts.
        let r = common::json(
            "cholesky --n 600 --tile 100 --clusters none --gpus emulated:1 --storage in-place \
             --host-memory page-locked",
        );
        assert!(r["residual_ok"].as_bool().unwrap());
        assert_eq!(r["host_memory"], "page-locked");
        let bytes = r["page_locked"]["bytes"].as_u64().unwrap();
        assert!((600 * 100 * 8..=600 * 600 * 8).contains(&bytes), "{r}");
        assert!(r["page_locked"].get("failed").is_none(), "{r}");
    }
    // A product's report names what it locked (of A, B and C, read from the caller's memory:
    // 200 x 120, 120 x 160, 200 x 160 doubles, by tile columns, the first before its clock
    // started), and nothing when staged.
    for (host_memory, locked) in [
        ("staged", None),
        ("page-locked", Some((200 * 120 + 120 * 160 + 200 * 160) * 8)),
    ] {
        let r = common::json(&format!(
            "gemm --m 200 --n 160 --k 120 --tile 64 --clusters none --gpus emulated:1 \
             --host-memory {host_memory}"
        ));
        match locked {
            None => assert!(r["page_locked"].is_null(), "{r}"),
            Some(bytes) => {
                let locked = r["page_locked"]["bytes"].as_u64().unwrap() as usize;
                assert!((1..=bytes).contains(&locked), "{r}");
                assert!(r["page_locked"]["seconds"].as_f64().unwrap() >= 0.0);
            }
        }
    }
    let (ok, _, err) = common::run("cholesky --n 100 --gpus 9");
    assert!(!ok && err.contains("no GPU 9"), "{err}");
    let (ok, _, err) = common::run("cholesky --n 100 --gpu-memory 3XB");
    assert!(!ok && err.contains("unknown unit"), "{err}");
}

/// `hetla lu --gpus` and `hetla qr --gpus`: LU's updates and interchanges, QR's applications of its
/// panels' reflectors (in block columns) on an emulated device beside a cluster, with their
/// residuals; LU and QR on the device alone (their panels there too); both refused with `--grid` (a
/// run across ranks has no GPUs).
#[test]
fn lu_and_qr_run_their_updates_on_a_gpu_from_the_command_line() {
    let beside_a_cluster = |line: &str| {
        let r = common::json(line);
        assert!(r["residual_ok"].as_bool().unwrap(), "{r}");
        assert_eq!(r["workers"][1]["name"], "gpu0", "{r}");
        assert!(r["workers"][1]["tasks"].as_u64().unwrap() > 0, "{r}");
        r
    };
    if cores() >= 2 {
        beside_a_cluster("lu --n 600 --tile 100 --clusters 1x1 --gpus emulated:1");
        let r = beside_a_cluster(
            "qr --m 500 --n 300 --tile 100 --clusters 1x1 --gpus emulated:1 --lstsq 2",
        );
        assert_eq!(r["tree"], "none (block columns)", "{r}");
    }
    // With no cluster beside it the GPU factors LU's panels too: every task is the GPU's.
    let r = common::json("lu --n 600 --tile 100 --clusters none --gpus emulated:1");
    assert!(r["residual_ok"].as_bool().unwrap(), "{r}");
    assert_eq!(r["workers"][0]["name"], "gpu0", "{r}");
    assert_eq!(r["workers"][0]["tasks"], 36, "{r}");
    // Out of core: 6 block columns of 600 x 100 doubles (480000 bytes each) on a budget of 4,
    // the bytes each way reported, more than the matrix in, all of it back.
    let r = common::json(
        "lu --n 600 --tile 100 --clusters none --gpus emulated:1 --gpu-memory 1920000",
    );
    assert!(r["residual_ok"].as_bool().unwrap(), "{r}");
    let moved = |link: &str| {
        let mut bytes = r["bytes"].as_array().unwrap().iter();
        bytes
            .find(|b| b["link"] == link)
            .map(|b| b["bytes"].as_u64().unwrap())
    };
    let matrix = 600 * 600 * 8;
    assert!(moved("host->gpu0").is_some_and(|b| b > matrix), "{r}");
    assert!(moved("gpu0->host").is_some_and(|b| b >= matrix), "{r}");
    // QR too: its 3 panels and 3 applications, and least squares, on the device alone.
    let r = common::json(
        "qr --m 500 --n 300 --tile 100 --clusters none --gpus emulated:1 --precision z --lstsq 2",
    );
    assert!(r["residual_ok"].as_bool().unwrap(), "{r}");
    assert_eq!(r["workers"][0]["name"], "gpu0", "{r}");
    assert_eq!(r["workers"][0]["tasks"], 6, "{r}");
    for family in ["lu --n 600", "qr --m 500 --n 300"] {
        let (ok, _, err) = common::run(&format!("{family} --grid 1x1 --gpus emulated:1"));
        assert!(!ok && err.contains("--gpus none"), "{family}: {err}");
    }
}

#[test]
fn calibration_measures_device_kernels_and_links() {
    let dir = std::env::temp_dir().join(format!("hetla-devcal-{}", std::process::id()));
    let (ok, _, err) = common::run(&format!(
        "calibrate --gpus emulated:1 --clusters none --tile 64 --samples 3 --perfmodel-dir {}",
        dir.display()
    ));
    assert!(ok, "{err}");
    let models = hetla_runtime::PerfModels::load(&dir.join("perfmodels-faer.json")).unwrap();
    let link = models.link("emulated").expect("the link was stored");
    assert!(link.h2d.gb_per_s > 0.0 && link.d2h.gb_per_s > 0.0);
    let gpu = hetla_runtime::ResourceClass::Gpu {
        name: "emulated".into(),
    };
    let key = hetla_runtime::KernelKey::square(hetla::Op::GemmNt, 64);
    assert_eq!(models.get(&key, &gpu).map(|s| s.samples), Some(3));
    // A platform file with the device: its link and the packing rates of the staged copies, which
    // a simulation on it books (slower than copies straight from page-locked tiles).
    let (file, report) =
        common::calibrate_to_file(&dir, &["--gpus", "emulated:1", "--clusters", "none"]);
    let packing = report["packing"].as_array().expect("packing rates");
    assert_eq!(packing[0]["cores"], 1);
    assert!(
        packing
            .iter()
            .all(|p| p["gb_per_s"].as_f64().unwrap() > 0.0)
    );
    let model = hetla_lab::PlatformModel::load(&file).unwrap();
    let gpu = model.gpu.as_ref().unwrap();
    assert_eq!(gpu.staging.len(), packing.len());
    // The launch of a kernel, timed beyond the kernel (a handoff to the stream's thread on the
    // emulated device: microseconds).
    assert!(
        gpu.launch_us > 0.0 && gpu.launch_us < 1e5,
        "{}",
        gpu.launch_us
    );
    // The copies from and into pageable memory, measured whole: a rate and a latency each way.
    let pageable = gpu.pageable.expect("the pageable copies were measured");
    for rate in [pageable.h2d, pageable.d2h] {
        assert!(rate.gb_per_s > 0.0 && rate.gb_per_s.is_finite(), "{rate:?}");
        assert!(rate.latency_us >= 0.0, "{rate:?}");
    }
    // Copies within the device's memory (host memory on an emulated device), fitted.
    let within = gpu
        .device_copies
        .expect("the copies within the device were measured");
    assert!(
        within.gb_per_s > 0.0 && within.gb_per_s.is_finite(),
        "{within:?}"
    );
    // Page-locking, timed (the emulated device registers ranges in a table: fast).
    assert!(gpu.lock_gb_per_s > 0.0, "{}", gpu.lock_gb_per_s);
    // The tensor cores' speedups over f32 products, timed (an emulated device rounds the operands
    // in software: about 1 or below), which the model's tensor math takes.
    let maths: Vec<_> = gpu.tensor.iter().map(|r| r.math).collect();
    assert_eq!(maths, [hetla::TensorMath::Tf32, hetla::TensorMath::Bf16]);
    assert!(
        (gpu.tensor.iter()).all(|r| r.speedup > 0.0 && r.speedup.is_finite()),
        "{:?}",
        gpu.tensor
    );
    assert!(
        model
            .clone()
            .with_tensor_math(hetla::TensorMath::Bf16)
            .is_ok()
    );
    let makespan = |path: &str| {
        let r = common::json(&format!(
            "simulate --platform {} --gpus 1 --clusters none --n 640 --tile 64 --host-memory \
             {path}",
            file.display()
        ));
        r["makespan_ms"].as_f64().unwrap()
    };
    assert!(makespan("staged") > makespan("page-locked"));
    // LU's kernels, timed on the GPU inside LU runs (its panels there too): a rate each, and LU
    // simulated on the GPU from the file alone.
    for op in ["lu_panel", "lu_update", "lu_swap"] {
        let rate = (gpu.kernels.iter()).find(|k| k.op == op && k.tile == 64);
        assert!(
            rate.is_some_and(|k| k.gflops > 0.0),
            "{op}: {:?}",
            gpu.kernels
        );
    }
    let r = common::json(&format!(
        "simulate --factorization lu --platform {} --gpus 1 --clusters none --n 640 --tile 64",
        file.display()
    ));
    assert_eq!(r["workers"][0]["tasks"], 100, "{r}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The `phases` of a report: their names in order, and their seconds (each >= 0).
fn phases(report: &serde_json::Value) -> (Vec<String>, Vec<f64>) {
    let list = report["phases"].as_array().expect("a phases list");
    let names = list
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let seconds: Vec<f64> = list
        .iter()
        .map(|p| p["seconds"].as_f64().unwrap())
        .collect();
    assert!(seconds.iter().all(|&s| s >= 0.0), "{seconds:?}");
    (names, seconds)
}

#[test]
fn cholesky_and_gemm_report_where_their_time_went() {
    let start = std::time::Instant::now();
    let r = common::json(
        "cholesky --n 700 --tile 100 --clusters none --gpus emulated:1 --repeat 2 --compare cpu",
    );
    let wall = start.elapsed().as_secs_f64();
    let (names, seconds) = phases(&r);
    let expected = [
        "platform", "plan", "generate", "runs", "check", "bounds", "peers",
    ];
    assert_eq!(names, expected);
    // The runs phase holds the warm-up and both timed runs; the phases fit in the process.
    let runs = seconds[3];
    assert!(runs >= 2.0 * r["seconds"].as_f64().unwrap(), "{runs} {r}");
    assert!(
        seconds.iter().sum::<f64>() <= wall,
        "{seconds:?} in {wall} s"
    );

    // A resident product: its phases, and C's write-back as the only bytes moved.
    let r = common::json(
        "gemm --m 300 --n 200 --k 100 --tile 100 --clusters none --gpus emulated:1 --placement \
         gpu0,gpu0,gpu0",
    );
    let (names, _) = phases(&r);
    assert_eq!(names, ["platform", "generate", "runs", "check", "peers"]);
    let links = r["bytes_moved"]["per_link"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0]["link"], "gpu0->host");
    assert_eq!(links[0]["bytes"], 300 * 200 * 8);
    assert!(r["relative_error"].as_f64().unwrap() < 1e-13);
}

#[test]
fn resident_runs_time_the_factorisation_on_the_gpu_alone_real_and_simulated() {
    let r =
        common::json("cholesky --n 600 --tile 100 --clusters none --gpus emulated:1 --resident");
    assert!(r["residual_ok"].as_bool().unwrap());
    assert_eq!(r["resident"], true);
    // `seconds` is the makespan, which timed no copy.
    let (seconds, makespan_ms) = (
        r["seconds"].as_f64().unwrap(),
        r["makespan_ms"].as_f64().unwrap(),
    );
    assert!(
        (seconds * 1e3 - makespan_ms).abs() <= 1e-12 * makespan_ms,
        "{seconds} s, {makespan_ms} ms"
    );
    assert!(r["bytes"].as_array().unwrap().is_empty(), "{r}");
    // The matrix lived in the device's memory: its tiles were blocks of it, on the GPU alone
    // (a cluster beside it takes no task).
    assert_eq!(r["storage"], "device");
    let r = common::json("cholesky --n 600 --tile 100 --clusters 1x1 --gpus emulated:1 --resident");
    assert!(r["residual_ok"].as_bool().unwrap());
    let workers = r["workers"].as_array().unwrap();
    let tasks = |name: &str| {
        workers.iter().find(|w| w["name"] == name).unwrap()["tasks"]
            .as_u64()
            .unwrap()
    };
    assert_eq!((tasks("cpu0"), tasks("gpu0")), (0, 56), "{workers:?}");
    let simulate = |extra: &str| {
        common::run(&format!(
            "simulate --platform h200 --n 8192 --tile 2048 --clusters none --json {extra}"
        ))
    };
    let makespan = |extra: &str| {
        let (ok, out, err) = simulate(extra);
        assert!(ok, "{err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ms = |key: &str| r[key].as_f64().unwrap();
        (ms("makespan_ms"), ms("area_ms"))
    };
    let (resident, area) = makespan("--gpus 1 --resident");
    let (from_host, _) = makespan("--gpus 1 --host-memory page-locked");
    assert!(
        resident >= area * (1.0 - 1e-9) && resident < from_host,
        "{resident} {area} {from_host}"
    );
    // LU alike: every block column's task on the GPU, `seconds` the makespan, nothing crossing;
    // refused without a GPU and with the mixed solve (which refines on the GPU by itself).
    let r = common::json("lu --n 600 --tile 100 --clusters 1x1 --gpus emulated:1 --resident");
    assert!(r["residual_ok"].as_bool().unwrap(), "{r}");
    assert_eq!(r["resident"], true);
    // No link moved a byte (the report leaves the list out when empty).
    assert!(r["bytes"].as_array().is_none_or(Vec::is_empty), "{r}");
    let workers = r["workers"].as_array().unwrap();
    // The GPU's busy time over its busy fraction: the run's makespan.
    let gpu = |key: &str| workers[1][key].as_f64().unwrap();
    let makespan = gpu("busy_seconds") / gpu("busy_fraction");
    let seconds = r["seconds"].as_f64().unwrap();
    assert!(
        (seconds - makespan).abs() <= 1e-9 * makespan,
        "{seconds} {makespan}"
    );
    let tasks = |name: &str| tasks_of(workers, name);
    assert_eq!((tasks("cpu0"), tasks("gpu0")), (0, 36), "{workers:?}");
    let (ok, _, err) = common::run("lu --n 600 --resident");
    assert!(!ok && err.contains("--gpus all"), "{err}");
    // QR alike (its panels on the GPU too, the cluster idle), checked by the best run's factor;
    // refused without a GPU and for a wide matrix.
    let r = common::json(
        "qr --m 500 --n 300 --tile 100 --clusters 1x1 --gpus emulated:1 --resident --precision c",
    );
    assert!(r["residual_ok"].as_bool().unwrap(), "{r}");
    assert_eq!(r["resident"], true);
    assert!(r["bytes"].as_array().is_none_or(Vec::is_empty), "{r}");
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(
        (tasks_of(workers, "cpu0"), tasks_of(workers, "gpu0")),
        (0, 6),
        "{r}"
    );
    let (ok, _, err) = common::run("qr --m 500 --n 300 --resident");
    assert!(!ok && err.contains("--gpus all"), "{err}");
    let (ok, _, err) = common::run("qr --m 300 --n 500 --gpus emulated:1 --resident");
    assert!(!ok && err.contains("block columns"), "{err}");
    // The mixed solve of A and b in the GPU's memory: factored and refined there.
    let r = common::json(
        "lu --n 400 --tile 100 --clusters none --gpus emulated:1 --precision ds --resident",
    );
    let mixed = &r["mixed"];
    assert_eq!(
        (&mixed["path"]["path"], &mixed["path"]["device"]),
        (&"mixed".into(), &0.into()),
        "{r}"
    );
    assert!(mixed["backward_error"].as_f64().unwrap() < 30.0, "{r}");
    // Resident without a GPU, or the write-back policy without the matrix on the device: errors.
    let (ok, _, err) = simulate("--resident");
    assert!(!ok && err.contains("needs a GPU"), "{err}");
    let (ok, _, err) = simulate("--gpus 1 --write-back resident");
    assert!(
        !ok && err.contains("not placed read-write on a device"),
        "{err}"
    );
}

#[test]
fn a_resident_product_leaves_c_on_the_gpu_until_its_clock_stops() {
    let gemm = |extra: &str| {
        common::run(&format!(
            "gemm --m 300 --n 200 --k 100 --tile 64 --clusters none --json {extra}"
        ))
    };
    // C right in the caller's matrix, and no copy inside the timed run.
    let (ok, out, err) = gemm("--gpus emulated:1 --resident");
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(r["relative_error"].as_f64().unwrap() < 1e-12, "{r}");
    assert_eq!(r["bytes_moved"]["total"], 0, "{r}");
    // The matrices live on the GPU: beside a cluster, the GPU takes every product.
    let r = common::json(
        "gemm --m 300 --n 200 --k 100 --tile 64 --clusters 1x1 --gpus emulated:1 --resident",
    );
    assert!(r["relative_error"].as_f64().unwrap() < 1e-12, "{r}");
    assert_eq!(r["strategy"], "grid", "{r}");
    assert_eq!(
        r["updates"],
        serde_json::json!([["cpu0", 0], ["gpu0", 5 * 4 * 2]]),
        "{r}"
    );
    // (Placed on the GPU but not resident, C's copy back is inside the time: see
    // cholesky_and_gemm_report_where_their_time_went.)
    // Errors before any work: no GPU, no room for A, B and C, both ways of placing.
    let (ok, _, err) = common::run("gemm --m 300 --n 200 --k 100 --gpus none --resident");
    assert!(
        !ok && err.contains("resident") && err.contains("needs a GPU"),
        "{err}"
    );
    let (ok, _, err) = gemm("--gpus emulated:1 --gpu-memory 100KiB --resident");
    assert!(!ok && err.contains("budget"), "{err}");
    let (ok, _, err) = gemm("--resident --placement host,host,gpu0");
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

/// `HETLA_GPU_STREAMS` gives each device its compute streams: 3 on an emulated device factor right
/// (a step's panel on the first, its updates on the others); 0 or a word is a clear error before
/// any work, and without a device to open the variable is not read.
#[test]
fn the_environment_sets_a_devices_compute_streams() {
    let with_streams = |streams: &str, line: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hetla"))
            .args(line.split_whitespace())
            .env("HETLA_GPU_STREAMS", streams)
            .output()
            .expect("the hetla binary runs");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let line = "cholesky --n 512 --tile 128 --clusters none --gpus emulated:1 --json";
    let (ok, out, err) = with_streams("3", line);
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["residual_ok"], true, "{r}");
    for bad in ["0", "17", "four"] {
        let (ok, _, err) = with_streams(bad, line);
        assert!(
            !ok && err.contains("HETLA_GPU_STREAMS") && err.contains("from 1 to 16"),
            "{bad}: {err}"
        );
    }
    let (ok, _, err) = with_streams("0", "cholesky --n 200 --clusters 1x1 --gpus none");
    assert!(ok, "{err}");
}

/// `--tensor-math` rounds the mixed solve's single factor on an emulated device (the refined
/// solution keeps double's backward error, the report names the math); without a mixed precision, a
/// device, or a model of tensor cores it is refused before any work, saying what would be right.
#[test]
fn tensor_math_runs_the_mixed_solves_single_factor_on_devices_or_is_refused() {
    let v = common::json(
        "lu --n 300 --tile 100 --clusters none --gpus emulated:1 --precision ds --tensor-math tf32",
    );
    let mixed = &v["mixed"];
    assert_eq!(mixed["tensor_math"], "tf32", "{mixed}");
    assert!(
        mixed["path"]["factor_seconds"].as_f64().unwrap() > 0.0,
        "{mixed}"
    );
    assert_eq!(mixed["path"]["factored_in"], "s", "{mixed}");
    assert_eq!(mixed["path"]["device"], 0, "refined on the GPU: {mixed}");
    assert!(mixed["backward_error"].as_f64().unwrap() < 30.0, "{mixed}");
    let v = common::json(
        "cholesky --n 300 --tile 100 --clusters none --gpus emulated:1 --precision ds --cond 1e3 \
         --tensor-math bf16",
    );
    assert_eq!(v["tensor_math"], "bf16", "{v}");
    assert_eq!(v["refinement"]["path"], "mixed", "{v}");
    // Factored and refined on the emulated GPU, whose budget holds A and the factor.
    assert_eq!(v["refinement"]["device"], 0, "{v}");
    assert!(
        v["refinement"]["factor_seconds"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert!(v["backward_error"].as_f64().unwrap() < 1e-15, "{v}");
    // Matrices in the GPU's memory (solve_refined_device), both solves there.
    let v = common::json(
        "cholesky --n 300 --tile 100 --clusters none --gpus emulated:1 --precision ds --cond 1e3 \
         --tensor-math tf32 --resident",
    );
    assert_eq!(
        (&v["resident"], &v["refinement"]["device"]),
        (&true.into(), &0.into()),
        "{v}"
    );
    assert!(v["backward_error"].as_f64().unwrap() < 1e-15, "{v}");
    assert!(v["double_backward_error"].as_f64().unwrap() < 1e-15, "{v}");
    for (line, says) in [
        (
            "cholesky --n 100 --precision ds --resident",
            "--resident solves matrices in a GPU's memory",
        ),
        (
            "cholesky --n 100 --precision ds --compare cpu",
            "drop --compare cpu",
        ),
        (
            "lu --n 100 --precision d --tensor-math tf32",
            "give --precision ds or zc",
        ),
        (
            "lu --n 100 --precision ds --tensor-math tf32",
            "give --gpus",
        ),
        (
            "cholesky --n 100 --tensor-math bf16",
            "give --precision ds or zc",
        ),
        (
            "lu --n 100 --precision ds --tensor-math fp16",
            "expected off, tf32 or bf16",
        ),
        (
            "simulate --platform sirocco --gpus 1 --n 4096 --tile 512 --precision s \
             --tensor-math tf32",
            "K40m has no tf32 rate",
        ),
        (
            "simulate --platform h200 --gpus 1 --n 4096 --tile 512 --tensor-math tf32",
            "give --precision s or c",
        ),
    ] {
        let (ok, _, err) = common::run(line);
        assert!(!ok && err.contains(says), "{line}: {err}");
    }
}

/// The tasks a report's worker `name` ran.
fn tasks_of(workers: &[serde_json::Value], name: &str) -> u64 {
    workers.iter().find(|w| w["name"] == name).unwrap()["tasks"]
        .as_u64()
        .unwrap()
}
