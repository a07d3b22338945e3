//! `hetla bound`: lower bounds on the Cholesky (or LU) makespan on a modelled platform.

use super::args::{parse_positive, parse_spec};
use super::output::print_bounds;
use clap::Args;
use hetla::{BoundReport, ClusterSpec};
use hetla_lab::{Modelled, PlatformModel};
use serde::Serialize;

#[derive(Args)]
pub struct BoundArgs {
    /// A preset (sirocco) or a TOML platform file.
    #[arg(long)]
    pub platform: String,
    /// CPU clusters: NxM ("2x10", "20x1"), a level (package, core...) or lists, resolved on the
    /// platform's cores minus one per GPU.
    #[arg(long, default_value = "auto", value_parser = parse_spec)]
    pub clusters: ClusterSpec,
    /// Number of GPUs used.
    #[arg(long, default_value_t = 0)]
    pub gpus: usize,
    /// Order of the matrix.
    #[arg(long, value_parser = parse_positive)]
    pub n: usize,
    /// Tile size (one the platform has rates for).
    #[arg(long, value_parser = parse_positive)]
    pub tile: usize,
    /// The precision of the kernels: s, d, c or z (the platform needs rates in it).
    #[arg(long, default_value = "d")]
    pub precision: hetla::Precision,
    /// Rows of the matrix, for QR (its columns are --n; default: square). Its tree: binary for a
    /// tall matrix of one tile column, else flat.
    #[arg(long, value_parser = super::args::parse_positive)]
    pub m: Option<usize>,
    /// The factorisation (inverse: its own graph, 2 n^3/3 flops, without the Cholesky before it).
    #[arg(long, default_value_t = hetla::Family::Cholesky, value_parser = super::args::family())]
    pub factorization: hetla::Family,
    /// Compute streams of each GPU: how many kernels it runs at once, sharing its rate (as
    /// `hetla simulate --streams`; a kernel then takes its share of the GPU in the area bound). 1
    /// to 16.
    #[arg(long, default_value_t = 1, value_parser = hetla_runtime::parse_streams)]
    pub streams: usize,
    #[command(flatten)]
    pub tail: super::args::TailArgs,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
pub struct BoundCmdReport {
    /// The factorisation (absent for Cholesky, as the first reports had none).
    #[serde(skip_serializing_if = "is_cholesky")]
    pub factorization: hetla::Family,
    /// The bounded plan's title ("Inverse" for the inverse's graph alone).
    #[serde(skip)]
    pub title: &'static str,
    pub platform: String,
    pub clusters: String,
    pub gpus: usize,
    pub n: usize,
    pub tile: usize,
    /// The tail of smaller tiles (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<hetla::Tail>,
    pub precision: hetla::Precision,
    /// Each GPU's compute streams (the key is absent for one, as reports had none before).
    #[serde(skip_serializing_if = "is_one")]
    pub compute_streams: usize,
    #[serde(flatten)]
    pub bounds: BoundReport,
}

pub fn bound_cmd(args: &BoundArgs) -> crate::Result<BoundCmdReport> {
    let model = PlatformModel::resolve(&args.platform)?;
    let machine = Modelled {
        compute_streams: args.streams,
        ..Modelled::new(&model, &args.clusters, args.gpus).precision(args.precision)
    };
    let shape = (args.m, args.n, args.tile);
    let plan = (args.factorization).modelled_plan((None, args.gpus), shape, args.precision)?;
    let plan = args.tail.apply(plan)?;
    let bounds = hetla_lab::bounds(&plan, &machine)?;
    Ok(BoundCmdReport {
        factorization: args.factorization,
        title: plan.algorithm().title_and_flops().0,
        platform: model.name,
        clusters: args.clusters.to_string(),
        gpus: args.gpus,
        n: args.n,
        tile: args.tile,
        tail: plan.tail(),
        precision: args.precision,
        compute_streams: args.streams,
        bounds,
    })
}

pub fn print_bound(r: &BoundCmdReport) {
    let streams = match r.compute_streams {
        1 => String::new(),
        s => format!(" of {s} compute streams"),
    };
    let heading = super::output::modelled_heading(
        (r.n, r.tile, r.tail),
        (r.precision, &r.platform, &r.clusters, r.gpus),
    );
    println!("hetla bound: {} {heading}{streams}", r.title);
    print_bounds(&r.bounds);
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

fn is_cholesky(f: &hetla::Family) -> bool {
    *f == hetla::Family::Cholesky
}
