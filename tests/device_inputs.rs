//! Points given on a GPU are planned from what the GPU measures of them
//! (`data::Measured`: extremes as order keys, non-finite rows, strided
//! samples), and the plan must be the one the host path makes from the same
//! points. Without a GPU, a device-like source stands in for the taker
//! (`templates/input/take.cu`): a strided matrix read as the kernel reads it
//! (each value rounded once to the spec's scalar, extremes as order keys,
//! rows 0, step, 2 step, ...); every decision input and decision is then
//! compared with the host path's. The kernel itself is compared with the
//! host path on the GPU (`scripts/gpu-suite.sh python`).

use rand::{RngExt, SeedableRng};
use twobs::data::{Column, DeviceInputs, DeviceSet, Inputs, Measured, PointSet, ProducerStream, Spread, order_key};
use twobs::data::{SetShape, Shapes};
use twobs::device::Device;
use twobs::index::IndexChoice;
use twobs::schedule::{GpuOptions, Schedule, Workers};
use twobs::spec::Scalar;

/// A row-major matrix of f64 (as CuPy would hold one), with its strides in bytes.
struct Strided {
    values: Vec<f64>,
    rows: usize,
    dims: usize,
    strides: [i64; 2],
}

impl Strided {
    fn at(&self, i: usize, c: usize) -> f64 {
        let offset = i as i64 * self.strides[0] + c as i64 * self.strides[1];
        self.values[(offset / 8) as usize]
    }

    /// What the taker measures of it for a spec of `scalar`, as the kernel computes it.
    fn measured(&self, scalar: Scalar, origin: &str) -> Measured {
        let convert = |x: f64| if scalar == Scalar::F32 { x as f32 as f64 } else { x };
        let mut keys = vec![[u64::MAX, 0u64]; self.dims];
        let (mut first, mut bad) = (u32::MAX, 0u32);
        for i in 0..self.rows {
            let mut row_bad = false;
            for (c, key) in keys.iter_mut().enumerate() {
                let x = convert(self.at(i, c));
                if x.is_finite() {
                    key[0] = key[0].min(order_key(x));
                    key[1] = key[1].max(order_key(x));
                } else {
                    row_bad = true;
                }
            }
            if row_bad {
                first = first.min(i as u32);
                bad += 1;
            }
        }
        let sample = |step: usize| -> Vec<Column> {
            (0..self.dims)
                .map(|c| {
                    let rows = (0..self.rows).step_by(step).map(|i| convert(self.at(i, c)));
                    match scalar {
                        Scalar::F32 => Column::F32(rows.map(|x| x as f32).collect()),
                        _ => Column::F64(rows.collect()),
                    }
                })
                .collect()
        };
        Measured {
            len: self.rows,
            extreme_keys: keys,
            bad: (bad > 0).then_some((first, bad)),
            shape_sample: sample(twobs::data::sample_step(self.rows)),
            spacing_sample: sample(twobs::data::spacing_step(self.rows)),
            origin: origin.into(),
        }
    }

    /// The same points as the host path takes them (numpy's astype, then columns).
    fn host(&self, scalar: Scalar, origin: &str) -> PointSet {
        let columns = (0..self.dims)
            .map(|c| {
                let values = (0..self.rows).map(|i| self.at(i, c));
                match scalar {
                    Scalar::F32 => Column::F32(values.map(|x| x as f32).collect()),
                    _ => Column::F64(values.collect()),
                }
            })
            .collect();
        PointSet { columns, origin: origin.into(), rows: None }
    }
}

/// `n` points of `dims` coordinates, clustered in a corner, row-major or
/// column-major (Fortran order), with a few values that round in f32.
fn points(n: usize, dims: usize, column_major: bool, rng: &mut impl rand::Rng) -> Strided {
    let mut values = vec![0.0; n * dims];
    let strides = if column_major { [8, 8 * n as i64] } else { [8 * dims as i64, 8] };
    let m = Strided { values: Vec::new(), rows: n, dims, strides };
    for i in 0..n {
        let cluster = rng.random_bool(0.3);
        for c in 0..dims {
            let x: f64 = if cluster { 1.0 + rng.random::<f64>() * 0.5 } else { rng.random::<f64>() * 40.0 - 3.0 };
            let offset = (i as i64 * m.strides[0] + c as i64 * m.strides[1]) / 8;
            values[offset as usize] = x + 1e-9;
        }
    }
    Strided { values, ..m }
}

fn same_shape(device: &SetShape, host: &SetShape) {
    assert_eq!(device.len, host.len);
    assert_eq!(device.ranges, host.ranges, "ranges");
    assert_eq!(device.sample.columns, host.sample.columns, "samples");
    assert_eq!(device.sample.origin, host.sample.origin);
}

