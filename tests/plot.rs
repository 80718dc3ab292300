//! Pictures: PNG and SVG figures of step curves, drawn with the embedded font
//! (no system fonts needed), written atomically, and refused with a message
//! that names the file when they cannot be drawn.

use std::path::{Path, PathBuf};

use quick_xml::Reader;
use quick_xml::events::Event;
use twobs::plot::{self, Figure, PlotError, PlotFormat, Series};

/// Edges 0.5, 1, ..., 10 (log_x-safe) and two pair counts over them, the
/// second with a peak, and a g(r) with one.
struct Data {
    edges: Vec<f64>,
    counts: Vec<f64>,
    peaked: Vec<f64>,
    g: Vec<f64>,
}

fn data() -> Data {
    let edges: Vec<f64> = (1..=20).map(|k| k as f64 * 0.5).collect();
    let centres: Vec<f64> = edges.windows(2).map(|w| 0.5 * (w[0] + w[1])).collect();
    let bump = |r: f64| 1.0 + 1.5 * (-(r - 2.0) * (r - 2.0)).exp();
    let counts = centres.iter().map(|r| 2.0e4 * r * r).collect();
    let peaked = centres.iter().map(|r| 1.2e4 * r * r * bump(*r)).collect();
    let g = centres.iter().map(|r| bump(*r)).collect();
    Data { edges, counts, peaked, g }
}

fn figure<'a>(d: &'a Data, log_x: bool) -> Figure<'a> {
    Figure {
        title: "Pair statistics of lattice points".into(),
        x_label: "r (separation)".into(),
        y_label: "pairs per bucket".into(),
        log_x,
        series: vec![
            Series { label: "uniform points".into(), edges: &d.edges, values: &d.counts },
            Series { label: "clustered points".into(), edges: &d.edges, values: &d.peaked },
        ],
    }
}

/// Files in `dir` whose names end in `.partial`.
fn partial_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().ends_with(".partial"))
        .collect()
}

/// The decoded picture: width, height and RGB(A) pixels.
fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let pixels = buf[..info.buffer_size()].chunks(channels).map(|p| [p[0], p[1], p[2]]).collect();
    (info.width, info.height, pixels)
}

/// The root element's attributes and the text of every `<text>` element.
fn read_svg(path: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let src = std::fs::read_to_string(path).unwrap();
    let mut reader = Reader::from_str(&src);
    let mut root = None;
    let mut texts = Vec::new();
    let mut in_text = false;
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) | Event::Empty(e) if root.is_none() => {
                assert_eq!(e.name().as_ref(), "svg", "the root element");
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap();
                        let value = a.normalized_value(quick_xml::XmlVersion::Implicit1_0).unwrap().into_owned();
                        (a.key.as_ref().to_owned(), value)
                    })
                    .collect::<Vec<_>>();
                root = Some(attrs);
            }
            Event::Start(e) if e.name().as_ref() == "text" => {
                in_text = true;
                texts.push(String::new());
            }
            Event::End(e) if e.name().as_ref() == "text" => in_text = false,
            Event::Text(t) if in_text => texts.last_mut().unwrap().push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => {
                let name = r.into_inner().into_owned();
                texts.last_mut().unwrap().push_str(quick_xml::escape::resolve_predefined_entity(&name).unwrap());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    (root.expect("an <svg> root"), texts.iter().map(|t| t.trim().to_owned()).collect())
}

