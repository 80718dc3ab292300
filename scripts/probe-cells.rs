//! The cell hierarchy's host steps (issue 35): trees, resolver, units and
//! sorted copies for sdh's 20 log buckets from 0.001 to 0.5 over synthetic
//! points, at each leaf size given (OWN or OWN/PARTNER: own cells of OWN
//! points, their partners split down to PARTNER), with the cell pairs met
//! and the pairs left to the leaves. No GPU needed.
//! `cargo run --release --example probe-cells -- [clustered|uniform]:N [LEAF ...]`
//! (threads: RAYON_NUM_THREADS).
use twobs::cells::Leaves;
use twobs::data::{InputOptions, Inputs, read_input};
use twobs::spec::Spacing;
use twobs::stage::visit::Visit;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let input = args.first().map_or("clustered:1000000", String::as_str);
    let leaves: Vec<Leaves> = match args.get(1..) {
        Some(l) if !l.is_empty() => l
            .iter()
            .map(|s| {
                let mut sizes = s.split('/').map(|n| n.parse::<u32>().expect("a leaf size"));
                let own = sizes.next().expect("a leaf size");
                Leaves { own, partner: sizes.next().unwrap_or(own) }
            })
            .collect(),
        _ => vec![Leaves::of(128), Leaves::of(512)],
    };
    let problem = twobs::problems::built_in("sdh").expect("sdh").with_spacing(Spacing::Log).expect("log buckets");
    let params = problem.bind(&["bins=20".into(), "r_min=0.001".into(), "r_max=0.5".into()]).expect("sdh's parameters");
    let components = problem.input.element.components();
    let opts = InputOptions { dims: None, drop_nonfinite: false, seed: 1 };
    let inputs = Inputs { a: read_input(input, &components, &opts).expect("the input"), b: None };
    let how = twobs::cells::applies(&problem, &params, &inputs, Visit::LowerTriangle, false).expect("applies");
    let n = inputs.a.len() as f64;
    println!("{input}, {} threads", rayon::current_num_threads());
    println!("leaf\ttrees_s\tresolve_s\tunits_s\tcopies_s\tcell_pairs\tleaf_pairs\tleft_share\tunits");
    for leaf in leaves {
        let start = std::time::Instant::now();
        let c = twobs::cells::build(&how, &inputs, Visit::LowerTriangle, leaf, twobs::cells::CPU_COSTS, None)
            .expect("forced: no alternative to give up for");
        let wall = start.elapsed().as_secs_f64();
        let s = c.steps;
        println!(
            "{}/{}\t{:.3}\t{:.3}\t{:.3}\t{:.3}\t{}\t{}\t{:.4}\t{}\t(build {wall:.3} s)",
            leaf.own,
            leaf.partner,
            s.trees_s,
            s.resolve_s,
            s.units_s,
            s.copies_s,
            c.node_pairs,
            c.grid.pairs,
            c.grid.pairs as f64 / (n * (n - 1.0) / 2.0),
            c.grid.units.len(),
        );
    }
}
