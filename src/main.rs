fn main() -> std::process::ExitCode {
    twobs::cli::main()
}
