//! The GPU nodes' recorded rows beside their models' simulations of the same runs: writes
//! docs/gpu-model.md (each row of the H200 node measured, simulated on the `h200` model's staged
//! data path the row ran, the error, and the prediction for copies straight from page-locked tiles;
//! then each page-locked or resident row of the H100 node on the `h100` model, whose rates are all
//! measured) and prints it.
//!
//! ```text
//! cargo run --release -p hetla-lab --example h200
//! ```
//!
//! Run from the repository's root, whose docs/ it rewrites; `-- --out FILE` writes the page
//! elsewhere (`common::root_and_output`).
//!
//! The rows come from docs/gpu-runs/2026-11-26-h200-rows.jsonl as the leases wrote them (nothing is
//! copied by hand): every row with a report, its command's options read back from its `args`. A
//! Cholesky row is compared by the runtime's makespan (the time from its first task to its last
//! write-back; the row's `seconds` also count the checks and layout copies outside the runtime), a
//! GEMM row by its `seconds` (its report has no makespan).

mod common;

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

/// The H100 node's rows (leases 3 and 4) with their lease number.
const H100_ROWS: [(&str, u64); 2] = [
    ("docs/gpu-runs/2026-11-26-h100-rows.jsonl", 3),
    ("docs/gpu-runs/2026-11-27-h100-rows.jsonl", 4),
];

