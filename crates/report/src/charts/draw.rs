//! Draws one planned chart on any plotters backend (PNG and SVG share this code): title, axes with
//! units, the lines or stacked layers, a dashed marker per action (a shaded span per dense run of
//! actions), and a legend beside the plot.

use super::plan::{Chart, Line};
use crate::error::DrawError;
use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Width of the legend column on the right, in pixels.
const LEGEND_W: u32 = 250;
/// Actions labelled with their number and kind up to this many; beyond, numbers only.
const FULL_LABELS: usize = 12;
/// Beyond this many actions, markers carry no labels at all.
const ANY_LABELS: usize = 40;
/// Fill of a span of dense actions.
const SPAN_FILL: RGBColor = RGBColor(232, 232, 232);
/// Spans are drawn at least this wide, in pixels, so one at a single instant still shows.
const SPAN_MIN_PX: i32 = 3;

/// Draws `c` filling `root`.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Chart) -> Result<(), DrawError> {
    root.fill(&WHITE).map_err(DrawError::of)?;
    let (w, _) = root.dim_in_pixel();
    let (plot, legend) = root.split_horizontally(w.saturating_sub(LEGEND_W));
    let (lo, hi) = y_bounds(c);
    if c.log_y {
        plot_in(&plot, c, (lo..hi).log_scale(), lo, hi)?;
    } else {
        plot_in(&plot, c, lo..hi, lo, hi)?;
    }
    draw_legend(&legend, c)?;
    root.present().map_err(DrawError::of)
}

/// The Y range: from zero (or below the smallest value on a log axis) to a little above the top.
fn y_bounds(c: &Chart) -> (f64, f64) {
    let mut max = 0.0f64;
    let mut min_pos = f64::INFINITY;
    let mut stack = Vec::new();
    for line in &c.lines {
        for seg in &line.segments {
            for &(_, v) in seg {
                if v.is_finite() {
                    max = max.max(v);
                    if v > 0.0 {
                        min_pos = min_pos.min(v);
                    }
                }
            }
        }
    }
    if c.stacked {
        stack = stacked_layers(&c.lines);
    }
    for layer in &stack {
        for &(_, v) in layer {
            max = max.max(v);
        }
    }
    // Keep the top strip free for the action labels, a little margin otherwise.
    let free = if labelled(c) { 0.16 } else { 0.06 };
    if c.log_y {
        let lo = if min_pos.is_finite() {
            min_pos / 1.6
        } else {
            0.1
        };
        let max = if max > lo { max } else { lo * 10.0 };
        let hi = lo * (max / lo).powf(1.0 / (1.0 - free));
        (lo, hi)
    } else {
        (0.0, if max > 0.0 { max / (1.0 - free) } else { 1.0 })
    }
}

/// True when the chart prints labels along its top: for spans, and for markers few enough.
fn labelled(c: &Chart) -> bool {
    !c.spans.is_empty() || (!c.markers.is_empty() && c.markers.len() <= ANY_LABELS)
}

/// Cumulative tops of stacked layers (all layers share the same x points).
fn stacked_layers(lines: &[Line]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::with_capacity(lines.len());
    for line in lines {
        let pts: Vec<(f64, f64)> = line
            .segments
            .iter()
            .flatten()
            .copied()
            .filter(finite)
            .collect();
        let layer = match out.last() {
            Some(below) if below.len() == pts.len() => pts
                .iter()
                .zip(below)
                .map(|(p, b)| (p.0, p.1 + b.1))
                .collect(),
            _ => pts,
        };
        out.push(layer);
    }
    out
}

/// Plotters cannot place a NaN or an infinity; such points are left out.
fn finite(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite()
}

fn rgb(c: (u8, u8, u8)) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

/// An opaque tint of `c` (mixed with white), so stacked layers keep their own colour.
fn tint(c: (u8, u8, u8)) -> RGBColor {
    let mix = |v: u8| (v as f64 * 0.5 + 255.0 * 0.5) as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// A compact axis number: `1.5k`, `2M`, `0.25`, `12`.
fn axis_num(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.3}"))
    }
}

