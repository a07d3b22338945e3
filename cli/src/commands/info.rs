//! `hetla info`: the topology, the clusters a spec makes, the GPUs and the kernel backends.

use super::args::{parse_gpus, parse_spec};
use super::output::ClustersReport;
use clap::Args;
use hetla::{Backend, ClusterSpec, Topology};
use hetla_runtime::GpuSelection;
use serde::Serialize;

#[derive(Args)]
pub struct InfoArgs {
    /// The cluster spec to show (default: auto), resolved on the cores the GPUs leave.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    /// GPUs to show: all, none, indices ("0,1"), or emulated:K.
    #[arg(long, default_value = "all", value_parser = parse_gpus)]
    pub gpus: GpuSelection,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
pub struct TopologyReport {
    pub source: String,
    pub packages: Vec<String>,
    pub numa_nodes: Vec<String>,
    pub l3: Vec<String>,
    pub l2: Vec<String>,
    pub cores: Vec<String>,
}

#[derive(Serialize)]
pub struct InfoReport {
    /// The GPUs selected by --gpus that the driver reports (empty without a driver).
    pub gpus: Vec<hetla_clusters::GpuInfo>,
    /// Emulated devices selected by --gpus emulated:K.
    pub emulated_gpus: usize,
    pub cpus: usize,
    pub cpu_list: String,
    pub online_cpu_list: Option<String>,
    pub topology: TopologyReport,
    pub clusters: ClustersReport,
    pub backends: Vec<String>,
    /// The CUDA driver, the libraries cuBLAS and cuSOLVER need, and NVRTC (optional: it compiles
    /// hetla's own kernels, whose work is done on the host without it): where each was loaded from
    /// and its version, or why not (empty in a build without the `cuda` feature).
    pub cuda: Vec<CudaLibraryReport>,
}

#[derive(Serialize)]
pub struct CudaLibraryReport {
    pub name: String,
    pub file: String,
    pub loaded: bool,
    pub path: Option<String>,
    pub version: Option<String>,
    pub error: Option<String>,
}

/// The CUDA driver, then the libraries in load order, then NVRTC (hetla's own kernels; optional).
fn cuda_report() -> Vec<CudaLibraryReport> {
    #[cfg(feature = "cuda")]
    {
        use hetla_kernels::cuda_libs;
        std::iter::once(cuda_libs::driver())
            .chain(cuda_libs::libraries().iter().cloned())
            .chain(std::iter::once(cuda_libs::nvrtc().clone()))
            .map(|l| CudaLibraryReport {
                name: l.name.to_owned(),
                file: l.file.to_owned(),
                loaded: l.loaded(),
                path: l.path.map(|p| p.display().to_string()),
                version: l.version,
                error: l.error,
            })
            .collect()
    }
    #[cfg(not(feature = "cuda"))]
    Vec::new()
}

pub fn info(args: &InfoArgs) -> crate::Result<InfoReport> {
    let cpus = hetla_clusters::available_cpus();
    let topology = Topology::detect()?;
    let lists = |level| -> Vec<String> {
        topology
            .level(level)
            .iter()
            .map(|s| hetla_clusters::format_cpu_list(s))
            .collect()
    };
    use hetla_clusters::Level;
    let found = hetla_clusters::gpus();
    let gpus = args.gpus.select(found)?;
    let emulated_gpus = match args.gpus {
        GpuSelection::Emulated(k) => k,
        _ => 0,
    };
    // As a platform does: one core per GPU host thread, taken before clusters are formed.
    let left =
        hetla_runtime::reserve_host_cores(&topology, &args.clusters, gpus.len() + emulated_gpus)
            .left;
    let clusters = args.clusters.resolve(&left)?;
    Ok(InfoReport {
        gpus,
        emulated_gpus,
        cpus: cpus.len(),
        cpu_list: hetla_clusters::format_cpu_list(&cpus),
        online_cpu_list: hetla_clusters::online_cpus().map(|c| hetla_clusters::format_cpu_list(&c)),
        topology: TopologyReport {
            source: format!("{:?}", topology.source()).to_lowercase(),
            packages: lists(Level::Package),
            numa_nodes: lists(Level::Numa),
            l3: lists(Level::L3),
            l2: lists(Level::L2),
            cores: lists(Level::Core),
        },
        clusters: ClustersReport {
            spec: args.clusters.to_string(),
            cpusets: clusters
                .iter()
                .map(|c| hetla_clusters::format_cpu_list(c))
                .collect(),
        },
        backends: Backend::available().iter().map(|b| b.to_string()).collect(),
        cuda: cuda_report(),
    })
}

pub fn print_info(r: &InfoReport) {
    println!("CPUs this process may use: {} ({})", r.cpus, r.cpu_list);
    if let Some(online) = &r.online_cpu_list {
        println!("CPUs online:               {online}");
    }
    let t = &r.topology;
    println!("topology (from {}):", t.source);
    for (name, sets) in [
        ("packages", &t.packages),
        ("NUMA nodes", &t.numa_nodes),
        ("L3 caches", &t.l3),
        ("L2 caches", &t.l2),
        ("cores", &t.cores),
    ] {
        println!("  {name:<11} {:3}: {}", sets.len(), sets.join(" | "));
    }
    println!(
        "clusters {}: {} cluster(s): [{}]",
        r.clusters.spec,
        r.clusters.cpusets.len(),
        r.clusters.cpusets.join("] [")
    );
    println!("kernel backends built in:  {}", r.backends.join(", "));
    if r.gpus.is_empty() && r.emulated_gpus == 0 {
        let why = if hetla_clusters::driver_present() {
            "none selected, or the driver reports none"
        } else {
            "no CUDA driver library (libcuda) on this machine"
        };
        println!("GPUs:                      none ({why})");
    }
    for g in &r.gpus {
        println!(
            "GPU {}: {} ({:.1} GiB, {:.1} GiB free)",
            g.index,
            g.name,
            g.memory_bytes as f64 / (1u64 << 30) as f64,
            g.free_bytes as f64 / (1u64 << 30) as f64
        );
    }
    if r.emulated_gpus > 0 {
        println!("emulated devices:          {}", r.emulated_gpus);
    }
    if r.cuda.is_empty() {
        println!("CUDA libraries:            none (built without the `cuda` feature)");
    } else {
        println!("CUDA libraries:");
    }
    for l in &r.cuda {
        match (&l.path, &l.error) {
            (Some(path), _) => println!(
                "  {:<11} {:<9} {path}",
                l.name,
                l.version.as_deref().unwrap_or("")
            ),
            (None, Some(why)) => println!("  {:<11} not loaded: {why}", l.name),
            (None, None) => println!("  {:<11} not loaded", l.name),
        }
    }
}
