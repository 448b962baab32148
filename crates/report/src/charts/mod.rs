//! Charts as PNG and SVG, drawn with plotters and the font embedded in this crate, so rendering
//! needs nothing from the system.

mod draw;
pub(crate) mod plan;

use crate::Error;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// DejaVu Sans (see assets/DejaVuSans-LICENSE.txt), compiled into the binary.
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Pixel size of every chart.
const SIZE: (u32, u32) = (1200, 520);

/// Registers the embedded font as plotters' `sans-serif`, once per process.
fn register_font() -> Result<(), Error> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if *ok {
        Ok(())
    } else {
        Err(Error::Chart {
            path: PathBuf::from("assets/DejaVuSans.ttf"),
            msg: "the embedded font could not be loaded".into(),
        })
    }
}

/// Draws every planned chart of `r` into `dir` as `<stem>.png` and `<stem>.svg`, returning the
/// files written in plan order (PNG then SVG for each chart).
pub(crate) fn render_all(r: &model::RunResults, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    register_font()?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let charts = plan::plan(r);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
        .min(charts.len().max(1));
    let chunk = charts.len().div_ceil(workers).max(1);
    let results: Vec<Result<Vec<PathBuf>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = charts
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut files = Vec::with_capacity(part.len() * 2);
                    for c in part {
                        files.extend(render_one(c, dir)?);
                    }
                    Ok(files)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(chart_panic(dir))))
            .collect()
    });
    let mut out = Vec::with_capacity(charts.len() * 2);
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

fn chart_panic(dir: &Path) -> Error {
    Error::Chart {
        path: dir.to_path_buf(),
        msg: "the chart renderer panicked".into(),
    }
}

/// Encodes an RGB bitmap of `SIZE` as a PNG file: the png crate directly, not plotters' image
/// encoder, whose `image` dependency (every format it reads and writes) cost a cold build more
/// than all the rest of the charts.
fn write_png(path: &Path, rgb: &[u8]) -> Result<(), Error> {
    let chart = |msg: String| Error::Chart {
        path: path.to_path_buf(),
        msg,
    };
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), SIZE.0, SIZE.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut w = enc.write_header().map_err(|e| chart(e.to_string()))?;
    w.write_image_data(rgb).map_err(|e| chart(e.to_string()))?;
    w.finish().map_err(|e| chart(e.to_string()))
}

/// Draws one chart as PNG and SVG.
fn render_one(c: &plan::Chart, dir: &Path) -> Result<[PathBuf; 2], Error> {
    let png = dir.join(format!("{}.png", c.stem));
    let svg = dir.join(format!("{}.svg", c.stem));
    {
        let mut pixels = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area();
            draw::draw(&root, c).map_err(|e| Error::Chart {
                path: png.clone(),
                msg: e.to_string(),
            })?;
        }
        write_png(&png, &pixels)?;
    }
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw::draw(&root, c).map_err(|e| Error::Chart {
            path: svg.clone(),
            msg: e.to_string(),
        })?;
    }
    Ok([png, svg])
}
