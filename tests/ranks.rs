//! MPI ranks share one run (issue 34): every built-in problem, on the CPU
//! backend, run by `mpiexec -n 1`, `-n 2` and `-n 4` writes the very bytes
//! that one process writes (histograms, f64 sums, pairs in their order,
//! KNN lists), and a rank killed mid-run ends the job with an error, not a
//! hang. Needs `--features mpi` and an MPI on the PATH
//! (`scripts/install-mpi.sh`); `scripts/test.sh` runs it so.

#[cfg(feature = "mpi")]
mod common;

#[cfg(not(feature = "mpi"))]
#[test]
#[ignore = "needs a build with --features mpi and an MPI (scripts/test.sh runs it: scripts/install-mpi.sh, then cargo test --features mpi --test ranks)"]
fn ranks_need_the_mpi_feature() {}

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::common;

    /// One case: a name, the arguments of `twobs run` (without the output),
    /// and the result file's extension.
    struct Case {
        name: &'static str,
        args: Vec<String>,
        out: &'static str,
    }

    fn case(name: &'static str, args: &str, out: &'static str) -> Case {
        Case { name, args: args.split_whitespace().map(str::to_owned).collect(), out }
    }

    /// Every built-in in problems/, on small inputs: brute force and grids,
    /// one set and two, counts, f64 sums, pairs and KNN lists.
    fn cases() -> Vec<Case> {
        vec![
            case("sdh", "sdh --input uniform:1500", "csv"),
            case("sdh-two-sets", "sdh --input uniform:700 --input clustered:900", "csv"),
            case("rdf-grid", "rdf --input uniform:3000 --param r_max=0.08 --param bins=40", "csv"),
            case("rdf-two-sets", "rdf --input uniform:900 --input uniform:800 --param box=0", "csv"),
            case("2pcf-grid", "2pcf --input clustered:3000 --param r=0.05", "json"),
            case("kde-sum", "kde --input clustered:1200", "json"),
            case("kde-sum-f64", "kde --input uniform:900 --f64", "json"),
            case("selfjoin-grid", "selfjoin --input clustered:3000", "npy"),
            case("selfjoin-every-pair", "selfjoin --input uniform:1500 --index none --param eps=0.05", "npy"),
            case("knn-rings", "knn --input uniform:1500 --param k=5", "npy"),
            case("knn-two-sets", "knn --input uniform:700 --input uniform:600 --param k=3 --index none", "npy"),
            case("nlj-grid", "nlj --input ka.csv --input kb.csv --param d=2", "npy"),
            case("dd_periodic-grid", "dd_periodic --input uniform:3000 --param r_max=0.2 --param bins=8", "csv"),
            // Angles between the points' directions (not unit vectors here: the bytes compare alike).
            case("ddtheta-f64", "ddtheta --input uniform:900 --param theta_max=90 --param bins=9", "csv"),
            // Rank 0 checks the merged result against every pair.
            case("selfjoin-grid-verified", "selfjoin --input uniform:2000 --verify", "npy"),
            // Two sets, every pair: rank 0 sends the other ranks B, and A's
            // rows with each piece (counts, f64 sums, --f64, pairs; KNN lists
            // are knn-two-sets above; ddtheta under --index auto).
            case("sdh-two-sets-rows-of-a", "sdh --input uniform:700 --input clustered:900 --index none", "csv"),
            case(
                "sdh-weighted-rows-of-a",
                "sdh --input uniform:600 --input clustered:500 --weights wa.txt --weights wb.txt --index none",
                "csv",
            ),
            case("sdh-f64-rows-of-a", "sdh --input clustered:500 --input uniform:400 --index none --f64", "csv"),
            case("nlj-rows-of-a", "nlj --input ka.csv --input kb.csv --param d=2 --index none", "npy"),
            case("ddtheta-two-sets", "ddtheta --input uniform:500 --input clustered:400 --param bins=12", "csv"),
            // Two-dimensional buckets: DD(rp, pi) on its grid, and DD(s, mu) of two sets, rows of A sent.
            case("ddrppi-grid", "ddrppi --input clustered:2000", "csv"),
            case("ddsmu-two-sets-rows-of-a", "ddsmu --input uniform:600 --input clustered:500 --index none", "csv"),
        ]
    }

    fn folder(name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ranks").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Integer keys for the band join, and weights whose f64 sums round
    /// differently in another order, the same on every run.
    fn write_keys(dir: &Path) {
        let keys = |n: u64, seed: u64| -> String {
            (0..n).map(|i| format!("{}\n", (i * 7919 + seed * 104_729) % 300)).collect()
        };
        std::fs::write(dir.join("ka.csv"), keys(900, 1)).unwrap();
        std::fs::write(dir.join("kb.csv"), keys(700, 2)).unwrap();
        let weights = |n: u64, seed: u64| -> String {
            (0..n).map(|i| format!("{}\n", ((i * 7919 + seed * 104_729) % 1000) as f64 / 7.0 + 1e-3)).collect()
        };
        std::fs::write(dir.join("wa.txt"), weights(600, 3)).unwrap();
        std::fs::write(dir.join("wb.txt"), weights(500, 4)).unwrap();
    }

    fn mpiexec() -> Command {
        let c = Command::new("mpiexec");
        // Not found: the test fails and says how to install one.
        assert!(
            Command::new("mpiexec").arg("--version").output().is_ok_and(|o| o.status.success()),
            "mpiexec is not on the PATH: run scripts/install-mpi.sh"
        );
        c
    }

    /// `twobs run` of `case` writing `out`: one process (`ranks` None) or under `mpiexec -n ranks`.
    fn run(dir: &Path, case: &Case, ranks: Option<usize>, out: &str) -> Vec<u8> {
        let file = dir.join(out);
        let _ = std::fs::remove_file(&file);
        let mut args: Vec<String> = vec!["run".into()];
        args.extend(case.args.iter().cloned());
        args.extend(["--backend", "cpu", "--threads", "2", "--quiet", "--out", out].map(str::to_owned));
        let output = match ranks {
            None => common::twobs(dir, &args.iter().map(String::as_str).collect::<Vec<_>>()),
            Some(n) => {
                let twobs = common::command(dir);
                mpiexec()
                    .args(["-n", &n.to_string(), twobs.get_program().to_str().unwrap()])
                    .args(&args)
                    .envs(twobs.get_envs().filter_map(|(k, v)| Some((k, v?))))
                    .current_dir(dir)
                    .output()
                    .unwrap()
            }
        };
        assert!(output.status.success(), "{} on {ranks:?} ranks failed: {}", case.name, common::stderr(&output));
        std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {} not written: {e}", case.name, file.display()))
    }

    #[test]
    fn every_built_in_on_1_2_and_4_ranks_writes_the_bytes_of_one_process() {
        let dir = folder("built-ins");
        write_keys(&dir);
        let mut problems = std::collections::BTreeSet::new();
        for case in cases() {
            let one = run(&dir, &case, None, &format!("{}-one.{}", case.name, case.out));
            assert!(!one.is_empty(), "{}", case.name);
            for ranks in [1, 2, 4] {
                let got = run(&dir, &case, Some(ranks), &format!("{}-{ranks}.{}", case.name, case.out));
                assert!(got == one, "{} on {ranks} ranks differs from one process", case.name);
            }
            problems.insert(case.args[0].clone());
        }
        // Every built-in is among the cases.
        let built_in: std::collections::BTreeSet<String> =
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/problems"))
                .unwrap()
                .filter_map(|e| {
                    let p = e.unwrap().path();
                    (p.extension()? == "xml").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
                })
                .collect();
        assert_eq!(problems, built_in);
    }

    /// Only rank 0 writes; the report names every rank and what it took.
    #[test]
    fn rank_0_reports_every_rank_and_the_pairs_add_up() {
        let dir = folder("report");
        let twobs = common::command(&dir);
        let out = mpiexec()
            .args(["-n", "3", twobs.get_program().to_str().unwrap()])
            .args(["run", "sdh", "--input", "uniform:2000", "--backend", "cpu", "--threads", "1", "--quiet"])
            .args(["--report", "r.json", "--out", "h.csv"])
            .envs(twobs.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
        let ranks = report["ranks"].as_array().expect("a list of ranks");
        assert_eq!(ranks.len(), 3, "{report}");
        let pairs: u64 = ranks.iter().map(|r| r["pairs"].as_u64().unwrap()).sum();
        assert_eq!(pairs, 2000 * 1999 / 2);
        assert!(ranks.iter().enumerate().all(|(i, r)| r["rank"].as_u64() == Some(i as u64)));
        // What a rank holds of the inputs, measured: of one set, the whole
        // set (2000 points x 3 f32) on every rank (docs/architecture.md says
        // why), received from rank 0 by the others.
        for r in ranks {
            assert_eq!(r["holding"], "whole", "{r}");
            assert_eq!(r["input_bytes"].as_u64(), Some(2000 * 3 * 4), "{r}");
            let received = r["received_bytes"].as_u64().unwrap();
            assert!(if r["rank"] == 0 { received == 0 } else { received >= 2000 * 3 * 4 }, "{r}");
        }
    }

    /// A x B pair by pair: a rank other than 0 holds B, and of A only the
    /// rows of the pieces in flight, never the whole of A; rank 0 holds both.
    #[test]
    fn a_rank_holds_set_b_and_the_rows_of_its_pieces_not_all_of_a() {
        let dir = folder("rows-of-a");
        let twobs = common::command(&dir);
        let (a, b, threads) = (60_000u64, 200u64, 2u64);
        let out = mpiexec()
            .args(["-n", "3", twobs.get_program().to_str().unwrap()])
            .args(["run", "sdh", "--input", &format!("uniform:{a}"), "--input", &format!("clustered:{b}")])
            .args(["--index", "none", "--backend", "cpu", "--threads", &threads.to_string(), "--quiet"])
            .args(["--report", "r.json", "--out", "h.csv"])
            .envs(twobs.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
        let ranks = report["ranks"].as_array().expect("a list of ranks");
        assert_eq!(ranks.len(), 3, "{report}");
        let pairs: u64 = ranks.iter().map(|r| r["pairs"].as_u64().unwrap()).sum();
        assert_eq!(pairs, a * b);
        let point = 3 * 4;
        for r in ranks {
            assert_eq!(r["holding"], "rows_of_a", "{r}");
            let (held, received) = (r["input_bytes"].as_u64().unwrap(), r["received_bytes"].as_u64().unwrap());
            if r["rank"] == 0 {
                assert_eq!((held, received), ((a + b) * point, 0), "{r}");
                continue;
            }
            // B, and at most one piece a thread walked and one a thread
            // asked ahead (and the asker's own, and the last it received,
            // which rank 0 may name again), of at most 4096 rows each: far
            // from all of A.
            let pieces = 2 * threads + 2;
            assert!(held <= b * point + pieces * 4096 * point && held < a * point / 4, "{r}");
            if r["taken"].as_u64().unwrap() > 0 {
                assert!(held > b * point, "{r}");
                // B, then each piece's rows once.
                let rows = r["pairs"].as_u64().unwrap() / b;
                assert!(received >= (b + rows) * point, "{r}");
            }
        }
    }

    /// The processes of `mpiexec`'s job: twobs processes whose parent chain leads to `root`.
    fn ranks_of(root: u32) -> Vec<u32> {
        let parent = |pid: u32| -> Option<u32> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat.rsplit_once(") ")?.1.split_whitespace().nth(1)?.parse().ok()
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() != "twobs" {
                continue;
            }
            let mut p = parent(pid);
            for _ in 0..8 {
                match p {
                    Some(q) if q == root => {
                        found.push(pid);
                        break;
                    }
                    Some(q) if q > 1 => p = parent(q),
                    _ => break,
                }
            }
        }
        found.sort_unstable();
        found
    }

    /// A rank killed in the middle of a long run ends the whole job with a
    /// failure status and a message, within seconds (the others would wait
    /// for it at the counter or the gather): where every rank holds the
    /// inputs whole, and where rank 0 sends A's rows with the pieces.
    #[test]
    fn a_killed_rank_ends_the_job_with_an_error_not_a_hang() {
        // 2e10 pairs on one thread a rank: minutes, far longer than the test waits.
        kill_rank_1_of("whole", "sdh --input uniform:200000");
        kill_rank_1_of("rows-of-a", "sdh --input uniform:200000 --input uniform:100000 --index none");
    }

    fn kill_rank_1_of(name: &str, args: &str) {
        let dir = folder(&format!("killed-{name}"));
        let twobs = common::command(&dir);
        let mut job = mpiexec()
            .args(["-n", "2", twobs.get_program().to_str().unwrap(), "run"])
            .args(args.split_whitespace())
            .args(["--backend", "cpu", "--threads", "1", "--quiet", "--out", "h.csv"])
            .envs(twobs.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let ranks = loop {
            let ranks = ranks_of(job.id());
            if ranks.len() == 2 {
                break ranks;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{name}: the two ranks did not start: {ranks:?}");
            std::thread::sleep(Duration::from_millis(100));
        };
        // Into the compute (the driver is compiled or cached, the counter made).
        std::thread::sleep(Duration::from_secs(3));
        assert!(job.try_wait().unwrap().is_none(), "{name}: the job ended before a rank was killed");
        unsafe { libc::kill(ranks[1] as i32, libc::SIGKILL) };
        let killed = Instant::now();
        let status = loop {
            if let Some(s) = job.try_wait().unwrap() {
                break s;
            }
            if killed.elapsed() > Duration::from_secs(60) {
                let _ = job.kill();
                panic!("{name}: the job still ran 60 s after a rank was killed");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // MPICH's launcher says which process ended and how on its standard output.
        let mut said = String::new();
        std::io::Read::read_to_string(job.stdout.as_mut().unwrap(), &mut said).unwrap();
        std::io::Read::read_to_string(job.stderr.as_mut().unwrap(), &mut said).unwrap();
        assert!(!status.success(), "{name}: a job with a killed rank succeeded: {said}");
        assert!(said.contains(&ranks[1].to_string()) && said.to_lowercase().contains("killed"), "{name}: {said}");
        assert!(!dir.join("h.csv").exists(), "{name}: a result was written by a job that lost a rank");
    }

    /// `twobs run ARGS` under `mpiexec -n 2`, through `sh -c` (so that `$PMI_RANK` may differ by rank).
    fn two_ranks_of_sh(dir: &Path, args: &str) -> std::process::Output {
        let twobs = common::command(dir);
        mpiexec()
            .args(["-n", "2", "sh", "-c"])
            .arg(format!("exec {} run {args}", twobs.get_program().to_str().unwrap()))
            .envs(twobs.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(dir)
            .output()
            .unwrap()
    }

    /// Rank 0 reads the inputs for every rank: where it cannot, it ends the
    /// job (the others wait for its broadcast) with its error and its rank.
    #[test]
    fn a_rank_that_fails_ends_the_others_with_its_error() {
        let dir = folder("failing");
        let out = two_ranks_of_sh(&dir, "sdh --input absent.csv --backend cpu --threads 1 --quiet --out h.csv");
        let stderr = common::stderr(&out);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("error: rank 0 of 2") && stderr.contains("absent.csv"), "{stderr}");
    }

    /// Ranks that would cut the work differently (here: other thread counts,
    /// which make other chunks) refuse to run, each saying which rank differs.
    /// (The same where A's rows travel with the pieces: B is sent first.)
    #[test]
    fn ranks_that_describe_other_machines_refuse_to_share_a_run() {
        for inputs in ["--input uniform:500", "--input uniform:500 --input uniform:300 --index none"] {
            let dir = folder("unlike");
            let _ = std::fs::remove_file(dir.join("h.csv"));
            let out = two_ranks_of_sh(
                &dir,
                &format!("sdh {inputs} --backend cpu --threads $((PMI_RANK + 1)) --quiet --out h.csv"),
            );
            let stderr = common::stderr(&out);
            assert!(!out.status.success(), "{inputs}: {stderr}");
            assert!(stderr.contains("rank 0 has 1 CPU threads, but rank 1 has 2 CPU threads"), "{inputs}: {stderr}");
            assert!(!dir.join("h.csv").exists(), "{inputs}");
        }
    }

    /// `srun -n 2` without a PMI (`--mpi=none`, a cluster's default on some
    /// sites) starts two copies that each see an MPI world of one: refused,
    /// with the `srun` options that work, instead of two whole runs writing
    /// one file. (No Slurm here: its variables are set as srun sets them.)
    #[test]
    fn srun_without_a_pmi_is_refused_with_the_options_that_work() {
        let dir = folder("srun");
        // A file left by an earlier run of this test would pass for one written now.
        let _ = std::fs::remove_file(dir.join("h.csv"));
        let out = common::command(&dir)
            .args(["run", "sdh", "--input", "uniform:300", "--backend", "cpu", "--quiet", "--out", "h.csv"])
            .env("SLURM_PROCID", "0")
            .env("SLURM_STEP_NUM_TASKS", "2")
            .env("SLURM_NTASKS", "2")
            .output()
            .unwrap();
        let stderr = common::stderr(&out);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("srun started 2 tasks") && stderr.contains("srun --mpi=pmi2"), "{stderr}");
        assert!(!dir.join("h.csv").exists());
        // One task of a step (a batch script's own step) runs as one process.
        let _ = std::fs::remove_file(dir.join("one.csv"));
        let one = common::command(&dir)
            .args(["run", "sdh", "--input", "uniform:300", "--backend", "cpu", "--quiet", "--out", "one.csv"])
            .env("SLURM_PROCID", "0")
            .env("SLURM_STEP_NUM_TASKS", "1")
            .output()
            .unwrap();
        assert!(one.status.success(), "{}", common::stderr(&one));
        assert!(dir.join("one.csv").exists());
    }
}