fn plot_in<DB: DrawingBackend, Y>(
    area: &DrawingArea<DB, Shift>,
    c: &Chart,
    y: Y,
    lo: f64,
    hi: f64,
) -> Result<(), DrawError>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    let (x0, x1) = c.x_range;
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y)
        .map_err(|e| err(&e))?;
    let span = x1 - x0;
    chart
        .configure_mesh()
        .x_desc(c.x_desc.as_str())
        .y_desc(c.y_label.as_str())
        .x_label_formatter(&|x| {
            if span >= 10.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            }
        })
        .y_label_formatter(&|v| axis_num(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(246, 246, 246))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(|e| err(&e))?;

    // Markers go under the data. A few are dashed lines across the plot; many would merge into
    // a grey wall, so they become a rug of short ticks along the top edge.
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    spans(area, &chart, c, lo, (xs.clone(), ys.clone()))?;
    markers(area, &mut chart, c, (lo, hi), (xs.clone(), ys.clone()))?;
    data(&mut chart, c, lo)?;
    ready_steps(area, c, (xs.clone(), ys.clone()))?;
    top_labels(area, &chart, c, lo, (xs, ys))
}

/// The shaded span of each dense run of actions, at least [`SPAN_MIN_PX`] wide.
fn spans<DB: DrawingBackend, X, Y>(
    area: &DrawingArea<DB, Shift>,
    chart: &ChartContext<'_, DB, Cartesian2d<X, Y>>,
    c: &Chart,
    lo: f64,
    (xs, ys): (std::ops::Range<i32>, std::ops::Range<i32>),
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    let base = area.get_base_pixel();
    for sp in &c.spans {
        let (a, _) = chart.backend_coord(&(sp.from, lo));
        let (b, _) = chart.backend_coord(&(sp.to, lo));
        let (a, b) = widen_px(a, b, SPAN_MIN_PX);
        let (a, b) = (a.max(xs.start), b.min(xs.end));
        if a < b {
            let (y0, y1) = (ys.start - base.1, ys.end - base.1);
            area.draw(&Rectangle::new(
                [(a - base.0, y0), (b - base.0, y1)],
                SPAN_FILL.filled(),
            ))
            .map_err(|e| err(&e))?;
        }
    }
    Ok(())
}

/// A marker per action that stands apart: a dashed line across the plot when they are few
/// enough to label, a short tick along the top edge otherwise.
fn markers<DB: DrawingBackend, X, Y>(
    area: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    c: &Chart,
    (lo, hi): (f64, f64),
    (xs, ys): (std::ops::Range<i32>, std::ops::Range<i32>),
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    let base = area.get_base_pixel();
    if c.markers.len() <= ANY_LABELS {
        let marker_style = RGBColor(90, 90, 90).stroke_width(1);
        for m in &c.markers {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(m.t, lo), (m.t, hi)],
                    6,
                    4,
                    marker_style,
                ))
                .map_err(|e| err(&e))?;
        }
    } else {
        let tick = RGBColor(120, 120, 120).stroke_width(1);
        for m in &c.markers {
            let (px, _) = chart.backend_coord(&(m.t, lo));
            if xs.contains(&px) {
                let (x, y) = (px - base.0, ys.start - base.1);
                area.draw(&PathElement::new(vec![(x, y), (x, y + 10)], tick))
                    .map_err(|e| err(&e))?;
            }
        }
    }
    Ok(())
}

/// The data: filled stacked layers, or each line's segments as steps and dots.
fn data<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    c: &Chart,
    lo: f64,
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    if c.stacked {
        let layers = stacked_layers(&c.lines);
        // Top layer first, so each lower layer paints over the part that is not its own.
        for (line, layer) in c.lines.iter().zip(&layers).rev() {
            let col = rgb(line.color);
            chart
                .draw_series(
                    AreaSeries::new(layer.iter().copied(), lo, tint(line.color).filled())
                        .border_style(col.stroke_width(1)),
                )
                .map_err(|e| err(&e))?;
        }
    } else {
        for line in &c.lines {
            let col = rgb(line.color);
            for seg in &line.segments {
                let seg: Vec<(f64, f64)> = seg.iter().copied().filter(finite).collect();
                if seg.len() > 1 && line.join {
                    // Each step is its own path: plotters joins thick polylines with mitres,
                    // which shoot far past a sharp spike such as a one-second latency stall.
                    let style = col.stroke_width(2);
                    chart
                        .draw_series(
                            seg.windows(2)
                                .map(|w| PathElement::new(vec![w[0], w[1]], style)),
                        )
                        .map_err(|e| err(&e))?;
                }
                if line.dots || seg.len() == 1 {
                    chart
                        .draw_series(seg.iter().map(|&p| Circle::new(p, 3, col.filled())))
                        .map_err(|e| err(&e))?;
                }
            }
        }
    }
    Ok(())
}

