//! Pictures of results: one figure of step curves, written as PNG or SVG.
//!
//! A figure is drawn in memory with `plotters` (pure Rust: no system
//! libraries) and written beside its place under a temporary name, then
//! renamed into place, so that a failed draw leaves no partial file. Text is
//! set in DejaVu Sans, embedded in the binary: a machine without fonts draws
//! the same picture as one with them.
//!
//! The font is a subset of DejaVu Sans 2.37 (Basic Latin, Latin-1, Latin
//! Extended-A, Greek, punctuation, super- and subscripts, letterlike symbols,
//! arrows and mathematical operators; no hinting, which the rasterizer does not
//! use), licensed as `plot/DejaVu-LICENSE.txt` says. It was made with
//! fonttools 4.66.1:
//!
//! ```text
//! pyftsubset DejaVuSans.ttf --output-file=DejaVuSans-subset.ttf --no-hinting \
//!   --unicodes=U+0020-007E,U+00A0-017F,U+0370-03FF,U+2010-205E,U+2070-209F,U+2100-214F,U+2190-21FF,U+2200-22FF,U+FFFD \
//!   --drop-tables-=kern --drop-tables+=GPOS,GSUB,GDEF,MATH,FFTM
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

/// The picture's size in pixels (SVG: user units).
pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 600;

/// One curve: a value per bucket `[edges[k], edges[k+1])`.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    pub label: String,
    pub edges: &'a [f64],
    pub values: &'a [f64],
}

/// Curves over one pair of axes.
#[derive(Debug, Clone)]
pub struct Figure<'a> {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A logarithmic x axis; every edge must then be > 0.
    pub log_x: bool,
    pub series: Vec<Series<'a>>,
}

/// A picture file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotFormat {
    Png,
    Svg,
}

/// A figure that cannot be drawn, or a file that cannot take one.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{}: the extension names no picture format; use .png or .svg", path.display())]
    UnknownFormat { path: PathBuf },
    #[error("cannot plot {}: {message}", path.display())]
    Figure { path: PathBuf, message: String },
    #[error("cannot draw {}: {message}", path.display())]
    Draw { path: PathBuf, message: String },
    #[error("cannot write {}: {cause}", path.display())]
    Io { path: PathBuf, cause: std::io::Error },
}

/// What the command line checks before it computes anything: the extension
/// names a picture format and a file can be made there.
pub fn check(path: &Path) -> Result<PlotFormat, PlotError> {
    let format = format_of(path)?;
    crate::write::check_writable(path).map_err(|source| PlotError::Io { path: path.to_owned(), cause: source })?;
    Ok(format)
}

/// The format a file's extension names (`.png` or `.svg`, in any case).
pub fn format_of(path: &Path) -> Result<PlotFormat, PlotError> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("png") => Ok(PlotFormat::Png),
        Some("svg") => Ok(PlotFormat::Svg),
        _ => Err(PlotError::UnknownFormat { path: path.to_owned() }),
    }
}

/// Draws `figure` to `path`, in the format its extension names, replacing
/// any file there.
pub fn draw(figure: &Figure, path: &Path) -> Result<(), PlotError> {
    let format = format_of(path)?;
    let frame = Frame::of(figure).map_err(|message| PlotError::Figure { path: path.to_owned(), message })?;
    register_font().map_err(|message| PlotError::Draw { path: path.to_owned(), message })?;
    let drawn = match format {
        PlotFormat::Png => png_bytes(figure, &frame),
        PlotFormat::Svg => svg_bytes(figure, &frame),
    };
    let bytes = drawn.map_err(|message| PlotError::Draw { path: path.to_owned(), message })?;
    write_atomically(path, &bytes)
}

/// DejaVu Sans, registered as plotters' "sans-serif" (every other style falls back to it).
static FONT: &[u8] = include_bytes!("plot/DejaVuSans-subset.ttf");
const FAMILY: &str = "sans-serif";

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok { Ok(()) } else { Err("the embedded font could not be read".to_owned()) }
}

/// What the figure's data ask of the axes, from data that were checked.
struct Frame {
    x: (f64, f64),
    y: (f64, f64),
    /// A logarithmic y axis: the values are all > 0 and span at least
    /// [`LOG_Y_SPAN`] (pair counts in log buckets, xi of a clustered
    /// catalogue), where a linear axis would flatten all but the largest.
    log_y: bool,
}

/// The ratio of the largest value to the smallest (all > 0) from which the y
/// axis is logarithmic: three decades.
const LOG_Y_SPAN: f64 = 1e3;