#[test]
fn points_measured_on_a_gpu_are_planned_as_the_same_points_on_the_host() {
    let seed: u64 = rand::rng().random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let h200 = Device::profile("h200").expect("h200");
    let workers = Workers::described(&h200, 1, 141 << 30, 2, 16);
    let opts = GpuOptions { streams: 2, hybrid: twobs::schedule::Hybrid::Off, ..Default::default() };
    let cases: [(&str, &[&str], usize, bool, bool); 4] = [
        ("knn", &["k=16"], 200_000, false, false),
        ("knn", &["k=5"], 30_001, true, true),
        ("selfjoin", &["eps=0.4"], 50_000, false, false),
        ("rdf", &["bins=50", "r_max=3", "box=50"], 70_000, true, false),
    ];
    for (name, params, n, column_major, two) in cases {
        let problem = twobs::problems::built_in(name).expect(name);
        let problem = if two { problem.with_sets(2).expect("two sets") } else { problem };
        let params = problem.bind(&params.iter().map(|p| p.to_string()).collect::<Vec<_>>()).expect("params");
        let scalar = problem.input.element.components()[0].scalar;
        let given: Vec<Strided> =
            (0..1 + two as usize).map(|_| points(n + rng.random_range(0..999), 3, column_major, &mut rng)).collect();
        let origins = ["set A", "set B"];
        let measured: Vec<Measured> = given.iter().zip(origins).map(|(g, o)| g.measured(scalar, o)).collect();
        let host = Inputs { a: given[0].host(scalar, "set A"), b: given.get(1).map(|g| g.host(scalar, "set B")) };
        let what = format!("{name} {params:?}, {n} points, column-major {column_major}, two sets {two} (seed {seed})");
        // The planner's inputs.
        let device_shapes = Shapes { a: SetShape::measured(&measured[0]), b: measured.get(1).map(SetShape::measured) };
        let host_shapes = Shapes::of(&host);
        same_shape(&device_shapes.a, &host_shapes.a);
        if two {
            same_shape(device_shapes.b.as_ref().unwrap(), host_shapes.b.as_ref().unwrap());
        }
        // The range check's inputs and verdict.
        let spreads: Vec<Spread> = measured.iter().map(Measured::spread).collect();
        for (d, h) in spreads.iter().zip(std::iter::once(&host.a).chain(host.b.as_ref())) {
            let h = Spread::of(h, 3);
            assert_eq!(d.ranges, h.ranges, "{what}");
            assert_eq!(d.sample.columns, h.sample.columns, "{what}");
        }
        assert_eq!(
            twobs::data::f32_range_of(&problem, &params, &spreads),
            twobs::data::f32_range(&problem, &params, &host),
            "{what}"
        );
        // The decisions: the schedule in words (index, layout, cells, GPUs, blocks, estimate).
        let schedule = |shapes: &Shapes| {
            Schedule::make(&problem, &params, shapes, IndexChoice::Auto, &opts, &workers).expect("schedule").describe()
        };
        assert_eq!(schedule(&device_shapes), schedule(&host_shapes), "{what}");
    }
}

#[test]
fn a_gpu_set_holding_nan_is_refused_with_the_host_paths_message() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
    let mut m = points(5000, 3, false, &mut rng);
    m.values[3 * 1234 + 2] = f64::NAN;
    m.values[3 * 4000] = 1e300; // infinite once rounded to f32
    let device = m.measured(Scalar::F32, "set A").check().expect_err("NaN and inf refused");
    let components = twobs::problems::built_in("knn").unwrap().input.element.components();
    let host = m.host(Scalar::F32, "set A").validate(&components, false).expect_err("refused");
    assert_eq!(device, host);
    assert!(device.0.contains("row 1234") && device.0.contains("2 rows in all"), "{}", device.0);
}

#[test]
fn gpu_arrays_twobs_cannot_read_are_refused_naming_what_is_wrong() {
    let set = |given: Scalar, strides: [i64; 2], address: u64, components: usize| DeviceSet {
        address,
        rows: 10,
        components,
        given,
        strides,
        stream: ProducerStream::Ready,
        origin: "set A".into(),
    };
    let err = |s: DeviceSet| s.check(3).expect_err("refused").0;
    assert!(err(set(Scalar::U32, [12, 4], 256, 3)).contains("an array of u32 on the GPU"));
    assert!(err(set(Scalar::F32, [12, 4], 256, 2)).contains("2 components"));
    assert!(err(set(Scalar::F32, [14, 4], 256, 3)).contains("a stride of 14 bytes"));
    assert!(err(set(Scalar::F64, [24, 8], 260, 3)).contains("not on a 8-byte boundary"));
    assert!(err(DeviceSet { rows: 0, ..set(Scalar::F32, [12, 4], 256, 3) }).contains("no points"));
    set(Scalar::F64, [-24, 8], 256, 3).check(3).expect("a reversed array is read where it lies");
    assert!(ProducerStream::from_interface(Some(0)).unwrap_err().0.contains("stream 0"));
    assert_eq!(ProducerStream::from_interface(Some(1)).unwrap(), ProducerStream::Legacy);
    assert_eq!(ProducerStream::from_interface(None).unwrap(), ProducerStream::Ready);
    let _ = DeviceInputs { a: set(Scalar::F32, [12, 4], 256, 3), b: None };
}
