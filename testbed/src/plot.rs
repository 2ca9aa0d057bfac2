//! Line charts as SVG, for the benchmarks' figures: one or more named series of (x, y)
//! points against shared axes, with axis labels, a title and a legend.
//!
//! ```no_run
//! use polld_testbed::plot::{LineChart, Series};
//!
//! let chart = LineChart {
//!     title: "delivered against offered load".into(),
//!     x_label: "offered (kpps)".into(),
//!     y_label: "delivered (kpps)".into(),
//!     series: vec![Series::new("polling", vec![(100.0, 99.0), (400.0, 380.0)])],
//! };
//! chart.write_svg(std::path::Path::new("target/curve.svg"))?;
//! # Ok::<(), polld_testbed::TestbedError>(())
//! ```
//!
//! The axes start at 0 on y (a rate or a share read against zero) and span the data on x;
//! points are marked, so a series of one point still shows.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::TestbedError;

/// One named line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, y), drawn in this order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// A chart of several series against the same x and y axes.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// Pixel size of every chart.
const SIZE: (u32, u32) = (800, 500);

/// Distinct colours for up to eight series (then they repeat).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

fn plot_error(e: impl std::fmt::Display) -> TestbedError {
    TestbedError::Failed(format!("drawing a chart: {e}"))
}

impl LineChart {
    /// The x range covering every point (widened when all x are equal), and y from 0 to
    /// a tenth above the largest y.
    fn ranges(&self) -> Result<(std::ops::Range<f64>, std::ops::Range<f64>), TestbedError> {
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        if points().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
            return Err(plot_error(format!(
                "\"{}\" has a point that is not a finite number",
                self.title
            )));
        }
        let (mut x_min, mut x_max) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut y_max: f64 = 0.0;
        for &(x, y) in points() {
            x_min = x_min.min(x);
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        if x_min > x_max {
            return Err(plot_error(format!("\"{}\" has no points", self.title)));
        }
        if x_min == x_max {
            let pad = x_min.abs().max(1.0) * 0.1;
            (x_min, x_max) = (x_min - pad, x_max + pad);
        }
        let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
        Ok((x_min..x_max, 0.0..y_top))
    }

    /// The chart as an SVG document.
    pub fn to_svg(&self) -> Result<String, TestbedError> {
        let (x_range, y_range) = self.ranges()?;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            root.fill(&WHITE).map_err(plot_error)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&self.title, ("sans-serif", 22))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(70)
                .build_cartesian_2d(x_range, y_range)
                .map_err(plot_error)?;
            chart
                .configure_mesh()
                .x_desc(&self.x_label)
                .y_desc(&self.y_label)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(plot_error)?;
            for (i, series) in self.series.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                let points = series.points.clone();
                chart
                    .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                    .map_err(plot_error)?
                    .label(&series.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
                chart
                    .draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 3, colour.filled())),
                    )
                    .map_err(plot_error)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .draw()
                .map_err(plot_error)?;
            root.present().map_err(plot_error)?;
        }
        Ok(svg)
    }

    /// Writes the chart to `path` as SVG, creating its directory.
    pub fn write_svg(&self, path: &Path) -> Result<(), TestbedError> {
        let svg = self.to_svg()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| plot_error(format!("creating {}: {e}", dir.display())))?;
        }
        std::fs::write(path, svg)
            .map_err(|e| plot_error(format!("writing {}: {e}", path.display())))
    }
}

/// Writes each `(file name, chart)` as SVG in `dir`; returns the paths written.
pub fn write_charts(
    dir: &Path,
    charts: Vec<(&str, LineChart)>,
) -> Result<Vec<PathBuf>, TestbedError> {
    charts
        .into_iter()
        .map(|(file, chart)| {
            let path = dir.join(file);
            chart.write_svg(&path).map(|()| path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: Vec<Series>) -> LineChart {
        LineChart {
            title: "delivered against offered".into(),
            x_label: "offered (kpps)".into(),
            y_label: "delivered (kpps)".into(),
            series,
        }
    }

    #[test]
    fn an_svg_holds_the_title_the_axis_labels_and_every_series_name() {
        let svg = chart(vec![
            Series::new(
                "polling",
                vec![(100.0, 99.0), (200.0, 190.0), (400.0, 195.0)],
            ),
            Series::new(
                "interrupt",
                vec![(100.0, 99.0), (200.0, 120.0), (400.0, 3.0)],
            ),
        ])
        .to_svg()
        .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for text in [
            "delivered against offered",
            "offered (kpps)",
            "delivered (kpps)",
            "polling",
            "interrupt",
        ] {
            assert!(svg.contains(text), "no {text:?} in the SVG");
        }
        // Each series in its own colour, a marker per point.
        let svg_upper = svg.to_uppercase();
        assert!(svg_upper.contains("#1F77B4") && svg_upper.contains("#D62728"));
        assert_eq!(svg.matches("<circle").count(), 6, "{svg}");
    }

    #[test]
    fn one_point_or_equal_xs_still_draw() {
        let svg = chart(vec![Series::new("one", vec![(5.0, 0.0)])])
            .to_svg()
            .unwrap();
        assert!(svg.contains("one"));
    }

    #[test]
    fn no_points_or_a_nan_is_an_error_naming_the_chart() {
        let err = chart(vec![]).to_svg().unwrap_err().to_string();
        assert!(err.contains("delivered against offered") && err.contains("no points"));
        let err = chart(vec![Series::new("bad", vec![(1.0, f64::NAN)])])
            .to_svg()
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a finite number"), "{err}");
    }

    #[test]
    fn write_svg_creates_the_directory() {
        let dir = std::env::temp_dir().join(format!("polld-plot-{}", std::process::id()));
        let path = dir.join("sub/curve.svg");
        chart(vec![Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)])])
            .write_svg(&path)
            .unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
