//! The host's memory and cores: how much memory a run can still take, so
//! that a request that cannot fit is refused early, naming what was asked
//! and what the machine has, instead of aborting on a failed allocation (or
//! being killed) later; and how many cores it has, read once.
//! GPU memory is checked where the GPUs are planned.

/// What the host has: bytes available to this process now, and in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub available: u64,
    pub total: u64,
}

impl Host {
    /// The machine's memory: /proc/meminfo's MemAvailable and MemTotal (sysinfo
    /// where there is no /proc), each lowered to a cgroup's limit where one
    /// is set. None where neither can be read.
    pub fn now() -> Option<Host> {
        let (mut available, mut total) = meminfo().or_else(sysinfo)?;
        if let Some((limit, used)) = cgroup_limit() {
            total = total.min(limit);
            available = available.min(limit.saturating_sub(used));
        }
        Some(Host { available, total })
    }

    /// Refuses `needed` bytes for `what` (`"uniform:2000000000: 2000000000
    /// points of 3 values"`) where they are more than is available.
    pub fn check(&self, what: impl FnOnce() -> String, needed: u64) -> Result<(), TooLarge> {
        if needed <= self.available {
            return Ok(());
        }
        Err(TooLarge { what: what(), needed, host: *self })
    }
}

/// A request larger than the host's memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} need {} of memory, and this machine has {} available ({} in all)",
    bytes(*needed),
    bytes(host.available),
    bytes(host.total)
)]
pub struct TooLarge {
    pub what: String,
    pub needed: u64,
    pub host: Host,
}

/// `needed` bytes for `what`, checked against the host's memory now; passed
/// where the host's memory cannot be read.
pub fn check(what: impl FnOnce() -> String, needed: u64) -> Result<(), TooLarge> {
    match Host::now() {
        Some(host) => host.check(what, needed),
        None => Ok(()),
    }
}

/// The longest line a text twobs reads may have (a text of points, a spec,
/// a snippet): far more than any row of numbers or line of code, and what
/// stops a file that is no text (/dev/zero, a binary file named .csv) from
/// being taken whole as one line.
pub const LONGEST_LINE: u64 = 16 << 20;

/// A reader that refuses to read without bound: more bytes in all than
/// `limit` (the memory available, where the file's size says nothing: a
/// FIFO, a device), or, for text, a line longer than [`LONGEST_LINE`].
pub struct Bounded<R> {
    inner: R,
    read: u64,
    limit: u64,
    /// Bytes since the last newline, where lines are bounded.
    line: Option<u64>,
    /// What the file is where it is not a regular file, for messages.
    kind: Option<&'static str>,
}

impl<R: std::io::Read> std::io::Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        let what = || self.kind.map_or(String::new(), |k| format!(" (it is {k}, not a regular file)"));
        if self.read > self.limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "more than {} without an end, more than this machine's memory available{}",
                    bytes(self.limit),
                    what()
                ),
            ));
        }
        if let Some(line) = self.line.as_mut() {
            *line = match buf[..n].iter().rposition(|&b| b == b'\n') {
                Some(at) => (n - at - 1) as u64,
                None => *line + n as u64,
            };
            if *line > LONGEST_LINE {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a line longer than {}: not a text file{}", bytes(LONGEST_LINE), what()),
                ));
            }
        }
        Ok(n)
    }
}

/// What a file that is not a regular one is, in words.
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a folder"
    } else {
        "a special file"
    })
}

/// Opens `path` to read without bound on nothing: a regular file's size is
/// checked against the memory available before anything is read (what it
/// holds is kept in memory, as points or text); a stream or device is read
/// in chunks up to the memory available. `text`: lines are bounded too
/// ([`LONGEST_LINE`]).
pub fn open_bounded(path: &std::path::Path, text: bool) -> std::io::Result<Bounded<std::fs::File>> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    // A folder opens, and its first read fails with the system's own words (EISDIR).
    let kind = kind_of(&meta);
    let available = Host::now().map_or(u64::MAX, |h| h.available);
    if kind.is_none() {
        let size = meta.len();
        if let Some(host) = Host::now() {
            host.check(|| format!("its {} of {}", bytes(size), if text { "text" } else { "data" }), size)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e.to_string()))?;
        }
    }
    Ok(Bounded { inner: file, read: 0, limit: available, line: text.then_some(0), kind })
}

/// The whole text at `path`, read within bounds ([`open_bounded`]): a spec,
/// a snippet.
pub fn read_text(path: &std::path::Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut open_bounded(path, true)?, &mut text)?;
    Ok(text)
}

/// The whole file at `path` as bytes, read within bounds ([`open_bounded`]).
pub fn read_bytes(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_bounded(path, false)?, &mut bytes)?;
    Ok(bytes)
}

