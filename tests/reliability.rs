//! Nothing a user owns is replaced, no signal choice overridden, no input
//! read without bound (issue 49), and compiled code found by what it is,
//! wherever the spec lies (issue 52). Each test names the reproducer it holds.
//!
//! TWOBS_TEST_BIN runs these against another build of `twobs` (an older one,
//! to show a test fails there); /dev/null itself is then never the output.

use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    std::env::var_os("TWOBS_TEST_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_twobs")), PathBuf::from)
}

/// `twobs` in `dir` with a cache of its own, its address space bounded
/// (8 GiB), so that a read without bound fails fast instead of filling a
/// shared machine's memory.
fn command(dir: &Path, cache: &Path) -> Command {
    let mut c = Command::new(bin());
    c.env("TWOBS_CACHE", cache).current_dir(dir);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        c.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 8 << 30, rlim_max: 8 << 30 };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    c
}

fn twobs(dir: &Path, args: &[&str]) -> Output {
    command(dir, &dir.join(".cache")).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Reads everything written to the FIFO at `path`, on a thread of its own;
/// what it read comes through the channel (nothing ever, where the FIFO was
/// replaced and so never written).
fn drain(path: &Path) -> std::sync::mpsc::Receiver<String> {
    let path = path.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::open(path).unwrap().read_to_string(&mut text).unwrap();
        let _ = tx.send(text);
    });
    rx
}

fn received(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("{what}: the FIFO was never written"))
}

// Issue 49, item 1: `--out` and `--report` to a device, a FIFO, or a link to one.

#[test]
fn an_output_to_a_fifo_or_a_link_to_one_is_streamed_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mkfifo(&d.join("result.csv"));
    mkfifo(&d.join("report.fifo"));
    std::os::unix::fs::symlink("result.csv", d.join("link.csv")).unwrap();
    for out in ["result.csv", "link.csv"] {
        let (result, report) = (drain(&d.join("result.csv")), drain(&d.join("report.fifo")));
        let o = twobs(
            d,
            &[
                "run",
                "sdh",
                "--backend",
                "cpu",
                "--input",
                "uniform:300",
                "--out",
                out,
                "--report",
                "report.fifo",
                "--quiet",
            ],
        );
        assert!(o.status.success(), "--out {out}: {}", stderr(&o));
        let (result, report) = (received(&result, out), received(&report, "--report report.fifo"));
        assert!(result.starts_with("bin_lo,bin_hi,count\n") && result.lines().count() > 2, "--out {out}: {result}");
        assert!(report.trim_start().starts_with('{') && report.contains("\"timings\""), "--out {out}: {report}");
        for fifo in ["result.csv", "report.fifo"] {
            assert!(std::fs::metadata(d.join(fifo)).unwrap().file_type().is_fifo(), "--out {out}: {fifo} was replaced");
        }
        assert!(
            std::fs::symlink_metadata(d.join("link.csv")).unwrap().file_type().is_symlink(),
            "the link was replaced"
        );
    }
    // A link to a regular file stays a link; the file it names takes the result.
    std::fs::write(d.join("real.csv"), "old\n").unwrap();
    std::os::unix::fs::symlink("real.csv", d.join("to_real.csv")).unwrap();
    let o = twobs(d, &["run", "sdh", "--backend", "cpu", "--input", "uniform:300", "--out", "to_real.csv", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(d.join("to_real.csv")).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(d.join("real.csv")).unwrap().starts_with("bin_lo,bin_hi,count\n"));
    let left: Vec<String> =
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.contains("partial")), "left behind: {left:?}");
}

#[test]
fn an_output_to_dev_null_leaves_it_a_character_device() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A device node of our own (1, 3 is /dev/null's) where we may make one; /dev/null itself
    // unless another build is under test (an older one would replace it).
    let own = d.join("null");
    let made = is_root() && {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(own.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path in our own temp dir.
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) == 0 }
    };
    if !made {
        println!("not root (or mknod refused): the device made in a temp dir is not tried");
    }
    let mut devices = Vec::new();
    if made {
        devices.push(own);
    }
    if std::env::var_os("TWOBS_TEST_BIN").is_none() {
        devices.push(PathBuf::from("/dev/null"));
    }
    for device in devices {
        let shown = device.display().to_string();
        // The result with a format; then without one (a stream takes CSV, as
        // standard output does) and the report beside it on the same device.
        let with_format = ["--out", &shown, "--format", "csv"];
        let with_report = ["--out", &shown, "--report", &shown];
        for outputs in [with_format, with_report] {
            let mut args = vec!["run", "sdh", "--backend", "cpu", "--input", "uniform:300", "--quiet"];
            args.extend(outputs);
            let o = twobs(d, &args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            let meta = std::fs::symlink_metadata(&device).unwrap();
            assert!(meta.file_type().is_char_device(), "{shown} is no longer a character device: {meta:?}");
        }
        // KNN's ids go there as to standard output, its values nowhere beside a device.
        let o =
            twobs(d, &["run", "knn", "--backend", "cpu", "--input", "uniform:200", "--out", &shown, "--format", "npy"]);
        assert!(o.status.success(), "knn --out {shown}: {}", stderr(&o));
        assert!(std::fs::symlink_metadata(&device).unwrap().file_type().is_char_device(), "knn replaced {shown}");
        let beside = PathBuf::from(format!("{shown}_values.npy"));
        assert!(!beside.exists(), "{} was made", beside.display());
    }
}

