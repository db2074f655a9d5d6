fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(node_bootstrap::cli::main())
}