/// Labels along the top, in time order: every span's, and the markers' when few enough, in
/// three staggered rows on a light backing.
fn top_labels<DB: DrawingBackend, X, Y>(
    area: &DrawingArea<DB, Shift>,
    chart: &ChartContext<'_, DB, Cartesian2d<X, Y>>,
    c: &Chart,
    lo: f64,
    (xs, ys): (std::ops::Range<i32>, std::ops::Range<i32>),
) -> Result<(), DrawError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    let base = area.get_base_pixel();
    let mut labels: Vec<(f64, String)> = c
        .spans
        .iter()
        .map(|sp| (sp.from, sp.label.clone()))
        .collect();
    if c.markers.len() <= ANY_LABELS {
        labels.extend(c.markers.iter().map(|m| {
            let label = if c.markers.len() <= FULL_LABELS {
                format!("{} {}", m.n, m.action)
            } else {
                m.n.to_string()
            };
            (m.t, label)
        }));
    }
    labels.sort_by(|a, b| a.0.total_cmp(&b.0));
    {
        let top = ys.start;
        let font = ("sans-serif", 13).into_font().color(&RGBColor(60, 60, 60));
        for (i, (t, label)) in labels.into_iter().enumerate() {
            let (px, _) = chart.backend_coord(&(t, lo));
            let px = px.clamp(xs.start, xs.end);
            // Three staggered rows keep neighbouring labels apart.
            let py = top + 3 + (i % 3) as i32 * 15;
            let (tw, th) = area
                .estimate_text_size(&label, &font)
                .map_err(|e| err(&e))?;
            // A long label (a span's) near the right edge is pulled back inside the plot.
            let right = xs.end - base.0 - tw as i32 - 4;
            let (x, y) = ((px + 3 - base.0).min(right), py - base.1);
            area.draw(&Rectangle::new(
                [(x - 1, y - 1), (x + tw as i32 + 2, y + th as i32 + 1)],
                WHITE.mix(0.85).filled(),
            ))
            .map_err(|e| err(&e))?;
            area.draw(&Text::new(label, (x, y), font.clone()))
                .map_err(|e| err(&e))?;
        }
    }
    Ok(())
}