#[test]
fn png_is_960_by_600_with_both_curves_in_the_plotting_area() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pairs.png");
    let d = data();
    plot::draw(&figure(&d, false), &path).unwrap();

    let (width, height, pixels) = decode_png(&path);
    assert_eq!((width, height), (960, 600));
    let distinct: std::collections::BTreeSet<[u8; 3]> = pixels.iter().copied().collect();
    assert!(distinct.len() > 50, "only {} distinct colours: text and curves are missing", distinct.len());

    // Inside the plotting area, away from the title and the axis labels: the
    // background is white, grid, axes and text are grey, the curves coloured.
    let (mut blue, mut orange) = (0, 0);
    for y in 80..480 {
        for x in 150..900 {
            let [r, _, b] = pixels[y * width as usize + x].map(i32::from);
            if b - r > 60 {
                blue += 1;
            }
            if r - b > 100 {
                orange += 1;
            }
        }
    }
    assert!(blue > 500 && orange > 500, "curve pixels in the plotting area: blue {blue}, orange {orange}");
    assert!(partial_files(dir.path()).is_empty());
}

#[test]
fn png_with_log_x_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pairs.PNG");
    let d = data();
    plot::draw(&figure(&d, true), &path).unwrap();
    let (width, height, pixels) = decode_png(&path);
    assert_eq!((width, height), (960, 600));
    assert!(pixels.iter().any(|&[r, _, b]| i32::from(b) - i32::from(r) > 60), "no curve drawn");
}

#[test]
fn svg_has_the_size_title_axis_labels_and_legend_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pairs.svg");
    let d = data();
    let mut fig = figure(&d, true);
    fig.title = "g(r) & counts <log r>".into();
    plot::draw(&fig, &path).unwrap();

    let (root, texts) = read_svg(&path);
    let attr = |name: &str| root.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!((attr("width"), attr("height")), (Some("960"), Some("600")), "{root:?}");
    for want in ["g(r) & counts <log r>", "r (separation)", "pairs per bucket", "uniform points", "clustered points"] {
        assert!(texts.iter().any(|t| t == want), "no text `{want}` in {texts:?}");
    }
    assert!(partial_files(dir.path()).is_empty());
}

#[test]
fn one_series_has_no_legend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.svg");
    let d = data();
    let mut fig = figure(&d, false);
    fig.series.truncate(1);
    plot::draw(&fig, &path).unwrap();
    let (_, texts) = read_svg(&path);
    assert!(!texts.iter().any(|t| t == "uniform points"), "a legend for one series: {texts:?}");
    assert!(texts.iter().any(|t| t == "r (separation)"), "{texts:?}");
}

#[test]
fn the_format_comes_from_the_extension_in_any_case() {
    assert_eq!(plot::format_of(Path::new("out/g.png")).unwrap(), PlotFormat::Png);
    assert_eq!(plot::format_of(Path::new("G.PNG")).unwrap(), PlotFormat::Png);
    assert_eq!(plot::format_of(Path::new("g.Svg")).unwrap(), PlotFormat::Svg);
}

#[test]
fn an_unknown_extension_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = data();
    for name in ["g.jpg", "g", "g.png.txt"] {
        let path = dir.path().join(name);
        let err = plot::format_of(&path).unwrap_err();
        assert!(matches!(err, PlotError::UnknownFormat { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()) && message.contains("use .png or .svg"), "{message}");
        let err = plot::draw(&figure(&d, false), &path).unwrap_err().to_string();
        assert_eq!(err, message);
        assert!(!path.exists());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a refused plot wrote something");
}

#[test]
fn mismatched_lengths_are_an_error_naming_the_series_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.png");
    let edges = [0.0, 1.0, 2.0];
    for values in [&[1.0, 2.0, 3.0][..], &[1.0][..], &[][..]] {
        let fig = Figure {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: false,
            series: vec![Series { label: "counts".into(), edges: &edges, values }],
        };
        let err = plot::draw(&fig, &path).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, PlotError::Figure { .. }), "{err:?}");
        assert!(message.contains("bad.png") && message.contains("`counts`"), "{message}");
        assert!(message.contains(&format!("{} values and 3 edges", values.len())), "{message}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a refused plot wrote something");
}

