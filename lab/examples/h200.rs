//! The GPU node's recorded rows beside the `h200` model's simulations of the same runs: writes
//! docs/gpu-model.md (each row measured, simulated on the staged data path the row ran, the error,
//! and the prediction for copies straight from page-locked tiles) and prints it.
//!
//! ```text
//! cargo run --release -p hetla-lab --example h200
//! ```
//!
//! The rows come from docs/gpu-runs/2026-11-26-h200-rows.jsonl as the leases wrote them (nothing is
//! copied by hand): every row with a report, its command's options read back from its `args`. A
//! Cholesky row is compared by the runtime's makespan (the time from its first task to its last
//! write-back; the row's `seconds` also count the checks and layout copies outside the runtime), a
//! GEMM row by its `seconds` (its report has no makespan).

use std::path::Path;

use hetla::gemm::Placement;
use hetla::{ClusterSpec, Gemm, Plan, Precision};
use hetla_lab::{HostMemory, Modelled, PlatformModel, Result};
use hetla_runtime::{SchedulerKind, SimOptions};
use serde_json::Value;

/// The rows' file, in the workspace's docs.
const ROWS: &str = "docs/gpu-runs/2026-11-26-h200-rows.jsonl";

/// How close a simulated row must be to the recorded one.
const WITHIN: f64 = 0.10;

/// The value of option `--name` in a row's command line.
fn option<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    let mut words = args.split_whitespace();
    words.find(|w| *w == name)?;
    words.next()
}

fn number(args: &str, name: &str) -> Option<usize> {
    option(args, name)?.parse().ok()
}

/// How many cores the row's GPU packed its copies on: the count a `copy-cores-N` row set; the first
/// lease's rule for the rest of its rows (the GPU's host core and the cores no cluster used: one
/// beside 1x15 and 3x5, all 16 without a cluster); the rule of today's executor for the second
/// lease (`None`: [`hetla_runtime::copy_cores`], the same code).
fn copy_cores(row: &Value, spec: &ClusterSpec) -> Option<usize> {
    let label = row["label"].as_str().unwrap_or_default();
    if let Some(count) = label
        .strip_prefix("copy-cores-")
        .and_then(|rest| rest.split('-').next())
        .and_then(|n| n.parse().ok())
    {
        return Some(count);
    }
    let first_lease = row["lease"].as_u64() == Some(1);
    (first_lease && *spec != ClusterSpec::None).then_some(1)
}

/// The rows each packing rate of the preset is taken from (`H200_STAGING`): (cores, label, lease,
/// clusters).
const REFERENCES: [(usize, &str, u64, &str); 3] = [
    (1, "copy-cores-1-8192", 2, "1x15"),
    (8, "mixed-8192", 2, "3x5"),
    (16, "mixed-8192", 2, "none"),
];

/// The packing cores whose rate `row` is the reference of (`None`: it checks the model).
fn reference_of(row: &Value) -> Option<usize> {
    let args = row["args"].as_str().unwrap_or_default();
    let clusters = option(args, "--clusters").unwrap_or("none");
    REFERENCES
        .iter()
        .find(|&&(_, label, lease, spec)| {
            row["label"] == label && row["lease"].as_u64() == Some(lease) && clusters == spec
        })
        .map(|&(cores, ..)| cores)
}

/// The packing rate at which the model reproduces `row`'s makespan exactly (bisection: the
/// simulated makespan falls as the rate grows), every other rate of `model` as it is.
fn rate_for(model: &PlatformModel, row: &Value, cores: usize) -> Result<f64> {
    let measured = row["report"]["makespan_ms"].as_f64().unwrap_or(f64::NAN);
    let (mut low, mut high) = (0.5, 200.0);
    for _ in 0..50 {
        let mid = (low + high) / 2.0;
        let mut trial = model.clone();
        if let Some(gpu) = &mut trial.gpu {
            for p in gpu.staging.iter_mut().filter(|p| p.cores == cores) {
                p.gb_per_s = mid;
            }
        }
        let simulated = simulate_row(&trial, row)?.map_or(f64::NAN, |l| l.staged_ms);
        if simulated > measured {
            low = mid;
        } else {
            high = mid;
        }
    }
    Ok((low + high) / 2.0)
}

