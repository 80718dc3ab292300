/// The command line's allocator: jemalloc, which keeps freed memory for the
/// next run's buffers (Cargo.toml says why). The library sets none: the
/// program that links it chooses.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(twobs::cli::main(std::env::args_os()))
}