impl Frame {
    /// Checks every series (lengths, edges) and finds the axes' ranges: x over
    /// all edges, y from min(0, lowest value) to max(0, highest value) with 5%
    /// headroom, or logarithmic from the lowest value to the highest (a fifth
    /// of a decade of headroom) where they are all > 0 and span
    /// [`LOG_Y_SPAN`]. Values that are NaN or infinite are left out.
    fn of(figure: &Figure) -> Result<Frame, String> {
        if figure.series.is_empty() {
            return Err("the figure has no series; expected at least one".to_owned());
        }
        let (mut x_lo, mut x_hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut y_lo, mut y_hi) = (0.0_f64, 0.0_f64);
        let (mut least, mut positive) = (f64::INFINITY, true);
        for s in &figure.series {
            if s.values.is_empty() || s.values.len() + 1 != s.edges.len() {
                return Err(format!(
                    "series `{}` has {} values and {} edges; expected one value per bucket and one more edge than values",
                    s.label,
                    s.values.len(),
                    s.edges.len()
                ));
            }
            if let Some(k) = s.edges.iter().position(|e| !e.is_finite() || (figure.log_x && *e <= 0.0)) {
                let need = if figure.log_x { "finite and > 0 (the x axis is logarithmic)" } else { "finite" };
                return Err(format!("series `{}`: edge {k} is {}; edges must be {need}", s.label, s.edges[k]));
            }
            if let Some(k) = s.edges.windows(2).position(|w| w[0] >= w[1]) {
                return Err(format!(
                    "series `{}`: edges {k} and {} are {} and {}; edges must increase",
                    s.label,
                    k + 1,
                    s.edges[k],
                    s.edges[k + 1]
                ));
            }
            x_lo = x_lo.min(s.edges[0]);
            x_hi = x_hi.max(s.edges[s.edges.len() - 1]);
            for v in s.values.iter().filter(|v| v.is_finite()) {
                y_lo = y_lo.min(*v);
                y_hi = y_hi.max(*v);
                least = least.min(*v);
                positive &= *v > 0.0;
            }
        }
        let x_span = if figure.log_x { x_hi / x_lo } else { x_hi - x_lo };
        if !x_span.is_finite() {
            return Err(format!("the edges run from {x_lo:e} to {x_hi:e}, too wide an x axis to draw"));
        }
        if positive && least.is_finite() && y_hi / least >= LOG_Y_SPAN {
            let pad = 10f64.powf(0.2);
            let y = (least / pad, y_hi * pad);
            // Spans beyond f64 would stall plotters' tick search, as below.
            if !(y.1 / y.0).is_finite() || y.0 == 0.0 {
                return Err(format!("the values run from {least:e} to {y_hi:e}, too wide a y axis to draw"));
            }
            return Ok(Frame { x: (x_lo, x_hi), y, log_y: true });
        }
        let span = if y_hi > y_lo { y_hi - y_lo } else { 1.0 };
        let pad = 0.05 * span;
        let y = (if y_lo < 0.0 { y_lo - pad } else { y_lo }, y_hi + pad);
        // Spans beyond f64 (edges or values near 1e308) would stall plotters' tick search.
        if !(y.1 - y.0).is_finite() {
            return Err(format!("the values run from {y_lo:e} to {y_hi:e}, too wide a y axis to draw"));
        }
        Ok(Frame { x: (x_lo, x_hi), y, log_y: false })
    }
}

/// The categorical colours of matplotlib and Vega ("tab10"), told apart by
/// most readers, colour-blind ones included for the first few.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

fn png_bytes(figure: &Figure, frame: &Frame) -> Result<Vec<u8>, String> {
    let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
        paint(&root, figure, frame).map_err(|e| e.to_string())?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(&rgb).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

fn svg_bytes(figure: &Figure, frame: &Frame) -> Result<Vec<u8>, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        paint(&root, figure, frame).map_err(|e| e.to_string())?;
    }
    Ok(svg.into_bytes())
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// The whole picture: background, title, axes, curves and legend.
fn paint<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, figure: &Figure, frame: &Frame) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&figure.title, (FAMILY, 24))
        .margin_top(12)
        .margin_left(16)
        .margin_right(28)
        .margin_bottom(12)
        .x_label_area_size(56)
        .y_label_area_size(96);
    let (x_lo, x_hi) = frame.x;
    let (y_lo, y_hi) = frame.y;
    let (x_ticks, y_ticks) = (linear_ticks(x_lo, x_hi), linear_ticks(y_lo, y_hi));
    match (figure.log_x, frame.log_y) {
        (true, true) => {
            let chart = builder.build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())?;
            curves(chart, figure, frame, &log_tick_label, &log_tick_label)?;
        }
        (true, false) => {
            let chart = builder.build_cartesian_2d((x_lo..x_hi).log_scale(), y_lo..y_hi)?;
            curves(chart, figure, frame, &log_tick_label, &y_ticks)?;
        }
        (false, true) => {
            let chart = builder.build_cartesian_2d(x_lo..x_hi, (y_lo..y_hi).log_scale())?;
            curves(chart, figure, frame, &x_ticks, &log_tick_label)?;
        }
        (false, false) => {
            let chart = builder.build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)?;
            curves(chart, figure, frame, &x_ticks, &y_ticks)?;
        }
    }
    root.present()
}