/// One row of the table.
struct Line {
    row: String,
    cores: String,
    measured_ms: f64,
    staged_ms: f64,
    direct_ms: f64,
}

impl Line {
    fn error(&self) -> f64 {
        self.staged_ms / self.measured_ms - 1.0
    }
}

fn simulate_row(model: &PlatformModel, row: &Value) -> Result<Option<Line>> {
    let Some(report) = row.get("report") else {
        return Ok(None);
    };
    let args = row["args"].as_str().unwrap_or_default();
    let spec: ClusterSpec = option(args, "--clusters")
        .unwrap_or("none")
        .parse()
        .map_err(|e| hetla_lab::Error::InvalidOption {
            option: "clusters",
            reason: format!("{e}"),
        })?;
    let cores = copy_cores(row, &spec);
    let options = SimOptions::default();
    let machine = |path| {
        Modelled::new(model, &spec, 1)
            .copy_cores(cores)
            .host_memory(path)
    };
    let command = args.split_whitespace().next().unwrap_or_default();
    let (measured_ms, staged_ms, direct_ms) = match command {
        "cholesky" => {
            let n = report["n"].as_u64().unwrap_or_default() as usize;
            let tile = report["tile"].as_u64().unwrap_or_default() as usize;
            let plan = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D)?;
            let mut options = options.clone();
            options.run.scheduler = SchedulerKind::Mct;
            let run = |path| -> Result<f64> {
                Ok(hetla_lab::simulate(&plan, &machine(path), &options)?
                    .0
                    .makespan_ms)
            };
            (
                report["makespan_ms"].as_f64().unwrap_or(f64::NAN),
                run(HostMemory::Staged)?,
                run(HostMemory::PageLocked)?,
            )
        }
        "gemm" => {
            let size = |name| number(args, name).unwrap_or_default();
            let (m, n, k) = (size("--m"), size("--n"), size("--k"));
            let tile = report["tile"].as_u64().unwrap_or(4096) as usize;
            let mut gemm = Gemm::new().tile(tile);
            if option(args, "--placement").is_some() {
                let gpu = Placement::Device(0);
                gemm = gemm.placement(gpu, gpu, gpu);
            }
            let run = |path| -> Result<f64> {
                let (r, _) =
                    hetla_lab::simulate_gemm_traced(&gemm, &machine(path), (m, n, k), &options)?;
                Ok(r.seconds * 1e3)
            };
            (
                report["seconds"].as_f64().unwrap_or(f64::NAN) * 1e3,
                run(HostMemory::Staged)?,
                run(HostMemory::PageLocked)?,
            )
        }
        _ => return Ok(None),
    };
    let short: Vec<&str> = args
        .split_whitespace()
        .take_while(|w| !w.starts_with("--gantt") && !w.starts_with("--compare"))
        .filter(|w| *w != "--gpus" && *w != "all")
        .collect();
    Ok(Some(Line {
        row: format!(
            "lease {}, `{}`: `{}`",
            row["lease"],
            row["label"].as_str().unwrap_or_default(),
            short.join(" ")
        ),
        cores: cores.map_or("rule".into(), |c| c.to_string()),
        measured_ms,
        staged_ms,
        direct_ms,
    }))
}

