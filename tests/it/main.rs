//! The integration suites in one test binary: one build and one link
//! instead of eight, and their tests run side by side on every core. The
//! suites that run `dstore`, ingest or reach a server need the whole tool
//! (the `cli` feature); the rest also run in the lean build
//! (`cargo test --no-default-features`).

#[cfg(feature = "cli")]
#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "cli")]
mod cli;
mod downstream;
#[cfg(feature = "cli")]
mod ingest;
#[cfg(feature = "cli")]
mod integrity;
mod reliability;
#[cfg(feature = "cli")]
mod review;
mod roundtrip;
#[cfg(feature = "cli")]
mod signals;
#[cfg(feature = "cli")]
mod writers;
