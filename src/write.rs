//! Result files people can open, in the format the user names: CSV with a
//! header, .npy arrays, or JSON; to a file, or to standard output. A file is
//! written beside its place under a temporary name and renamed into place when
//! complete, so that a failed run leaves no partial file; where it goes is
//! checked before anything is computed ([`Target::new`]). What is not a
//! regular file (a character device such as /dev/null, a FIFO, a terminal, or
//! a link to one) is written in place, streamed as standard output is, and
//! never replaced ([`Place`]).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use npyz::WriterBuilder;
use serde_json::json;

use crate::data::Column;
use crate::outcome::{PairList, Totals};

/// A result that could not be written, or a destination that cannot take one.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {}: {cause}", path.display())]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("{}: the extension names no result format; use .csv, .npy or .json, or name the format", path.display())]
    UnknownFormat { path: PathBuf },
    #[error("{0}")]
    Stdout(#[source] StdoutFailed),
    #[error("{output} would replace {other}: {why}")]
    Clash { output: String, other: String, why: &'static str },
}

/// A write to standard output that failed: a full disk (`> /dev/full`), a
/// closed pipe (`| head -1`, which the command line ends quietly on).
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output: {0}")]
pub struct StdoutFailed(#[source] pub std::io::Error);

impl StdoutFailed {
    /// Whether the reader went away (EPIPE): what `head` does once it has its lines.
    pub fn closed(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

/// Writes `text` to standard output and flushes it: a failure is an error
/// naming the stream, never a panic (as `println!`'s is).
pub fn print(text: &str) -> Result<(), WriteError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| WriteError::Stdout(StdoutFailed(e)))
}

/// Names the file an I/O error was about.
trait At<T> {
    fn at(self, path: &Path) -> Result<T, WriteError>;
}

impl<T> At<T> for std::io::Result<T> {
    fn at(self, path: &Path) -> Result<T, WriteError> {
        self.map_err(|source| WriteError::Io { path: path.to_owned(), cause: source })
    }
}

/// A result file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Text with a header line.
    Csv,
    /// NumPy arrays (`numpy.load`).
    Npy,
    Json,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Csv, Format::Npy, Format::Json];

    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Npy => "npy",
            Format::Json => "json",
        }
    }

    /// The format a file's extension names.
    pub fn of_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| f.name() == ext)
    }
}

/// Where a result goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    File(PathBuf),
    Stdout,
}

/// A destination and the format the result takes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub destination: Destination,
    pub format: Format,
}

impl Target {
    /// The format is `format`, else the file's extension's (an unknown one is
    /// an error), else CSV for standard output. A file's folder is made and
    /// shown writable now, before any computation.
    pub fn new(destination: Destination, format: Option<Format>) -> Result<Target, WriteError> {
        let format = match (&destination, format) {
            (_, Some(f)) => f,
            (Destination::Stdout, None) => Format::Csv,
            (Destination::File(path), None) => match Format::of_path(path) {
                Some(f) => f,
                // A stream (/dev/null, a FIFO) takes what standard output takes.
                None if matches!(Place::of(path), Place::InPlace(_)) => Format::Csv,
                None => return Err(WriteError::UnknownFormat { path: path.clone() }),
            },
        };
        if let Destination::File(path) = &destination {
            check_writable(path).at(path)?;
        }
        Ok(Target { destination, format })
    }

    /// A file target, its format from its extension.
    pub fn file(path: impl Into<PathBuf>) -> Result<Target, WriteError> {
        Target::new(Destination::File(path.into()), None)
    }

    /// Where it goes, for messages and the report.
    pub fn shown(&self) -> String {
        match &self.destination {
            Destination::File(p) => p.display().to_string(),
            Destination::Stdout => "standard output".into(),
        }
    }

    /// Writes `body`: to stdout, or to a partial file renamed into place once complete.
    fn write(&self, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), WriteError> {
        let staged = self.stage(body)?;
        commit(staged.into_iter().collect()).map_err(|(path, cause)| WriteError::Io { path, cause })
    }

