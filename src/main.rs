//! The `hetla` command line: factor generated SPD matrices and report what it cost.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use hetla::{Backend, Cholesky, Par, check, matgen};
use serde::Serialize;

/// Tiled Cholesky on a heterogeneous node: factor, time and check.
#[derive(Parser)]
#[command(name = "hetla", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Factor a generated random SPD matrix; print seconds, Gflop/s and the scaled residual.
    Cholesky(CholeskyArgs),
    /// Show the CPUs this process may use and the kernel backends built in.
    Info(InfoArgs),
}

#[derive(Args)]
struct CholeskyArgs {
    /// Order of the matrix.
    #[arg(long, default_value_t = 4096)]
    n: usize,
    /// Tile size (default: chosen from n and the backend, see `hetla::default_tile_size`).
    #[arg(long)]
    tile: Option<usize>,
    /// Seed of the matrix generator (`hetla::matgen::random_spd`).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Kernel backend: faer or openblas (the latter needs the `openblas` feature).
    #[arg(long, default_value = "faer", value_parser = parse_backend)]
    backend: Backend,
    /// Threads per kernel (default: all CPUs this process may use).
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse::<Backend>().map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct CholeskyReport {
    n: usize,
    tile: usize,
    backend: String,
    threads: usize,
    tasks: usize,
    seconds: f64,
    gflops: f64,
    residual: f64,
    residual_ok: bool,
}

#[derive(Serialize)]
struct InfoReport {
    cpus: usize,
    cpu_list: String,
    online_cpu_list: Option<String>,
    backends: Vec<String>,
}

fn cholesky(args: &CholeskyArgs) -> hetla::Result<CholeskyReport> {
    let threads = args
        .threads
        .unwrap_or_else(|| hetla_clusters::available_cpus().len());
    let options = Cholesky::new().backend(args.backend).threads(threads);
    let options = match args.tile {
        Some(b) => options.tile(b),
        None => options,
    };
    let tile = options.tile_size_for(args.n);
    let a = matgen::random_spd(args.n, args.seed);
    let mut factor = a.clone();
    let start = Instant::now();
    options.factor_in_place(factor.as_mut())?;
    let seconds = start.elapsed().as_secs_f64();
    let flops = (args.n as f64).powi(3) / 3.0;
    let par = Par::rayon(threads);
    let residual = check::cholesky_residual(a.as_ref(), factor.as_ref(), par);
    let tasks =
        hetla::factorizations::cholesky(&hetla::factorizations::Tiling::square(args.n, tile)?)?
            .len();
    Ok(CholeskyReport {
        n: args.n,
        tile,
        backend: args.backend.to_string(),
        threads,
        tasks,
        seconds,
        gflops: flops / seconds / 1e9,
        residual,
        residual_ok: residual < check::RESIDUAL_THRESHOLD,
    })
}

fn print_cholesky(r: &CholeskyReport) {
    println!(
        "hetla cholesky: n = {}, tile = {}, {} tasks",
        r.n, r.tile, r.tasks
    );
    println!("  backend   {} ({} threads)", r.backend, r.threads);
    println!("  time      {:.4} s", r.seconds);
    println!("  rate      {:.2} Gflop/s (n^3/3 flops)", r.gflops);
    println!(
        "  residual  {:.3e}  ||A - L L^T||_1 / (n ||A||_1 eps), {} (threshold {})",
        r.residual,
        if r.residual_ok { "ok" } else { "TOO LARGE" },
        check::RESIDUAL_THRESHOLD
    );
}

fn info() -> InfoReport {
    let cpus = hetla_clusters::available_cpus();
    InfoReport {
        cpus: cpus.len(),
        cpu_list: hetla_clusters::format_cpu_list(&cpus),
        online_cpu_list: hetla_clusters::online_cpus().map(|c| hetla_clusters::format_cpu_list(&c)),
        backends: Backend::available().iter().map(|b| b.to_string()).collect(),
    }
}

fn print_info(r: &InfoReport) {
    println!("CPUs this process may use: {} ({})", r.cpus, r.cpu_list);
    if let Some(online) = &r.online_cpu_list {
        println!("CPUs online:               {online}");
    }
    println!("kernel backends built in:  {}", r.backends.join(", "));
}

fn emit<T: Serialize>(json: bool, report: &T, human: impl Fn(&T)) {
    if json {
        println!(
            "{}",
            serde_json::to_string(report).expect("reports serialise")
        );
    } else {
        human(report);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Cholesky(args) => cholesky(args).map(|r| emit(args.json, &r, print_cholesky)),
        Command::Info(args) => {
            emit(args.json, &info(), print_info);
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