/// The pods-Ready steps over the data, on a scale of their own (0 at the bottom, the most
/// Ready pods near the top), with that scale's numbers inside the plot's right edge.
fn ready_steps<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &Chart,
    (xs, ys): (std::ops::Range<i32>, std::ops::Range<i32>),
) -> Result<(), DrawError> {
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    let top = c
        .ready
        .iter()
        .flat_map(|l| l.segments.iter().flatten())
        .map(|p| p.1)
        .fold(0.0f64, f64::max);
    if c.ready.is_empty() {
        return Ok(());
    }
    let top = top.max(1.0);
    let base = area.get_base_pixel();
    let (x0, x1) = c.x_range;
    let x_of = |t: f64| {
        let f = ((t - x0) / (x1 - x0)).clamp(0.0, 1.0);
        xs.start + (f * f64::from(xs.end - xs.start)).round() as i32 - base.0
    };
    // The scale's top is a little under the plot's, clear of the action labels.
    let (bottom_px, top_px) = (ys.end - base.1, ys.start - base.1 + 50);
    let y_of = |v: f64| bottom_px - ((v / top) * f64::from(bottom_px - top_px)).round() as i32;
    for line in &c.ready {
        let style = rgb(line.color).stroke_width(2);
        for seg in &line.segments {
            let px: Vec<(i32, i32)> = seg
                .iter()
                .filter(|p| finite(p))
                .map(|&(t, v)| (x_of(t), y_of(v)))
                .collect();
            if px.len() > 1 {
                area.draw(&PathElement::new(px, style))
                    .map_err(|e| err(&e))?;
            }
        }
    }
    let font = ("sans-serif", 12).into_font().color(&RGBColor(0, 0, 0));
    let step = if top <= 6.0 { 1.0 } else { (top / 4.0).ceil() };
    let mut v = 0.0;
    while v <= top {
        let y = y_of(v);
        let x = xs.end - base.0;
        area.draw(&PathElement::new(
            vec![(x - 6, y), (x, y)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
        area.draw(&Text::new(format!("{v:.0}"), (x - 20, y - 6), font.clone()))
            .map_err(|e| err(&e))?;
        v += step;
    }
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &Chart,
) -> Result<(), DrawError> {
    let err = |e: &dyn std::fmt::Display| DrawError::of(e);
    let font = ("sans-serif", 14).into_font().color(&BLACK);
    let (_, h) = area.dim_in_pixel();
    let mut y = 52i32;
    let row = 22i32;
    let room = ((h as i32 - y - 40) / row).max(1) as usize;
    let shown = c.lines.len().min(room);
    for line in &c.lines[..shown] {
        let col = rgb(line.color);
        if c.stacked {
            area.draw(&Rectangle::new(
                [(8, y - 6), (30, y + 6)],
                tint(line.color).filled(),
            ))
            .map_err(|e| err(&e))?;
        } else if line.join {
            area.draw(&PathElement::new(
                vec![(8, y), (30, y)],
                col.stroke_width(3),
            ))
            .map_err(|e| err(&e))?;
        } else {
            // Scattered points are keyed by a point.
            area.draw(&Circle::new((19, y), 4, col.filled()))
                .map_err(|e| err(&e))?;
        }
        area.draw(&Text::new(short(&line.name, 28), (38, y - 8), font.clone()))
            .map_err(|e| err(&e))?;
        y += row;
    }
    if shown < c.lines.len() {
        let more = format!("… and {} more", c.lines.len() - shown);
        area.draw(&Text::new(more, (38, y - 8), font.clone()))
            .map_err(|e| err(&e))?;
        y += row;
    }
    for line in &c.ready {
        area.draw(&PathElement::new(
            vec![(8, y), (19, y), (19, y - 6), (30, y - 6)],
            rgb(line.color).stroke_width(2),
        ))
        .map_err(|e| err(&e))?;
        area.draw(&Text::new(short(&line.name, 28), (38, y - 8), font.clone()))
            .map_err(|e| err(&e))?;
        y += row;
    }
    if !c.markers.is_empty() {
        area.draw(&PathElement::new(
            vec![(19, y - 8), (19, y + 8)],
            RGBColor(90, 90, 90).stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
        let text = if c.markers.len() <= ANY_LABELS {
            "action (# in events table)"
        } else {
            "actions (see events table)"
        };
        area.draw(&Text::new(text, (38, y - 8), font.clone()))
            .map_err(|e| err(&e))?;
        y += row;
    }
    if !c.spans.is_empty() {
        area.draw(&Rectangle::new(
            [(8, y - 6), (30, y + 6)],
            SPAN_FILL.filled(),
        ))
        .map_err(|e| err(&e))?;
        area.draw(&Text::new("actions close together", (38, y - 8), font))
            .map_err(|e| err(&e))?;
    }
    Ok(())
}

/// Widens the pixel interval `a..b` symmetrically to at least `min` pixels.
fn widen_px(a: i32, b: i32, min: i32) -> (i32, i32) {
    let (a, b) = (a.min(b), a.max(b));
    let short = min - (b - a);
    if short <= 0 {
        (a, b)
    } else {
        (a - short / 2, b + short - short / 2)
    }
}

/// Cuts a legend entry that would not fit.
fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_widened_to_be_seen() {
        assert_eq!(widen_px(100, 100, 3), (99, 102));
        assert_eq!(widen_px(100, 101, 3), (99, 102));
        assert_eq!(widen_px(10, 200, 3), (10, 200));
        assert_eq!(widen_px(200, 10, 3), (10, 200));
    }

    #[test]
    fn axis_numbers_are_compact() {
        assert_eq!(axis_num(0.0), "0");
        assert_eq!(axis_num(2500.0), "2500");
        assert_eq!(axis_num(25000.0), "25k");
        assert_eq!(axis_num(1_500_000.0), "1.5M");
        assert_eq!(axis_num(12.5), "12.5");
        assert_eq!(axis_num(0.25), "0.25");
    }
}