    /// Writes `body`: to stdout or a stream in place, or to a partial file
    /// for [`commit`] to put in place.
    fn stage(&self, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<Option<Staged>, WriteError> {
        match &self.destination {
            Destination::Stdout => {
                let mut out = std::io::stdout().lock();
                body(&mut out).and_then(|()| out.flush()).map_err(|e| WriteError::Stdout(StdoutFailed(e)))?;
                Ok(None)
            }
            Destination::File(path) => match Place::of(path) {
                Place::InPlace(stream) => in_place(&stream, body).at(path).map(|()| None),
                Place::Replace(file) => stage(&file, body).at(path).map(Some),
            },
        }
    }
}

/// A file a command reads or writes, as the user named it (`--out x.csv`).
#[derive(Debug, Clone)]
pub struct Named {
    pub role: String,
    pub path: PathBuf,
}

impl Named {
    pub fn new(role: impl std::fmt::Display, path: impl Into<PathBuf>) -> Named {
        let path = path.into();
        Named { role: format!("{role} {}", path.display()), path }
    }
}

/// Refuses, before anything is computed, an output that is an input (a
/// user's own file is never overwritten) or the same file as another output
/// (one would silently replace the other). Links and other spellings of a
/// path are seen through.
pub fn refuse_clashes(outputs: &[Named], inputs: &[Named]) -> Result<(), WriteError> {
    for (k, out) in outputs.iter().enumerate() {
        if let Some(input) = inputs.iter().find(|i| same_file(&out.path, &i.path)) {
            return Err(WriteError::Clash {
                output: out.role.clone(),
                other: input.role.clone(),
                why: "a result never overwrites an input; write it to another file",
            });
        }
        // Two results to one character device (/dev/null, a terminal) are both written there.
        let device = std::fs::metadata(&out.path).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_char_device()
        });
        if let Some(other) = outputs[..k].iter().find(|o| !device && same_file(&out.path, &o.path)) {
            return Err(WriteError::Clash {
                output: out.role.clone(),
                other: other.role.clone(),
                why: "two outputs in one file would leave only the last; give each its own",
            });
        }
    }
    Ok(())
}

/// Whether two paths name one file: the same inode where both exist, or the
/// same name in the same folder.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    let place = |p: &Path| -> Option<PathBuf> {
        let folder = p.parent().filter(|f| !f.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Some(std::fs::canonicalize(folder).ok()?.join(p.file_name()?))
    };
    place(a).is_some_and(|pa| Some(pa) == place(b))
}

/// Shows that a file can be made at `path` (its folder exists and takes
/// files) by making and removing a partial file there: what a command checks
/// before it computes anything. A stream written in place ([`Place`]) is
/// only asked whether it may be written: opening a FIFO would wait for its reader.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    // A folder in the file's place would fail only at the end, its rename.
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, "a folder is in its place"));
    }
    match Place::of(path) {
        Place::InPlace(stream) => may_write(&stream),
        Place::Replace(file) => Staged::create(&file).map(drop),
    }
}

/// Writes `path` through a partial file beside it, renamed into place once
/// complete and synced; on failure, a panic, or SIGINT/SIGTERM meanwhile, the
/// partial file is removed, so that no half-written file is ever left. A
/// stream ([`Place::InPlace`]) is written in place instead, never replaced.
pub fn file_atomically(path: &Path, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    match Place::of(path) {
        Place::InPlace(stream) => in_place(&stream, body),
        Place::Replace(file) => commit(vec![stage(&file, body)?]).map_err(|(_, e)| e),
    }
}

/// How a file destination is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A regular file, or none yet: through a partial file renamed onto this
    /// path, the end of the links the user's path may be (so that a link
    /// stays a link, and the file it names gets the result).
    Replace(PathBuf),
    /// Not a regular file (a character device such as /dev/null, a FIFO, a
    /// terminal, a socket), or a file reached through /proc/PID/fd or
    /// /dev/fd (the file a process has open, `/dev/stdout`): opened where it
    /// is and written in order, as standard output is; never replaced.
    InPlace(PathBuf),
}

impl Place {
    /// Where and how a result for `path` is written.
    pub fn of(path: &Path) -> Place {
        let (at, through_fd) = follow(path);
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() && !m.is_dir() => Place::InPlace(path.to_owned()),
            _ if through_fd => Place::InPlace(path.to_owned()),
            _ => Place::Replace(at),
        }
    }
}

