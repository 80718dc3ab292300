fn main() -> std::process::ExitCode {
    restore_sigpipe();
    twobs::cli::main()
}

/// Rust ignores SIGPIPE, so `twobs plan sdh | head` would fail writing to a
/// closed pipe; like other Unix tools, twobs should just stop.
fn restore_sigpipe() {
    #[cfg(unix)]
    {
        unsafe extern "C" {
            fn signal(signum: i32, handler: usize) -> usize;
        }
        const SIGPIPE: i32 = 13;
        const SIG_DFL: usize = 0;
        // SAFETY: resets one signal's disposition to the default, before any thread starts.
        unsafe { signal(SIGPIPE, SIG_DFL) };
    }
}