/// A size for people: `2.3 GiB`, `512.0 MiB`, `12 bytes`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

/// (MemAvailable, MemTotal) in bytes.
fn meminfo() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

/// (free + buffers, total) from sysinfo(2).
fn sysinfo() -> Option<(u64, u64)> {
    // SAFETY: sysinfo fills the struct it is given, which is plain data.
    let info = unsafe {
        let mut info: libc::sysinfo = std::mem::zeroed();
        if libc::sysinfo(&mut info) != 0 {
            return None;
        }
        info
    };
    let unit = info.mem_unit.max(1) as u64;
    Some(((info.freeram as u64 + info.bufferram as u64) * unit, info.totalram as u64 * unit))
}

/// A cgroup v2 memory limit and what the group uses now, where one is set.
fn cgroup_limit() -> Option<(u64, u64)> {
    let read = |name: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{name}")).ok();
    let limit: u64 = read("memory.max")?.trim().parse().ok()?; // "max" where there is none
    let used: u64 = read("memory.current").and_then(|u| u.trim().parse().ok()).unwrap_or(0);
    Some((limit, used))
}

/// The host's cores, read once per process: `available_parallelism` reads
/// the affinity mask and the cgroup's quota (files under /proc and /sys),
/// 13-40 us a call on the development VM, and a session's call asked it
/// several times.
pub fn host_cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The most CPU threads a run takes: 1024, or four a core on a larger host.
/// More only multiplies threads that wait (each holds a stack), and a number
/// the system cannot spawn would end the run half way.
pub fn most_threads() -> usize {
    (4 * host_cores()).max(1024)
}

/// `threads` where a run can take so many (0: every core), or why not.
pub fn check_threads(threads: usize) -> Result<usize, String> {
    match threads {
        0 => Ok(host_cores()),
        n if n <= most_threads() => Ok(n),
        n => Err(format!(
            "{n} CPU threads: at most {} on this host of {} cores (0 takes every core)",
            most_threads(),
            host_cores()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_past_what_a_host_can_spawn_are_refused_with_the_bound() {
        assert_eq!(check_threads(0), Ok(host_cores()));
        assert_eq!(check_threads(3), Ok(3));
        let e = check_threads(100_000).unwrap_err();
        assert!(e.contains("100000 CPU threads: at most") && e.contains("0 takes every core"), "{e}");
    }

    #[test]
    fn this_machine_has_memory_and_says_how_much() {
        let host = Host::now().expect("/proc/meminfo or sysinfo");
        assert!(host.available > 0 && host.available <= host.total, "{host:?}");
    }

    #[test]
    fn a_bounded_reader_refuses_a_line_or_a_stream_past_its_bounds() {
        use std::io::Read;
        let bounded = |bytes: Vec<u8>, limit: u64, text: bool| Bounded {
            inner: std::io::Cursor::new(bytes),
            read: 0,
            limit,
            line: text.then_some(0),
            kind: Some("a character device"),
        };
        let mut out = Vec::new();
        // Lines of any number, each short: read whole.
        let lines = b"1,2,3\n".repeat(1 << 20);
        assert_eq!(bounded(lines.clone(), u64::MAX, true).read_to_end(&mut out).unwrap(), lines.len());
        // One line past LONGEST_LINE, as /dev/zero gives: refused, and says what the file is.
        let e = bounded(vec![0; LONGEST_LINE as usize + 2], u64::MAX, true).read_to_end(&mut out).unwrap_err();
        assert!(e.to_string().contains("a line longer than 16.0 MiB") && e.to_string().contains("character device"));
        // Binary data has no lines, but a stream is bounded by the memory available.
        assert!(bounded(vec![0; 1 << 20], 1 << 21, false).read_to_end(&mut out).is_ok());
        let e = bounded(vec![0; 1 << 20], 1 << 19, false).read_to_end(&mut out).unwrap_err();
        assert!(e.to_string().contains("more than 512.0 KiB without an end"), "{e}");
    }

    #[test]
    fn a_request_above_what_is_available_names_both() {
        let host = Host { available: 3 << 30, total: 4 << 30 };
        assert!(host.check(|| "a small thing".into(), 1 << 30).is_ok());
        let e = host.check(|| "uniform:2000000000: 2000000000 points of 3 values".into(), 72 << 30).unwrap_err();
        assert_eq!(
            e.to_string(),
            "uniform:2000000000: 2000000000 points of 3 values need 72.0 GiB of memory, and this machine has 3.0 GiB available (4.0 GiB in all)"
        );
        assert_eq!(bytes(12), "12 bytes");
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
