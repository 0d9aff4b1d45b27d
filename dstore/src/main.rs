//! `dstore`: inspect, exchange and picture decision stores, and serve them
//! to agents and people.
//!
//! Thin layers over the library, in floors that import only downwards
//! (`tests/floors.rs` keeps them):
//!
//! | floor | what |
//! |---|---|
//! | `main` | the command line's grammar; each command to the face that runs it |
//! | `serve` | the HTTP faces composed on one listener, behind the token, Host and Origin guards |
//! | faces: `cli`, `mcp`, `web` | side by side, none importing another: parse their input, call the library, shape the answer |
//! | `app` | what several faces share: opening stores, report documents, the writer thread, errors to exit codes and statuses |
//!
//! Exit status: 0 ok, 1 problems found, 2 bad usage or input, 3 the
//! environment failed. Data goes to stdout, one-line diagnostics to stderr.

mod app;
mod cli;
mod mcp;
mod serve;
mod web;

// The commands allocate and free many small strings (decoded decisions,
// JSON); mimalloc does that markedly faster than glibc's malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

/// C's `calloc` on mimalloc's `malloc` (its own `mi_calloc` is behind a feature of the -sys crate).
unsafe extern "C" fn mi_calloc(count: usize, size: usize) -> *mut std::ffi::c_void {
    let Some(bytes) = count.checked_mul(size) else { return std::ptr::null_mut() };
    // SAFETY: mi_malloc returns `bytes` writable bytes, or null.
    unsafe {
        let p = libmimalloc_sys::mi_malloc(bytes);
        if !p.is_null() {
            std::ptr::write_bytes(p.cast::<u8>(), 0, bytes);
        }
        p
    }
}

use clap::{Parser, Subcommand};

/// Inspect, exchange and picture decision-store files.
#[derive(Debug, Parser)]
#[command(name = "dstore", version, about, long_about = None, max_term_width = 100)]
struct Dstore {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Store(cli::Command),
    /// Serve the store to one agent over the Model Context Protocol, on
    /// stdin and stdout (see docs/agents.md).
    Mcp(mcp::StdioArgs),
    /// Serve the store to many agents over the Model Context Protocol
    /// (Streamable HTTP at /mcp) until SIGTERM or Ctrl-C.
    Serve(serve::ServeArgs),
    /// Serve the web view of a store, opened read-only, until SIGTERM or
    /// Ctrl-C: plans, decisions, history, staleness, calibration, context.
    Ui(serve::UiArgs),
}

fn main() -> ExitCode {
    // tree-sitter's parsers allocate (and free) a node at a time in C: from
    // mimalloc too, not glibc's malloc (about 6 % of an ingest's time).
    // SAFETY: the four functions are mimalloc's, and no tree-sitter object
    // exists yet (nothing else has run).
    unsafe {
        tree_sitter::set_allocator(Some(tree_sitter::Allocator {
            malloc: libmimalloc_sys::mi_malloc,
            calloc: mi_calloc,
            realloc: libmimalloc_sys::mi_realloc,
            free: libmimalloc_sys::mi_free,
        }));
    }
    let ran = match Dstore::parse().command {
        Command::Store(command) => cli::run(command),
        Command::Mcp(args) => mcp::stdio(&args),
        Command::Serve(args) => serve::serve(&args),
        Command::Ui(args) => serve::serve(&args.into()),
    };
    match ran {
        Ok(code) => ExitCode::from(code),
        Err(failure) if failure.is_broken_pipe() => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("dstore: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
