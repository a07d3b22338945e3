//! Gantt charts of traces: an SVG, one row per worker, a colour per kernel (plotters).

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
    for (i, op) in Op::KINDS.into_iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let bars = trace.tasks.iter().filter(|e| e.op.same_kind(op)).map(|e| {
            // Worker 0 on the top row.
            let y = (rows - 1 - e.worker.0) as f64;
            Rectangle::new(
                [(e.start * 1e3, y + 0.1), (e.end * 1e3, y + 0.9)],
                colour.filled(),
            )
        });
        let bars: Vec<_> = bars.collect();
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

    #[test]
    fn a_run_draws_one_bar_per_task_in_an_svg() {
        let mut l = random_spd(300, 2);
        let spec = ClusterSpec::Grid { count: 1, size: 1 };
        let platform = Platform::with_store(&spec, Backend::Faer, ModelStore::None);
        let trace = Cholesky::new()
            .platform(std::sync::Arc::new(platform.unwrap()))
            .tile(60)
            .factor_in_place_traced(l.as_mut())
            .unwrap();
        let svg = std::env::temp_dir().join(format!("hetla-gantt-{}.svg", std::process::id()));
        trace.write_gantt_svg(&svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        std::fs::remove_file(&svg).ok();
        assert!(text.contains("<svg") && text.contains("<rect"));
        assert!(text.contains("gemm"));
    }
}