#[test]
fn an_empty_figure_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.svg");
    let fig = Figure { title: "t".into(), x_label: "x".into(), y_label: "y".into(), log_x: false, series: vec![] };
    let message = plot::draw(&fig, &path).unwrap_err().to_string();
    assert!(message.contains("empty.svg") && message.contains("no series"), "{message}");
    assert!(!path.exists());
}

#[test]
fn log_x_refuses_edges_at_or_below_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.png");
    let edges = [0.0, 1.0, 2.0];
    let fig = Figure {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        log_x: true,
        series: vec![Series { label: "counts".into(), edges: &edges, values: &[1.0, 2.0] }],
    };
    let message = plot::draw(&fig, &path).unwrap_err().to_string();
    assert!(message.contains("log.png") && message.contains("edge 0 is 0") && message.contains("> 0"), "{message}");
    let decreasing = [0.0, 2.0, 1.0];
    let fig = Figure {
        log_x: false,
        series: vec![Series { label: "counts".into(), edges: &decreasing, values: &[1.0, 2.0] }],
        ..fig
    };
    let message = plot::draw(&fig, &path).unwrap_err().to_string();
    assert!(message.contains("must increase"), "{message}");
}

#[test]
fn axes_too_wide_for_f64_are_an_error_not_a_hang() {
    // plotters' tick search does not end on an infinite span; the draw runs
    // on a thread so that a regression fails here instead of stalling the suite.
    let cases: [(&[f64], &[f64], bool, &str); 3] = [
        (&[0.0, 1.0, 2.0], &[f64::MAX, 1.0], false, "too wide a y axis"),
        (&[-1e308, 0.0, 1e308], &[1.0, 2.0], false, "too wide an x axis"),
        (&[1e-300, 1.0, 1e300], &[1.0, 2.0], true, "too wide an x axis"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (k, (edges, values, log_x, want)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("wide{k}.png"));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let fig = Figure {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                log_x,
                series: vec![Series { label: "s".into(), edges, values }],
            };
            let _ = tx.send(plot::draw(&fig, &path).map_err(|e| e.to_string()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the draw did not finish");
        let message = got.unwrap_err();
        assert!(message.contains(&format!("wide{k}.png")) && message.contains(want), "{message}");
    }
}

#[test]
fn values_that_are_nan_or_infinite_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let d = data();
    let mut holes = d.g.clone();
    holes[3] = f64::NAN;
    holes[7] = f64::INFINITY;
    holes[8] = f64::NEG_INFINITY;
    let all_nan = vec![f64::NAN; d.g.len()];
    for (name, values) in [("holes.png", &holes), ("nan.svg", &all_nan)] {
        let fig = Figure {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            series: vec![Series { label: "g".into(), edges: &d.edges, values }],
        };
        plot::draw(&fig, &dir.path().join(name)).unwrap();
    }
    let (_, _, pixels) = decode_png(&dir.path().join("holes.png"));
    assert!(pixels.iter().any(|&[r, _, b]| i32::from(b) - i32::from(r) > 60), "the finite values were not drawn");
}

#[test]
fn an_existing_plot_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.svg");
    std::fs::write(&path, "old").unwrap();
    let d = data();
    plot::draw(&figure(&d, false), &path).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
    assert!(partial_files(dir.path()).is_empty());
}

#[test]
fn a_failed_write_leaves_no_partial_file() {
    // The destination is a folder: the picture is written beside it, and the
    // rename into place fails.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taken.png");
    std::fs::create_dir(&path).unwrap();
    let d = data();
    let err = plot::draw(&figure(&d, false), &path).unwrap_err();
    assert!(matches!(err, PlotError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("taken.png"), "{err}");
    assert!(partial_files(dir.path()).is_empty(), "{:?}", partial_files(dir.path()));

    // A folder that does not exist: nothing can be written at all.
    let missing = dir.path().join("no/such/folder/g.svg");
    let err = plot::draw(&figure(&d, false), &missing).unwrap_err();
    assert!(err.to_string().contains("no/such/folder/g.svg"), "{err}");
}
