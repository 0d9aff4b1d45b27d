//! The `dstore` command's suites in one test binary: each runs the command
//! that Cargo built for this crate (`CARGO_BIN_EXE_dstore`) and checks what
//! it printed and how it ended.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod docs;
mod first_hour;
mod floors;
mod ingest;
mod integrity;
mod redaction;
mod review;