// Issue 49, item 2: a signal the user chose to ignore stays ignored.

#[test]
fn an_ignored_sighup_or_sigint_stays_ignored() {
    for (signal, name) in [(libc::SIGHUP, "SIGHUP"), (libc::SIGINT, "SIGINT")] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // The run waits on its weights, a FIFO, until the signals were sent: a long run on any machine.
        mkfifo(&d.join("w.txt"));
        let mut c = command(d, &d.join(".cache"));
        c.args(["run", "sdh", "--backend", "cpu", "--input", "uniform:2000", "--weights", "w.txt"])
            .args(["--out", "out.csv", "--quiet"]);
        // SAFETY: signal is async-signal-safe; as `nohup` does (SIGHUP), or a shell's background job (SIGINT).
        unsafe {
            c.pre_exec(move || {
                libc::signal(signal, libc::SIG_IGN);
                Ok(())
            });
        }
        let mut child = c.spawn().unwrap();
        for sent in 0..3 {
            std::thread::sleep(Duration::from_millis(200));
            let ended = child.try_wait().unwrap();
            assert!(ended.is_none(), "{name}: the run ended after {sent} of them, ignored at start: {ended:?}");
            // SAFETY: kill sends a signal to our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        }
        std::thread::sleep(Duration::from_millis(200));
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking: a run that died has no reader, and the open fails rather than waits.
        let weights = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(d.join("w.txt"));
        match weights {
            Ok(mut w) => w.write_all("1\n".repeat(2000).as_bytes()).unwrap(),
            Err(e) => println!("{name}: the weights found no reader ({e})"),
        }
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{name} ignored at start ended the run: {status:?}");
        assert!(std::fs::read_to_string(d.join("out.csv")).unwrap().starts_with("bin_lo,bin_hi,sum"));
    }
}

// Issue 49, item 4: a failed write to standard output.

/// The commands that write to standard output: list, plan, gen, and run's
/// count (its lines and, with --quiet, the number alone), sum and histogram.
const TO_STDOUT: [&[&str]; 7] = [
    &["list"],
    &["plan", "sdh"],
    &["gen", "sdh"],
    &["run", "2pcf", "--backend", "cpu", "--input", "uniform:300"],
    &["run", "2pcf", "--backend", "cpu", "--input", "uniform:300", "--quiet"],
    &["run", "kde", "--backend", "cpu", "--input", "uniform:300", "--quiet"],
    &["run", "sdh", "--backend", "cpu", "--input", "uniform:300", "--out", "-"],
];

#[test]
fn a_full_standard_output_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for args in TO_STDOUT {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = command(dir.path(), &dir.path().join(".cache")).args(args).stdout(full).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains("cannot write to standard output") && e.contains("No space left"), "{args:?}: {e}");
        assert!(!e.contains("internal error"), "{args:?}: {e}");
    }
}

#[test]
fn a_closed_pipe_ends_quietly_as_sigpipe_would() {
    let dir = tempfile::tempdir().unwrap();
    // SIGPIPE as twobs sets it (it ends the process), and blocked, as a parent
    // may leave it: then the write fails with EPIPE, which twobs sees.
    for blocked in [false, true] {
        for args in TO_STDOUT {
            // The reader is gone before the first write (`twobs list | head -0`).
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            let mut c = command(dir.path(), &dir.path().join(".cache"));
            if blocked {
                // SAFETY: sigemptyset, sigaddset and pthread_sigmask are async-signal-safe.
                unsafe {
                    c.pre_exec(|| {
                        let mut set: libc::sigset_t = std::mem::zeroed();
                        libc::sigemptyset(&mut set);
                        libc::sigaddset(&mut set, libc::SIGPIPE);
                        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                        Ok(())
                    });
                }
            }
            let o = c.args(args).stdout(writer).output().unwrap();
            // Nothing is said of it (a run's own lines go to stderr where stdout holds its result).
            let e = stderr(&o);
            let shown = format!("{args:?}, SIGPIPE blocked: {blocked}");
            assert!(!e.contains("error") && !e.contains("Broken pipe") && !e.contains("stdout"), "{shown}: {e}");
            let sigpipe = o.status.signal() == Some(libc::SIGPIPE) || o.status.code() == Some(128 + libc::SIGPIPE);
            assert!(sigpipe, "{shown}: {:?}", o.status);
        }
    }
}

