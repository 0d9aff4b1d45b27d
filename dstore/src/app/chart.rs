//! The reliability diagram that `dstore calibration --format svg` prints
//! and the web view's calibration page shows.

use decision_store::calibration::{Bin, Calibration};

use super::text::figure;

/// The reliability diagram as SVG: a bar per non-empty bin up to its share
/// held, a point at (mean confidence, share held), the diagonal of perfect
/// calibration, and each bin's count above its bar.
pub fn svg(c: &Calibration) -> Result<String, Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let m = &c.overall;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (640, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let caption = format!("Reliability: {} decisions, Brier {}, ECE {}", m.scored, figure(m.brier), figure(m.ece));
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..1f64, 0f64..1.08f64)?;
        chart
            .configure_mesh()
            .x_labels(11)
            .y_labels(11)
            .x_desc("confidence")
            .y_desc("share held")
            .disable_mesh()
            .draw()?;
        let bar = RGBColor(70, 130, 180);
        let full = |b: &&Bin| b.count > 0;
        chart.draw_series(m.bins.iter().filter(full).map(|b| {
            let held = b.share_held.unwrap_or(0.0);
            Rectangle::new([(b.lower + 0.005, 0.0), (b.upper - 0.005, held)], bar.mix(0.35).filled())
        }))?;
        chart
            .draw_series(LineSeries::new([(0.0, 0.0), (1.0, 1.0)], BLACK.mix(0.6).stroke_width(1)))?
            .label("perfect calibration")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK));
        chart
            .draw_series(m.bins.iter().filter(full).map(|b| {
                let at = (b.mean_confidence.unwrap_or(0.0), b.share_held.unwrap_or(0.0));
                Circle::new(at, 4, RED.filled())
            }))?
            .label("share held at mean confidence")
            .legend(|(x, y)| Circle::new((x + 10, y), 4, RED.filled()));
        chart.draw_series(m.bins.iter().filter(full).map(|b| {
            let top = b.share_held.unwrap_or(0.0).min(1.0) + 0.03;
            Text::new(format!("n={}", b.count), (b.lower + 0.02, top), ("sans-serif", 12))
        }))?;
        chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).border_style(BLACK).draw()?;
        root.present()?;
    }
    Ok(out)
}
