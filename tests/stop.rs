//! Stop requests (Ctrl-C in Python): a watch sees the requests made after its
//! run began. In a process of their own, since a request reaches every run
//! under way in the process (the library's other tests run CPU drivers).

use twobs::stop::{Watch, ask, watching};

#[test]
fn a_watch_sees_only_the_stops_asked_after_its_run_began() {
    ask();
    let watch = Watch::start();
    assert!(!watch.asked());
    ask();
    assert!(watch.asked());
    assert!(!Watch::start().asked());
    // A stop asked while a watched call plans or compiles reaches the watches its backends start later.
    watching(|| {
        ask();
        assert!(Watch::start().asked());
    });
    assert!(!Watch::start().asked());
}

/// The cell hierarchy's resolver, which can run for seconds on the host
/// before any piece of work, gives up when a stop is asked (the run that
/// follows it sees the same request at its first piece).
#[test]
fn the_cell_hierarchy_stops_resolving_when_a_stop_is_asked() {
    use rand::{RngExt, SeedableRng};
    use twobs::data::{Column, Inputs, PointSet};
    use twobs::index::cells::{self, CPU_COSTS};
    use twobs::problems::built_in;
    use twobs::spec::Spacing;
    use twobs::stage::visit::Visit;

    let mut rng = rand::rngs::StdRng::seed_from_u64(std::process::id() as u64);
    let column = |rng: &mut rand::rngs::StdRng| Column::F32((0..20_000).map(|_| rng.random::<f32>()).collect());
    let a = PointSet { columns: (0..3).map(|_| column(&mut rng)).collect(), origin: "uniform".into(), rows: None };
    let inputs = Inputs { a, b: None };
    let sdh = built_in("sdh").unwrap().with_spacing(Spacing::Log).unwrap();
    let params = sdh.bind(&["bins=20".into(), "r_min=0.001".into(), "r_max=0.5".into()]).unwrap();
    let how = cells::applies(&sdh, &params, &inputs, Visit::LowerTriangle, false).unwrap();
    let build = || {
        cells::build(&how, &inputs, Visit::LowerTriangle, cells::Leaves::of(cells::cpu_leaf(20_000)), CPU_COSTS, None)
    };
    assert!(build().is_ok(), "without a stop the hierarchy is built");
    let stopped = watching(|| {
        ask();
        build()
    });
    match stopped {
        Err(why) => assert!(why.contains("a stop was asked"), "{why}"),
        Ok(_) => panic!("the hierarchy was resolved to the end after a stop"),
    }
}
