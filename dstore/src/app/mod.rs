//! The application floor: what several faces share, so that none of them
//! decides it alone. Opening the store a command or server names; the
//! documents the command prints and the web view serves; the server's
//! writer thread and reader pool; the reliability diagram; numbers as a
//! person reads them; query strings; and the one mapping of a failure to
//! an exit status, an HTTP status and a JSON-RPC error. It imports the
//! library only, never a face.

pub mod chart;
pub mod errors;
pub mod form;
pub mod open;
pub mod reports;
pub mod stores;
pub mod text;