/// A log axis ticks 1 to 9 times each power of ten; only 1, 2 and 5 are
/// labelled, so that the labels of a decade do not run into each other.
fn log_tick_label(v: &f64) -> String {
    let mantissa = v / 10f64.powf(v.log10().floor());
    let m = mantissa.round();
    if (mantissa - m).abs() < 1e-6 * m && [1.0, 2.0, 5.0, 10.0].contains(&m) {
        significant(*v, 3)
    } else {
        String::new()
    }
}

/// Axes, step curves and, for more than one series, the legend. A step curve
/// (the value held flat across its bucket) rather than a line through bucket
/// centres: it shows what a histogram is, and needs no choice of "centre" on
/// a logarithmic axis. A value that is NaN or infinite breaks its curve.
fn curves<'a, DB, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    figure: &Figure,
    frame: &Frame,
    x_ticks: &dyn Fn(&f64) -> String,
    y_ticks: &dyn Fn(&f64) -> String,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(&figure.x_label)
        .y_desc(&figure.y_label)
        .axis_desc_style((FAMILY, 18))
        .label_style((FAMILY, 15))
        .x_labels(12)
        .y_labels(10)
        .x_label_formatter(x_ticks)
        .y_label_formatter(y_ticks)
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, series) in figure.series.iter().enumerate() {
        let style = PALETTE[i % PALETTE.len()].stroke_width(2);
        chart
            .draw_series(steps(series).into_iter().map(|run| PathElement::new(run, style)))?
            .label(series.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    if figure.series.len() > 1 {
        chart
            .configure_series_labels()
            .position(legend_corner(figure, frame))
            .label_font((FAMILY, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()?;
    }
    Ok(())
}

/// The corner of the plotting area where the legend covers the fewest pieces
/// of curve: upper right, upper left, lower right, lower left, the first of
/// the best. The legend's size is estimated from its labels.
fn legend_corner(figure: &Figure, frame: &Frame) -> SeriesLabelPosition {
    // Positions as fractions of the plotting area (about 820 x 480 pixels), 0 at the lower left.
    let (x_lo, x_hi) = frame.x;
    let fx = |x: f64| {
        if figure.log_x { (x / x_lo).ln() / (x_hi / x_lo).ln() } else { (x - x_lo) / (x_hi - x_lo) }
    };
    let (y_lo, y_hi) = frame.y;
    let fy = |y: f64| if frame.log_y { (y / y_lo).ln() / (y_hi / y_lo).ln() } else { (y - y_lo) / (y_hi - y_lo) };
    let longest = figure.series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0) as f64;
    let (w, h) =
        (((longest * 9.0 + 60.0) / 820.0).min(1.0), ((figure.series.len() as f64 * 22.0 + 16.0) / 480.0).min(1.0));
    let corners = [
        (SeriesLabelPosition::UpperRight, (1.0 - w, 1.0), (1.0 - h, 1.0)),
        (SeriesLabelPosition::UpperLeft, (0.0, w), (1.0 - h, 1.0)),
        (SeriesLabelPosition::LowerRight, (1.0 - w, 1.0), (0.0, h)),
        (SeriesLabelPosition::LowerLeft, (0.0, w), (0.0, h)),
    ];
    let overlap = |a: (f64, f64), b: (f64, f64)| a.0.max(b.0) <= a.1.min(b.1);
    let covered = |(bx, by): ((f64, f64), (f64, f64))| {
        let mut n = 0;
        for s in &figure.series {
            for (k, &v) in s.values.iter().enumerate().filter(|(_, v)| v.is_finite()) {
                let (x0, x1, y) = (fx(s.edges[k]), fx(s.edges[k + 1]), fy(v));
                n += usize::from(overlap((x0, x1), bx) && overlap((y, y), by));
                if let Some(&u) = s.values.get(k + 1).filter(|u| u.is_finite()) {
                    n += usize::from(overlap((x1, x1), bx) && overlap((y.min(fy(u)), y.max(fy(u))), by));
                }
            }
        }
        n
    };
    let mut best = (usize::MAX, SeriesLabelPosition::UpperRight);
    for (corner, bx, by) in corners {
        let n = covered((bx, by));
        if n < best.0 {
            best = (n, corner);
        }
    }
    best.1
}

/// The step curve of a series as runs of points, one run per stretch of finite values.
fn steps(series: &Series) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    for (k, &v) in series.values.iter().enumerate() {
        if !v.is_finite() {
            if !run.is_empty() {
                runs.push(std::mem::take(&mut run));
            }
            continue;
        }
        run.push((series.edges[k], v));
        run.push((series.edges[k + 1], v));
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// Tick labels for a linear axis over `[lo, hi]`: one decimal finer than the
/// tick step needs, trailing zeros trimmed; `2.5e6` style where the numbers
/// are large (>= 1e5) or small (< 1e-3).
fn linear_ticks(lo: f64, hi: f64) -> impl Fn(&f64) -> String {
    let span = hi - lo;
    let step = if span > 0.0 { (span / 10.0).log10().floor() as i32 } else { 0 };
    let big = lo.abs().max(hi.abs());
    let scientific = big >= 1e5 || (big > 0.0 && big < 1e-3);
    let big_exp = if big > 0.0 { big.log10().floor() as i32 } else { 0 };
    move |v: &f64| {
        if scientific {
            let digits = (big_exp - step + 1).clamp(0, 15) as usize;
            exponent_form(*v, digits)
        } else {
            let decimals = (1 - step).clamp(0, 15) as usize;
            trimmed(format!("{v:.decimals$}"))
        }
    }
}

/// `v` with at most `digits` significant digits: decimals in [1e-3, 1e5), else `2.5e6` style.
fn significant(v: f64, digits: usize) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".to_owned();
    }
    if (1e-3..1e5).contains(&a) {
        let decimals = (digits as i32 - 1 - a.log10().floor() as i32).clamp(0, 15) as usize;
        trimmed(format!("{v:.decimals$}"))
    } else {
        exponent_form(v, digits.saturating_sub(1))
    }
}

/// `2.500e6` -> `2.5e6`; a mantissa that rounds to zero is `0`.
fn exponent_form(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$e}");
    let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = trimmed(mantissa.to_owned());
    if mantissa == "0" { mantissa } else { format!("{mantissa}e{exponent}") }
}