// Issue 49, item 6: no input, spec or snippet read without bound.

#[test]
fn a_text_input_spec_or_snippet_that_never_ends_is_refused_not_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["z.csv", "zero.cu", "z.xml"] {
        std::os::unix::fs::symlink("/dev/zero", d.join(name)).unwrap();
    }
    let spec = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/manhattan/manhattan.xml"))
        .unwrap()
        .replace("file=\"manhattan.cu\"", "file=\"zero.cu\"");
    std::fs::write(d.join("snippet_zero.xml"), spec).unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["run", "sdh", "--backend", "cpu", "--input", "z.csv"], "z.csv"),
        (&["run", "sdh", "--backend", "cpu", "--input", "uniform:50", "--weights", "z.csv"], "z.csv"),
        (&["run", "2pcf", "--backend", "cpu", "--input", "z.csv"], "z.csv"),
        (&["run", "snippet_zero.xml", "--backend", "cpu", "--input", "uniform:50", "--dims", "4"], "zero.cu"),
        (&["run", "z.xml", "--backend", "cpu", "--input", "uniform:50"], "z.xml"),
    ];
    for (args, names) in cases {
        let start = Instant::now();
        let o = twobs(d, args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {:?} {e}", o.status);
        assert!(e.contains(names) && e.contains("not a text file") && e.contains("character device"), "{args:?}: {e}");
        assert!(start.elapsed() < Duration::from_secs(30), "{args:?}: {:?}", start.elapsed());
    }
    // A file larger than any machine's memory is refused from its size, before a byte is read.
    let big = std::fs::File::create(d.join("big.csv")).unwrap();
    big.set_len(4 << 40).unwrap(); // sparse: 4 TiB that take no disk
    let o = twobs(d, &["run", "sdh", "--backend", "cpu", "--input", "big.csv"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{:?} {e}", o.status);
    assert!(e.contains("big.csv") && e.contains("4.0 TiB") && e.contains("available"), "{e}");
}

// Issue 49, item 7.

fn so_of(cache: &Path, problem: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(cache.join("cpu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.strip_prefix(&format!("{problem}-"))
                .and_then(|r| r.strip_suffix(".so"))
                .is_some_and(|key| key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .collect();
    assert_eq!(found.len(), 1, "{problem}: {found:?}");
    found[0].clone()
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

#[test]
fn a_cached_driver_and_its_digest_moved_to_another_key_are_built_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cache = d.join("cache");
    let count = ["run", "2pcf", "--backend", "cpu", "--input", "uniform:300", "--quiet"];
    let sum = ["run", "kde", "--backend", "cpu", "--input", "uniform:300", "--quiet"];
    let run = |args: &[&str]| command(d, &cache).args(args).output().unwrap();
    let (first_count, first_sum) = (run(&count), run(&sum));
    assert!(first_count.status.success() && first_sum.status.success(), "{}", stderr(&first_count));
    // Each driver and its digest swapped with the other's.
    let (a, b) = (so_of(&cache, "2pcf"), so_of(&cache, "kde"));
    for suffix in ["", ".sha256"] {
        let (x, y) = (with_suffix(&a, suffix), with_suffix(&b, suffix));
        let t = with_suffix(&x, ".swap");
        std::fs::rename(&x, &t).unwrap();
        std::fs::rename(&y, &x).unwrap();
        std::fs::rename(&t, &y).unwrap();
    }
    for (args, first) in [(&count, &first_count), (&sum, &first_sum)] {
        let o = run(args);
        assert!(o.status.success(), "{args:?}: {:?} {}", o.status, stderr(&o));
        assert_eq!(o.stdout, first.stdout, "{args:?}: another result from another key's driver");
    }
}

#[test]
fn kde_refuses_a_bandwidth_of_zero_or_less() {
    let dir = tempfile::tempdir().unwrap();
    for h in ["0", "-0.5", "-0"] {
        let param = format!("h={h}");
        let o = twobs(dir.path(), &["run", "kde", "--backend", "cpu", "--input", "uniform:100", "--param", &param]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "h={h}: {e}");
        assert!(e.contains("parameter h = ") && e.contains("expected a value above 0"), "h={h}: {e}");
        assert!(o.stdout.is_empty(), "h={h}: printed {}", String::from_utf8_lossy(&o.stdout));
    }
}

#[test]
fn partial_files_of_dead_processes_are_removed_by_the_next_run_in_that_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A partial file named as twobs names them, left as a SIGKILLed run leaves it: its process gone.
    let (staged, _) = twobs::write::Staged::create(&d.join("out.csv")).unwrap();
    let partial = staged.partial().to_owned();
    std::mem::forget(staged);
    let mut done = Command::new("true").spawn().unwrap();
    let dead = done.id();
    done.wait().unwrap();
    let name = partial.file_name().unwrap().to_string_lossy().into_owned();
    let (head, tail) = name.rsplit_once(&format!("-{}-", std::process::id())).unwrap();
    let of_dead = d.join(format!("{head}-{dead}-{tail}"));
    std::fs::rename(&partial, &of_dead).unwrap();
    // One of a live process (this test), and a file that is no partial file of twobs.
    let (alive, _) = twobs::write::Staged::create(&d.join("other.csv")).unwrap();
    let of_live = alive.partial().to_owned();
    std::mem::forget(alive);
    std::fs::write(d.join(".notes.partial"), "mine").unwrap();
    let o = twobs(d, &["run", "sdh", "--backend", "cpu", "--input", "uniform:100", "--out", "out.csv", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!of_dead.exists(), "{} was left", of_dead.display());
    assert!(of_live.exists() && d.join(".notes.partial").exists(), "a file not of a dead run was removed");
    std::fs::remove_file(of_live).unwrap();
}

#[test]
fn a_number_beyond_f32_is_named_as_the_user_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = twobs(dir.path(), &["run", "sdh", "--backend", "cpu", "--input", "uniform:100", "--param", "r_max=1e39"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("r_max=1e39") && e.contains("1e39 does not fit f32"), "{e}");
    assert!(!e.contains("inf"), "{e}");
}

// Issue 52: a spec compiled once wherever it lies.

/// The report's `timings.compile_s` and notes of a run of `folder/join.xml`, from `root`.
fn compile_and_notes(root: &Path, cache: &Path, folder: &str) -> (f64, String) {
    let (spec, out, report) =
        (format!("{folder}/join.xml"), format!("{folder}/pairs.npy"), format!("{folder}/report.json"));
    let o = command(root, cache)
        .args(["run", &spec, "--backend", "cpu", "--input", "uniform:3000", "--param", "eps=0.05"])
        .args(["--out", &out, "--report", &report, "--quiet"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{spec}: {}", stderr(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(&report)).unwrap()).unwrap();
    (report["timings"]["compile_s"].as_f64().unwrap(), report["notes"].to_string())
}

#[test]
fn the_same_spec_and_snippet_in_two_folders_compile_once() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("cache");
    let problems = Path::new(env!("CARGO_MANIFEST_DIR")).join("problems");
    // A user's epsilon join with a cutoff and a key map: its promises are sampled, not proven.
    let spec = std::fs::read_to_string(problems.join("selfjoin.xml")).unwrap().replace("\"selfjoin\"", "\"myjoin\"");
    let snippet = std::fs::read_to_string(problems.join("distance.cu")).unwrap();
    let folder = |name: &str, snippet_name: &str| {
        let d = root.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("join.xml"), spec.replace("file=\"distance.cu\"", &format!("file=\"{snippet_name}\"")))
            .unwrap();
        std::fs::write(d.join(snippet_name), &snippet).unwrap();
    };
    folder("a", "distance.cu");
    let (first, notes) = compile_and_notes(root.path(), &cache, "a");
    assert!(notes.contains("its promises hold on a sample"), "{notes}");
    // Another folder (the spec and snippet named by other paths), and another
    // snippet name, which only the compiler's messages show.
    for (name, snippet_name) in [("b", "distance.cu"), ("c", "my_distance.cu")] {
        folder(name, snippet_name);
        let (again, notes) = compile_and_notes(root.path(), &cache, name);
        assert!(again < 0.05, "{name}: compile_s {again} (first {first}): compiled again");
        assert!(notes.contains("remembered from an earlier run"), "{name}: the promise check ran again: {notes}");
    }
}

/// Issue 49, item 5: `--threads 100000` panicked spawning them (rc 70).
#[test]
fn threads_past_what_the_host_can_spawn_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let o = twobs(dir.path(), &["run", "sdh", "--backend", "cpu", "--input", "uniform:300", "--threads", "100000"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("--threads 100000") && e.contains("at most") && !e.contains("internal error"), "{e}");
    let o =
        twobs(dir.path(), &["run", "sdh", "--backend", "cpu", "--input", "uniform:300", "--threads", "3", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
}
