//! `dstore`: inspect, exchange and picture decision-store files.
//!
//! A thin layer over the library: parse arguments, call the public API,
//! render, and map errors to an exit status (0 ok, 1 problems found, 2 bad
//! usage or input, 3 the environment failed). Data goes to stdout, one-line
//! diagnostics to stderr.

mod cli;
mod mcp;
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

use clap::Parser;

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