/// Trailing zeros (and a bare point) removed; `-0` becomes `0`.
fn trimmed(mut s: String) -> String {
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" { "0".to_owned() } else { s }
}

/// Writes `bytes` through a partial file renamed into place (see
/// [`crate::write::file_atomically`]).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    crate::write::file_atomically(path, |w| w.write_all(bytes))
        .map_err(|source| PlotError::Io { path: path.to_owned(), cause: source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short_and_exact() {
        let y = linear_ticks(0.0, 3.2);
        assert_eq!([y(&0.0), y(&0.5), y(&1.0), y(&(0.1 + 0.2))], ["0", "0.5", "1", "0.3"]);
        let y = linear_ticks(0.0, 2.6e6);
        assert_eq!([y(&0.0), y(&2.5e6), y(&2e6)], ["0", "2.5e6", "2e6"]);
        let y = linear_ticks(-0.04, 0.04);
        assert_eq!([y(&-0.02), y(&-1e-18)], ["-0.02", "0"]);
        assert_eq!([significant(0.01, 3), significant(12.5, 3), significant(2e5, 3)], ["0.01", "12.5", "2e5"]);
    }

    #[test]
    fn the_y_axis_is_logarithmic_where_positive_values_span_three_decades() {
        let edges = [1.0, 2.0, 3.0, 4.0];
        let frame = |values: &[f64]| {
            let figure = Figure {
                title: String::new(),
                x_label: String::new(),
                y_label: String::new(),
                log_x: false,
                series: vec![Series { label: "s".into(), edges: &edges, values }],
            };
            Frame::of(&figure).unwrap()
        };
        let wide = frame(&[2.0, 300.0, 2000.0]);
        assert!(wide.log_y && wide.y.0 < 2.0 && wide.y.0 > 1.0 && wide.y.1 > 2000.0, "{:?}", wide.y);
        // A zero, a negative value, or under three decades: linear, from 0.
        for values in [[0.0, 300.0, 2000.0], [-1.0, 300.0, 2000.0], [3.0, 300.0, 2000.0]] {
            let f = frame(&values);
            assert!(!f.log_y && f.y.0 <= 0.0, "{values:?}");
        }
        // NaN buckets are left out of the decision, as they are of the range.
        assert!(frame(&[f64::NAN, 1.0, 1e4]).log_y);
    }

    #[test]
    fn a_nan_breaks_the_step_curve() {
        let s = Series { label: "s".into(), edges: &[0.0, 1.0, 2.0, 3.0], values: &[1.0, f64::NAN, 2.0] };
        assert_eq!(steps(&s), vec![vec![(0.0, 1.0), (1.0, 1.0)], vec![(2.0, 2.0), (3.0, 2.0)]]);
    }
}
