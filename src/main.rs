/// The command line's allocator: jemalloc, which keeps freed memory for the
/// next run's buffers (Cargo.toml says why). The library sets none: the
/// program that links it chooses.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    default_signals();
    twobs::cli::main()
}

/// Rust ignores SIGPIPE, so `twobs plan sdh | head` would fail writing to a
/// closed pipe; like other Unix tools, twobs should just stop. SIGXFSZ is
/// ignored instead: a file past `ulimit -f` then fails its write with EFBIG,
/// an error that removes the partial file, rather than killing the process.
fn default_signals() {
    // SAFETY: sets two signals' dispositions, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