/// Reads a rows file of the workspace.
fn read_rows(root: &Path, file: &str) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(root.join(file)).map_err(|e| hetla_lab::Error::InvalidOption {
            option: "rows",
            reason: format!("{file}: {e}"),
        })?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<Value>(line).map_err(|e| hetla_lab::Error::InvalidOption {
                option: "rows",
                reason: format!("{file} line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// A Cholesky row of the H100 node simulated on the `h100` preset the way it ran (page-locked or
/// resident; a staged row has no packing rate to be simulated with): (row, measured ms, modelled ms
/// or why not).
fn h100_row(model: &PlatformModel, row: &Value, lease: u64) -> Option<(String, f64, String)> {
    let args = row["args"].as_str().unwrap_or_default();
    let label = row["label"].as_str().unwrap_or_default();
    let report = row.get("report")?;
    let measured = report["makespan_ms"].as_f64()?;
    if !label.starts_with("real-") || !args.starts_with("cholesky") {
        return None;
    }
    let name = format!(
        "lease {lease}, `{label}`: `{}`",
        (args.split_whitespace())
            .take_while(|w| !w.starts_with("--compare") && !w.starts_with("--repeat"))
            .filter(|w| *w != "--gpus" && *w != "all")
            .collect::<Vec<_>>()
            .join(" ")
    );
    let resident = args.contains("--resident");
    if !resident && option(args, "--host-memory") != Some("page-locked") {
        return Some((name, measured, "staged: no packing rate measured |".into()));
    }
    let spec: ClusterSpec = option(args, "--clusters").unwrap_or("none").parse().ok()?;
    let n = report["n"].as_u64()? as usize;
    let tile = report["tile"].as_u64()? as usize;
    let modelled = (|| -> Result<f64> {
        let plan = Plan::new(hetla::Algorithm::Cholesky { n }, tile, Precision::D)?;
        // The leases' runs locked their memory before the clock.
        let machine = Modelled::new(model, &spec, 1)
            .host_memory(HostMemory::PageLocked)
            .locked_before_the_run();
        let mut options = SimOptions::default();
        options.run.scheduler = SchedulerKind::Mct;
        if resident {
            options.run.placement = plan.placed_on(hetla_runtime::MemoryNode(1));
            options.run.write_back = hetla_runtime::WriteBack::Resident;
        }
        Ok(hetla_lab::simulate(&plan, &machine, &options)?
            .0
            .makespan_ms)
    })();
    let modelled = match modelled {
        Ok(ms) => {
            let error = ms / measured - 1.0;
            let verdict = if error.abs() <= WITHIN { "" } else { " **no**" };
            format!("{ms:.1} | {:+.1}%{verdict}", 100.0 * error)
        }
        // The cores' kernels were timed at tiles up to 2048 only.
        Err(e) => format!("not modelled: {e} |"),
    };
    Some((name, measured, modelled))
}

/// The H100 node's section of the page: every page-locked and resident Cholesky row of leases 3 and
/// 4 on the `h100` preset, whose rates are all measured.
fn h100_section(root: &Path) -> Result<String> {
    let model = PlatformModel::preset("h100").expect("preset");
    let mut lines = Vec::new();
    for (file, lease) in H100_ROWS {
        for row in read_rows(root, file)? {
            lines.extend(h100_row(&model, &row, lease));
        }
    }
    let compared = lines.iter().filter(|l| l.2.contains('%')).count();
    let met = (lines.iter())
        .filter(|l| l.2.contains('%') && !l.2.contains("**no**"))
        .count();
    let mut out = format!(
        "\n## The H100 node (leases 3 and 4) on the `h100` preset\n\n\
         Every Cholesky row of [gpu-runs/2026-11-26-h100-rows.jsonl](gpu-runs/2026-11-26-h100-rows.jsonl) \
         and [gpu-runs/2026-11-27-h100-rows.jsonl](gpu-runs/2026-11-27-h100-rows.jsonl), simulated the \
         way it ran (`hetla simulate --platform h100 [--host-memory page-locked | --resident]`), \
         the runtime's makespans compared. Every rate of the preset is measured in those rows and \
         traces, nothing fitted (`hetla info`'s description of it); the staged rows need a \
         packing rate no lease measured. {met} of the {compared} rows compared within {:.0}%.\n\n\
         | row | measured (ms) | model (ms) | error |\n|---|---|---|---|\n",
        WITHIN * 100.0
    );
    for (row, measured, modelled) in &lines {
        out += &format!("| {row} | {measured:.1} | {modelled} |\n");
    }
    out += "\n**What the model misses** (read from lease 3's trace of `real-8192-locked`, \
            docs/gpu-runs/2026-11-26-h100-lease3/trace-8192-locked.json): the GPU was busy 11.4 \
            ms of the 24.2. Its first POTRF began 2.06 ms after the start, although its 32 MiB \
            upload takes 0.63 ms at the link's rate; then it sat idle in 12 gaps of 0.16 to 2.1 \
            ms between a kernel and the next (median 0.66 ms), 8 of which ended within 0.7 ms \
            after the download of a final tile ended, as if write-backs held the next kernel \
            back. The resident rows (no copy in the timed run) miss by 3.3, 2.1 and 6.7 ms for \
            20, 20 and 120 tasks. None of it is a rate: the first call's set-up, a per-launch \
            latency of the device's worker and whatever orders a kernel after a download are \
            what the next lease must time apart: `hetla calibrate --gpus all --output` now times \
            a kernel's launch beyond the kernel (`launch_us`, which the simulator adds before \
            each GPU task), the copies from pageable memory (`pageable`) and within the GPU \
            (`device_copies`) and the page-locking rate (`lock_gb_per_s`, with which a \
            page-locked run is simulated locking its matrix beside the workers), beside the \
            link's latency and rate and the cores' packing rates it measured already.\n";
    Ok(out)
}

fn main() -> Result<()> {
    let (root, path) = common::root_and_output("docs/gpu-model.md", true)?;
    let root = root.as_path();
    let model = PlatformModel::preset("h200").expect("preset");
    let rows = read_rows(root, ROWS)?;
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
    out += &h100_section(root)?;
    print!("{out}");
    for (cores, _, found, preset) in &rates {
        assert!(
            (found / preset - 1.0).abs() < 0.01,
            "the preset's rate on {cores} cores is {preset}, its reference row gives {found}"
        );
    }
    hetla_runtime::write_atomic(&path, out.as_bytes())?;
    eprintln!("written to {}", path.display());
    Ok(())
}