/// The end of the links `path` may be (at most 40, as the kernel follows),
/// and whether they pass through a process's open file ([`is_fd_link`]).
fn follow(path: &Path) -> (PathBuf, bool) {
    let mut at = path.to_owned();
    let mut through_fd = is_fd_link(path);
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let Ok(to) = std::fs::read_link(&at) else { break };
                at = if to.is_absolute() { to } else { at.parent().unwrap_or(Path::new("")).join(to) };
                through_fd |= is_fd_link(&at);
            }
            _ => break,
        }
    }
    (at, through_fd)
}

/// Whether `path` names a file a process has open (`/proc/self/fd/1`,
/// `/dev/fd/1`, which `/dev/stdout` leads to) rather than a place in a folder.
fn is_fd_link(path: &Path) -> bool {
    let p = path.to_string_lossy();
    p.starts_with("/dev/fd/") || (p.starts_with("/proc/") && p.split('/').nth(3) == Some("fd"))
}

/// Writes `body` to the stream at `path` in place (a device, a FIFO: opened
/// for writing, never made, truncated only where it is a regular file).
fn in_place(path: &Path, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<()> {
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    let file = std::fs::OpenOptions::new().write(true).truncate(regular).open(path)?;
    let mut w = BufWriter::new(file);
    body(&mut w)?;
    w.flush()
}

/// Whether this process may write `path` (access(2)), without opening it.
fn may_write(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Writes a partial file for `path` and syncs it; [`commit`] puts it in place.
pub fn stage(path: &Path, body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<Staged> {
    let (staged, file) = Staged::create(path)?;
    let mut w = BufWriter::new(file);
    body(&mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(staged)
}

/// Renames complete partial files into place, the files of one result
/// together: all of them or none. SIGINT or SIGTERM meanwhile waits until
/// every one is in place; where a rename fails, the files already renamed
/// are put back as they were (each replaced file is kept under a link until
/// all are in place). A failure names the file that could not be put in place.
pub fn commit(mut staged: Vec<Staged>) -> Result<(), (PathBuf, std::io::Error)> {
    let mut registry = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    // What each destination held before, linked under a partial name.
    let mut kept: Vec<Option<PathBuf>> = Vec::new();
    if staged.len() > 1 {
        for s in &staged {
            let backup = partial_path(&s.path);
            kept.push(std::fs::hard_link(&s.path, &backup).ok().map(|()| backup));
        }
    }
    let mut failed = None;
    for (k, s) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(&s.partial, &s.path) {
            failed = Some((k, e));
            break;
        }
    }
    match failed {
        None => {
            for s in &mut staged {
                registry.retain(|p| p != &s.partial);
                s.committed = true;
            }
            kept.into_iter().flatten().for_each(|b| drop(std::fs::remove_file(b)));
            Ok(())
        }
        Some((k, e)) => {
            for (s, before) in staged[..k].iter().zip(kept.iter().chain(std::iter::repeat(&None))) {
                let _ = match before {
                    Some(b) => std::fs::rename(b, &s.path),
                    None => std::fs::remove_file(&s.path),
                };
            }
            kept.into_iter().flatten().for_each(|b| drop(std::fs::remove_file(b)));
            // The partial files not renamed go as their Staged drop.
            for s in &mut staged[..k] {
                registry.retain(|p| p != &s.partial);
                s.committed = true;
            }
            drop(registry);
            Err((staged[k].path.clone(), e))
        }
    }
}

/// Opens a new file at `path` for writing: never one that exists, never
/// through a symbolic link (`O_EXCL`, `O_NOFOLLOW`), with mode 0666 less
/// the umask, as any file the user makes.
pub fn create_exclusive(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o666).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// The partial files being written now, so that an interrupted run can remove them.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A partial file made for `path` and registered for removal: removed when
/// dropped before [`commit`] put it in place (an error, a panic unwinding).
#[derive(Debug)]
pub struct Staged {
    partial: PathBuf,
    path: PathBuf,
    committed: bool,
}

impl Staged {
    /// Makes an empty partial file beside `path`, under a name nobody can
    /// guess, exclusively: a file or link planted at a partial name is never
    /// opened, let alone truncated. It is made and registered under one lock,
    /// so that a signal removes it or finds nothing of it, and never removes
    /// a file that twobs did not make.
    pub fn create(path: &Path) -> std::io::Result<(Staged, std::fs::File)> {
        sweep_dead_partials(path.parent().filter(|f| !f.as_os_str().is_empty()).unwrap_or(Path::new(".")));
        let mut registry = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = None;
        for _ in 0..8 {
            let partial = partial_path(path);
            match create_exclusive(&partial) {
                Ok(file) => {
                    registry.push(partial.clone());
                    return Ok((Staged { partial, path: path.to_owned(), committed: false }, file));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("eight tries"))
    }

    /// Where the file is being made.
    pub fn partial(&self) -> &Path {
        &self.partial
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            PARTIAL.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| p != &self.partial);
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Removes the partial files being written (a panic unwound past them).
pub fn remove_partial_files() {
    for p in PARTIAL.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

/// What a run interrupted by a signal does: removes the partial files being
/// written and ends the process with `status`, holding the lock the whole
/// time, so that no thread begins or commits a file in between.
pub fn remove_partial_files_and_exit(status: i32) -> ! {
    let mut registry = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    for p in registry.drain(..) {
        let _ = std::fs::remove_file(p);
    }
    // SAFETY: _exit ends the process at once; no destructor (of a GPU
    // context, or of a driver library) runs on another thread's state.
    unsafe { libc::_exit(status) }
}

/// The longest part of a file name kept in a partial file's name: the
/// rest of it (a dot, the host, the process, a random number) keeps it
/// within NAME_MAX.
const PARTIAL_NAME_BYTES: usize = 128;

/// A name beside `path`, unique to this call and not guessable by another
/// user, to write it under until it is complete:
/// `.NAME.twobs-HOST-PID-RANDOM.partial`, which says whose it is
/// ([`sweep_dead_partials`]).
fn partial_path(path: &Path) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("result");
    let mut end = name.len().min(PARTIAL_NAME_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let random: u64 = rand::random();
    path.with_file_name(format!(".{}.twobs-{}-{}-{random:016x}.partial", &name[..end], host(), std::process::id()))
}

/// This machine's name as a partial file's name holds it: letters, digits
/// and `_`, at most 32 of them. A folder shared between machines (a home
/// over NFS) holds partial files of processes that this one cannot see.
fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into buf.
        let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
        let name = if ok { &buf[..buf.iter().position(|&b| b == 0).unwrap_or(buf.len())] } else { b"host" };
        name.iter().take(32).map(|&b| if b.is_ascii_alphanumeric() { b as char } else { '_' }).collect()
    })
}

/// The process a partial file's name says made it, where this host made it.
fn partial_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_suffix(".partial")?;
    let (_, tail) = rest.rsplit_once(".twobs-")?;
    let mut parts = tail.rsplitn(3, '-');
    let (random, pid, from) = (parts.next()?, parts.next()?, parts.next()?);
    let ours = from == host() && random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit());
    ours.then(|| pid.parse().ok()).flatten()
}

/// Whether process `pid` of this host still runs (kill(pid, 0); one of
/// another user's is running too).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return true };
    // SAFETY: signal 0 only asks whether the process exists.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// Removes, once a process for each folder it writes in, the partial files
/// that runs of this host left there when they were killed (SIGKILL, the
/// memory killer, a power cut): files of the user's own, named as
/// [`partial_path`] names them, whose process is gone.
fn sweep_dead_partials(folder: &Path) {
    use std::os::unix::fs::MetadataExt;
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if swept.iter().any(|f| f == folder) {
            return;
        }
        swept.push(folder.to_owned());
    }
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(partial_owner) else { continue };
        let own_file = entry.metadata().is_ok_and(|m| m.is_file() && m.uid() == me);
        if own_file && pid != std::process::id() && !alive(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A histogram: bucket edges, one total per bucket, and g(r) where normalized.
pub struct Histogram<'a> {
    pub edges: &'a [f64],
    pub totals: &'a Totals,
    pub g: Option<&'a [f64]>,
}

/// A JSON document (the run's report), pretty-printed.
pub fn document(target: &Target, value: &serde_json::Value) -> Result<(), WriteError> {
    target.write(|w| {
        serde_json::to_writer_pretty(&mut *w, value)?;
        writeln!(w)
    })
}

/// Named columns of one row per bucket: CSV with a header, an N x C float64
/// npy of the columns in order, or a JSON object of arrays.
/// A bucket edge as CSV text: the shortest decimal that reads back as the same
/// float32 where the edge is one (the spec's f32 parameters make them:
/// `0.05`, not `0.04999999867545234`), else the f64's shortest.
pub fn edge_text(x: f64) -> String {
    let narrow = x as f32;
    if narrow as f64 == x { narrow.to_string() } else { x.to_string() }
}

/// Writes named columns of numbers; the first `edges` columns are bucket
/// edges, written in CSV as [`edge_text`] says.
pub fn table(target: &Target, columns: &[(&str, &[f64])], edges: usize) -> Result<(), WriteError> {
    let n = columns.first().map_or(0, |(_, c)| c.len());
    target.write(|w| match target.format {
        Format::Csv => {
            writeln!(w, "{}", columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(","))?;
            for k in 0..n {
                let row: Vec<String> = columns
                    .iter()
                    .enumerate()
                    .map(|(i, (_, c))| if i < edges { edge_text(c[k]) } else { c[k].to_string() })
                    .collect();
                writeln!(w, "{}", row.join(","))?;
            }
            Ok(())
        }
        Format::Npy => {
            let shape = [n as u64, columns.len() as u64];
            let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(w).begin_nd()?;
            for k in 0..n {
                npy.extend(columns.iter().map(|(_, c)| c[k]))?;
            }
            npy.finish()
        }
        // JSON has no NaN: an undefined value (xi where RR is 0) is null.
        Format::Json => {
            let object: serde_json::Map<String, serde_json::Value> = columns
                .iter()
                .map(|(name, c)| {
                    let values = c.iter().map(|x| if x.is_finite() { json!(x) } else { json!(null) });
                    (name.to_string(), values.collect())
                })
                .collect();
            writeln!(w, "{}", serde_json::Value::Object(object))
        }
    })
}

/// One row per bucket: bin_lo, bin_hi, count (or sum) and g_r. As npy, an
/// N x 3 (or 4) float64 array of those columns.
pub fn histogram(target: &Target, h: &Histogram) -> Result<(), WriteError> {
    let column = match h.totals {
        Totals::Counts(_) => "count",
        Totals::Sums(_) => "sum",
    };
    let totals = h.totals.as_f64();
    let n = totals.len();
    target.write(|w| match target.format {
        Format::Csv => {
            writeln!(w, "bin_lo,bin_hi,{column}{}", if h.g.is_some() { ",g_r" } else { "" })?;
            for k in 0..n {
                let (lo, hi) = (edge_text(h.edges[k]), edge_text(h.edges[k + 1]));
                match h.totals {
                    Totals::Counts(c) => write!(w, "{lo},{hi},{}", c[k])?,
                    Totals::Sums(s) => write!(w, "{lo},{hi},{}", s[k])?,
                }
                if let Some(g) = h.g {
                    write!(w, ",{}", g[k])?;
                }
                writeln!(w)?;
            }
            Ok(())
        }
        Format::Npy => {
            let cols = if h.g.is_some() { 4 } else { 3 };
            let mut npy = npyz::WriteOptions::new().default_dtype().shape(&[n as u64, cols]).writer(w).begin_nd()?;
            for k in 0..n {
                npy.extend([h.edges[k], h.edges[k + 1], totals[k]])?;
                if let Some(g) = h.g {
                    npy.push(&g[k])?;
                }
            }
            npy.finish()
        }
        Format::Json => {
            let mut v = json!({ "bin_lo": &h.edges[..n], "bin_hi": &h.edges[1..] });
            v[column] = match h.totals {
                Totals::Counts(c) => json!(c),
                Totals::Sums(s) => json!(s),
            };
            if let Some(g) = h.g {
                v["g_r"] = json!(g);
            }
            writeln!(w, "{v}")
        }
    })
}

/// A 2-D histogram, one row per cell (the first axis's bucket outer, as the
/// slots lie): `A_lo,A_hi,B_lo,B_hi,count` (or `sum`) for axes named A and B,
/// as [`table`] writes columns (an N x 5 float64 npy, JSON arrays).
pub fn histogram2d(target: &Target, axes: &[(String, Vec<f64>)], totals: &Totals) -> Result<(), WriteError> {
    let [(a, ea), (b, eb)] = axes else { unreachable!("a 2-D histogram has two axes") };
    let (na, nb) = (ea.len() - 1, eb.len() - 1);
    let cell = |f: &dyn Fn(usize, usize) -> f64| -> Vec<f64> { (0..na * nb).map(|s| f(s / nb, s % nb)).collect() };
    let columns =
        [cell(&|i, _| ea[i]), cell(&|i, _| ea[i + 1]), cell(&|_, j| eb[j]), cell(&|_, j| eb[j + 1]), totals.as_f64()];
    let names = [
        format!("{a}_lo"),
        format!("{a}_hi"),
        format!("{b}_lo"),
        format!("{b}_hi"),
        match totals {
            Totals::Counts(_) => "count".to_owned(),
            Totals::Sums(_) => "sum".to_owned(),
        },
    ];
    let named: Vec<(&str, &[f64])> = names.iter().map(String::as_str).zip(columns.iter().map(Vec::as_slice)).collect();
    table(target, &named, 4)
}

/// One total (a count or a sum) under `name`: `name` and the number as CSV, a
/// one-element npy (uint64 or float64), or `{"name": number}`.
pub fn scalar(target: &Target, name: &str, total: &Totals) -> Result<(), WriteError> {
    let value = match total {
        Totals::Counts(c) => json!(c[0]),
        Totals::Sums(s) => json!(s[0]),
    };
    target.write(|w| match target.format {
        Format::Csv => writeln!(w, "{name}\n{value}"),
        Format::Json => writeln!(w, "{}", json!({ name: value })),
        Format::Npy => match total {
            Totals::Counts(c) => {
                let mut npy = npyz::WriteOptions::new().default_dtype().shape(&[1]).writer(w).begin_nd()?;
                npy.push(&c[0])?;
                npy.finish()
            }
            Totals::Sums(s) => {
                let mut npy = npyz::WriteOptions::new().default_dtype().shape(&[1]).writer(w).begin_nd()?;
                npy.push(&s[0])?;
                npy.finish()
            }
        },
    })
}

/// Index pairs named as the run names them (input rows, nothing dropped), as
/// an N x 2 npy of u32 written from memory as it lies: the header, then the
/// pairs' bytes. No copy is made of a result that may fill most of the
/// host's memory. None where the target is not npy.
pub fn pairs_as_found(target: &Target, pairs: &PairList) -> Option<Result<(), WriteError>> {
    if target.format != Format::Npy {
        return None;
    }
    const { assert!(cfg!(target_endian = "little"), "npy's <u4 is the host's u32") };
    // The header dict, padded with spaces to end, after its newline, on a 64-byte boundary.
    let mut dict = format!("{{'descr': '<u4', 'fortran_order': False, 'shape': ({}, 2), }}", pairs.len());
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    Some(target.write(|w| {
        w.write_all(b"\x93NUMPY\x01\x00")?;
        w.write_all(&(dict.len() as u16).to_le_bytes())?;
        w.write_all(dict.as_bytes())?;
        for part in pairs.parts() {
            // SAFETY: [u32; 2] is eight bytes without padding.
            let bytes =
                unsafe { std::slice::from_raw_parts(part.as_ptr().cast::<u8>(), std::mem::size_of_val(&part[..])) };
            w.write_all(bytes)?;
        }
        Ok(())
    }))
}

/// Index pairs: `i,j` rows; an N x 2 npy of u32 (u64 where an index needs it); or JSON [[i, j], ...].
pub fn pairs(target: &Target, pairs: &[[u64; 2]]) -> Result<(), WriteError> {
    target.write(|w| match target.format {
        Format::Csv => {
            writeln!(w, "i,j")?;
            pairs.iter().try_for_each(|[i, j]| writeln!(w, "{i},{j}"))
        }
        Format::Npy => {
            let shape = [pairs.len() as u64, 2];
            if pairs.iter().all(|p| p[0] <= u32::MAX as u64 && p[1] <= u32::MAX as u64) {
                let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(w).begin_nd()?;
                npy.extend(pairs.iter().flat_map(|p| [p[0] as u32, p[1] as u32]))?;
                npy.finish()
            } else {
                let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(w).begin_nd()?;
                npy.extend(pairs.iter().flat_map(|p| [p[0], p[1]]))?;
                npy.finish()
            }
        }
        Format::Json => writeln!(w, "{}", json!(pairs)),
    })
}

/// Where a KNN result written as npy to `path` puts its values:
/// `<stem>_values.npy` beside it, a file or a FIFO in a folder of the
/// user's. None where `path` is a device or a process's open file
/// (/dev/null, a terminal, /dev/stdout): that takes the ids alone, as
/// standard output does, and nothing is made beside it (in /dev).
pub fn knn_values_path(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    if let Place::InPlace(_) = Place::of(path) {
        let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
        if !fifo || follow(path).1 {
            return None;
        }
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("knn");
    Some(path.with_file_name(format!("{stem}_values.npy")))
}

/// The K neighbours of each query: ids (int64, -1 for none) and their values,
/// in the pair function's type, as computed. As npy, the N x K ids and,
/// beside them in `<stem>_values.npy`, the N x K values (returned); as CSV,
/// `query,rank,id,value` rows; as JSON, `{"k": K, "ids": [[...]], "values":
/// [[...]]}` (a missing value is null).
pub fn knn(target: &Target, k: usize, ids: &[i64], values: &Column) -> Result<Option<PathBuf>, WriteError> {
    let k = k.max(1);
    let shape = [(ids.len() / k) as u64, k as u64];
    match target.format {
        Format::Npy => {
            // Both files are written whole before either is put in place.
            let staged_ids = target.stage(|w| {
                let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(w).begin_nd()?;
                npy.extend(ids.iter().copied())?;
                npy.finish()
            })?;
            // The values need a file of their own: none beside standard output or a device.
            let Destination::File(path) = &target.destination else { return Ok(None) };
            let Some(values_path) = knn_values_path(path) else {
                return commit(staged_ids.into_iter().collect())
                    .map(|()| None)
                    .map_err(|(path, cause)| WriteError::Io { path, cause });
            };
            let beside = Target { destination: Destination::File(values_path.clone()), format: Format::Npy };
            let staged_values = beside.stage(|w| {
                fn npy<T: npyz::AutoSerialize + Copy>(w: impl Write, shape: &[u64], v: &[T]) -> std::io::Result<()> {
                    let mut npy = npyz::WriteOptions::new().default_dtype().shape(shape).writer(w).begin_nd()?;
                    npy.extend(v.iter().copied())?;
                    npy.finish()
                }
                match values {
                    Column::F32(v) => npy(w, &shape, v),
                    Column::F64(v) => npy(w, &shape, v),
                    Column::I32(v) => npy(w, &shape, v),
                    Column::I64(v) => npy(w, &shape, v),
                    Column::U32(v) => npy(w, &shape, v),
                }
            })?;
            commit(staged_ids.into_iter().chain(staged_values).collect())
                .map_err(|(path, cause)| WriteError::Io { path, cause })?;
            Ok(Some(values_path))
        }
        Format::Csv => {
            target.write(|w| {
                writeln!(w, "query,rank,id,value")?;
                for (at, id) in ids.iter().enumerate() {
                    writeln!(w, "{},{},{id},{}", at / k, at % k, values.show(at))?;
                }
                Ok(())
            })?;
            Ok(None)
        }
        Format::Json => {
            let rows = |xs: Vec<serde_json::Value>| xs.chunks(k).map(|c| c.to_vec()).collect::<Vec<_>>();
            let v = json!({
                "k": k,
                "ids": rows(ids.iter().map(|&i| json!(i)).collect()),
                "values": rows((0..values.len()).map(|x| values.json(x)).collect()),
            });
            target.write(|w| writeln!(w, "{v}"))?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::edge_text;

    #[test]
    fn an_edge_that_is_a_float32_is_written_as_its_shortest_decimal() {
        assert_eq!(edge_text(0.05f32 as f64), "0.05");
        assert_eq!(edge_text(1.7320508f32 as f64), "1.7320508");
        assert_eq!(edge_text(0.0), "0");
        // Log-spaced edges computed in f64 are no float32: their own shortest decimal.
        assert_eq!(edge_text(0.1), "0.1");
        let log_edge = 0.01f64 * (0.3f64 / 0.01).powf(1.0 / 12.0);
        assert_eq!(edge_text(log_edge).parse::<f64>().unwrap(), log_edge);
    }
}
