//! The library's integration suites in one test binary: one build and one
//! link instead of several, and their tests run side by side on every
//! core. The suites that ingest or reach a server need those features of
//! the library (the workspace's `cargo test` has them: the `dstore` crate
//! enables them); the rest also run in the lean build (`cargo test -p
//! decision-store`). The suites of the `dstore` command are in
//! `dstore/tests/`.

#[cfg(all(feature = "ingest", feature = "postgres"))]
#[path = "../common/mod.rs"]
mod common;

mod downstream;
#[cfg(all(feature = "lang-typescript", feature = "lang-javascript", feature = "lang-go"))]
mod ingest;
#[cfg(all(feature = "ingest", feature = "postgres"))]
mod kept;
#[cfg(all(feature = "ingest", feature = "postgres"))]
mod redaction;
mod reliability;
mod roundtrip;
#[cfg(feature = "ingest")]
mod signals;
#[cfg(all(feature = "ingest", feature = "postgres"))]
mod writers;