fn main() -> Result<()> {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = lab.parent().unwrap_or(lab);
    let text =
        std::fs::read_to_string(root.join(ROWS)).map_err(|e| hetla_lab::Error::InvalidOption {
            option: "rows",
            reason: format!("{ROWS}: {e}"),
        })?;
    let model = PlatformModel::preset("h200").expect("preset");
    let rows = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<Value>(line).map_err(|e| hetla_lab::Error::InvalidOption {
                option: "rows",
                reason: format!("{ROWS} line {}: {e}", i + 1),
            })
        })
        .collect::<Result<Vec<Value>>>()?;
    // Each packing rate, found again from its reference row: the preset's must be it.
    let mut rates = Vec::new();
    for (cores, label, ..) in REFERENCES {
        let row = rows
            .iter()
            .find(|r| reference_of(r) == Some(cores))
            .ok_or_else(|| hetla_lab::Error::InvalidOption {
                option: "rows",
                reason: format!("no reference row {label} for {cores} cores"),
            })?;
        let found = rate_for(&model, row, cores)?;
        let preset = model.gpu.as_ref().and_then(|g| g.staging_gb_per_s(cores));
        let preset = preset.unwrap_or(f64::NAN);
        eprintln!("{cores:>2} cores: {found:.3} GB/s from {label} (preset {preset:.3})");
        rates.push((cores, label, found, preset));
    }
    let mut lines = Vec::new();
    let mut references = 0;
    for row in &rows {
        if let Some(mut line) = simulate_row(&model, row)? {
            if reference_of(row).is_some() {
                line.row += " (reference)";
                references += 1;
            }
            lines.push(line);
        }
    }
    let checked: Vec<&Line> = lines
        .iter()
        .filter(|l| !l.row.ends_with("(reference)"))
        .collect();
    let met = checked.iter().filter(|l| l.error().abs() <= WITHIN).count();
    let mut out = String::from(
        "# The GPU node's rows beside its model\n\n\
         Made by `cargo run --release -p hetla-lab --example h200`: every row of \
         [gpu-runs/2026-11-26-h200-rows.jsonl](gpu-runs/2026-11-26-h200-rows.jsonl) with a \
         report, simulated on the `h200` preset (`hetla simulate --platform h200`; its rates \
         and their sources in `hetla info`'s and the preset's description) with the row's \
         clusters, tile and packing cores. Cholesky rows compare the runtime's makespan, GEMM \
         rows the call's seconds. \"staged\" is how the rows copied (each tile packed by CPU \
         cores into page-locked staging, `--host-memory staged`); \"page-locked\" the model's \
         prediction for copies straight from page-locked tiles (`--host-memory page-locked`, no \
         packing), which no GPU has run yet.\n\n",
    );
    out += "The packing rates no lease timed alone are each taken from one reference row, as \
            the rate at which the model reproduces that row's makespan (bisection, rerun by \
            this example against the preset's constants):";
    for (cores, label, rate, _) in &rates {
        out += &format!(" {cores} core(s) {rate:.2} GB/s (`{label}`);");
    }
    out += " every other rate is measured in the rows or published (the preset's description).\n\n";
    out += &format!(
        "{met} of the {} rows that are not a reference within {:.0}% ({references} reference rows \
         reproduced by construction).\n\n",
        checked.len(),
        WITHIN * 100.0
    );
    out += "| row | packing cores | measured (ms) | staged model (ms) | error | page-locked model (ms) |\n\
            |---|---|---|---|---|---|\n";
    for l in &lines {
        out += &format!(
            "| {} | {} | {:.1} | {:.1} | {:+.1}%{} | {:.1} |\n",
            l.row,
            l.cores,
            l.measured_ms,
            l.staged_ms,
            100.0 * l.error(),
            if l.error().abs() <= WITHIN {
                ""
            } else {
                " **no**"
            },
            l.direct_ms
        );
    }
    print!("{out}");
    for (cores, _, found, preset) in &rates {
        assert!(
            (found / preset - 1.0).abs() < 0.01,
            "the preset's rate on {cores} cores is {preset}, its reference row gives {found}"
        );
    }
    let path = root.join("docs/gpu-model.md");
    hetla_runtime::write_atomic(&path, out.as_bytes())?;
    eprintln!("written to {}", path.display());
    Ok(())
}
