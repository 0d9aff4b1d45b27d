//! `dstore`: inspect, exchange and picture decision-store files.
//!
//! A thin layer over the library: parse arguments, call the public API,
//! render, and map errors to an exit status (0 ok, 1 problems found, 2 bad
//! usage or input, 3 the environment failed). Data goes to stdout, one-line
//! diagnostics to stderr.

mod cli;
mod mcp;

// The commands allocate and free many small strings (decoded decisions,
// JSON); mimalloc does that markedly faster than glibc's malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => ExitCode::from(code),
        Err(failure) if failure.is_broken_pipe() => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("dstore: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
