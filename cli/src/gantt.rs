//! Gantt charts of traces: an SVG, one row per worker, a colour per kernel (plotters). A cluster
//! whose kernels' pieces the trace holds has one sub-row per team thread inside its row: its tasks
//! drawn pale behind, each piece solid on its thread's sub-row, so a thread that idles while
//! another runs two pieces shows.

use std::path::Path;

use plotters::prelude::*;

use crate::{Error, Result};
use hetla::Op;
use hetla_runtime::{Trace, write_atomic};

/// Writing a trace as an SVG Gantt chart.
pub trait Gantt {
    /// Writes an SVG Gantt chart: time (ms) across, one row per worker, a colour per kernel.
    fn write_gantt_svg(&self, path: &Path) -> Result<()>;
}

impl Gantt for Trace {
    fn write_gantt_svg(&self, path: &Path) -> Result<()> {
        let mut svg = String::new();
        draw_gantt(self, &mut svg).map_err(|e| Error::output(path, e))?;
        Ok(write_atomic(path, svg.as_bytes())?)
    }
}

fn draw_gantt(
    trace: &Trace,
    svg: &mut String,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let rows = trace.workers.len().max(1);
    let height = 120 + 40 * rows as u32;
    let root = SVGBackend::with_string(svg, (1200, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let span_ms = (trace.makespan * 1e3).max(1e-3);
    let mut chart = ChartBuilder::on(&root)
        .caption("hetla run: tasks per worker", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..span_ms, 0.0..rows as f64)?;
    let names: Vec<String> = trace.workers.iter().map(|w| w.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("time (ms)")
        .y_labels(rows * 2 + 1)
        .y_label_formatter(&|y: &f64| {
            let row = y.floor() as usize;
            let centred = (y - y.floor() - 0.5).abs() < 1e-9;
            match (centred, rows.checked_sub(row + 1)) {
                (true, Some(w)) => names.get(w).cloned().unwrap_or_default(),
                _ => String::new(),
            }
        })
        .draw()?;
    // Team threads per worker that has pieces (0: drawn as one row).
    let threads: Vec<usize> = (0..trace.workers.len())
        .map(|w| {
            trace
                .pieces
                .iter()
                .filter(|p| p.worker.0 == w)
                .map(|p| p.thread + 1)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let op_of: std::collections::HashMap<_, _> =
        trace.tasks.iter().map(|e| (e.task, e.op)).collect();
    for (i, op) in Op::KINDS.into_iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let bars = trace.tasks.iter().filter(|e| e.op.same_kind(op)).map(|e| {
            // Worker 0 on the top row; a split worker's tasks pale behind its pieces.
            let y = (rows - 1 - e.worker.0) as f64;
            let style = if threads[e.worker.0] > 0 {
                colour.mix(0.3).filled()
            } else {
                colour.filled()
            };
            Rectangle::new([(e.start * 1e3, y + 0.1), (e.end * 1e3, y + 0.9)], style)
        });
        let pieces = trace
            .pieces
            .iter()
            .filter(|p| op_of.get(&p.task).is_some_and(|o| o.same_kind(op)))
            .map(|p| {
                // Thread 0 on the top sub-row of its worker's row.
                let k = threads[p.worker.0] as f64;
                let top = (rows - p.worker.0) as f64 - 0.1 - 0.8 * p.thread as f64 / k;
                Rectangle::new(
                    [(p.start * 1e3, top - 0.8 / k * 0.9), (p.end * 1e3, top)],
                    colour.filled(),
                )
            });
        let bars: Vec<_> = bars.chain(pieces).collect();
        if bars.is_empty() {
            continue;
        }
        chart
            .draw_series(bars)?
            .label(op.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetla::{Backend, Cholesky, ClusterSpec, Platform, matgen::random_spd};
    use hetla_runtime::ModelStore;

    /// The trace of a Cholesky factorisation of order `n` in tiles of `tile` on one cluster of
    /// `cores` cores.
    fn traced(n: usize, tile: usize, cores: usize) -> Trace {
        let mut l = random_spd(n, 2);
        let spec = ClusterSpec::Grid {
            count: 1,
            size: cores,
        };
        let platform = Platform::with_store(&spec, Backend::Faer, ModelStore::None);
        Cholesky::new()
            .platform(std::sync::Arc::new(platform.unwrap()))
            .tile(tile)
            .factor_in_place_traced(l.as_mut())
            .unwrap()
    }

    #[test]
    fn a_run_draws_one_bar_per_task_in_an_svg() {
        let trace = traced(300, 60, 1);
        let svg = std::env::temp_dir().join(format!("hetla-gantt-{}.svg", std::process::id()));
        trace.write_gantt_svg(&svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        std::fs::remove_file(&svg).ok();
        assert!(text.contains("<svg") && text.contains("<rect"));
        assert!(text.contains("gemm"));
    }

    #[test]
    fn a_clusters_pieces_are_drawn_on_sub_rows() {
        let cores = hetla::Topology::detect().unwrap().cores().len();
        if cores < 2 {
            return;
        }
        let trace = traced(1024, 512, cores);
        assert!(!trace.pieces.is_empty());
        let mut svg = String::new();
        draw_gantt(&trace, &mut svg).unwrap();
        // A bar per task and one per piece (plus the legend's swatches and the frame).
        let rects = svg.matches("<rect").count();
        assert!(rects >= trace.tasks.len() + trace.pieces.len(), "{rects}");
    }
}
