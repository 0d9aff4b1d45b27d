//! A failure as each face answers it: the command's exit status, the web
//! view's HTTP status, a JSON-RPC error code of the MCP server. The library
//! tells the kind ([`Error::kind`]); these few lines are the one place that
//! maps it.

use std::io;

use decision_store::{Error, ErrorKind};

/// A command's exit status for a failure of `kind`: 2 for what the caller
/// can mend (the input, the store named), 3 when the environment failed
/// (the README's table). 1, "problems found", is a command's own answer.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotFound | ErrorKind::InvalidInput | ErrorKind::Incompatible => 2,
        ErrorKind::Busy | ErrorKind::Unavailable | ErrorKind::ReadOnly | ErrorKind::Internal => 3,
    }
}

/// The HTTP status of a failure of `kind`.
pub fn http_status(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::NotFound => 404,
        ErrorKind::InvalidInput => 400,
        ErrorKind::ReadOnly => 405,
        ErrorKind::Busy | ErrorKind::Unavailable => 503,
        ErrorKind::Incompatible | ErrorKind::Internal => 500,
    }
}

/// The JSON-RPC error code of a failure of `kind` where the MCP protocol
/// answers with an error rather than a tool result (reading a resource):
/// MCP's "resource not found", "invalid params" or "internal error".
pub fn jsonrpc_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::NotFound => -32002,
        ErrorKind::InvalidInput => -32602,
        _ => -32603,
    }
}

/// A failed command (or server): its message and exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    broken_pipe: bool,
}

impl Failure {
    /// Bad usage or input (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { code: 2, message: message.into(), broken_pipe: false }
    }

    /// The environment failed (exit 3): a port taken, a runtime that cannot start.
    pub fn environment(message: impl Into<String>) -> Self {
        Failure { code: 3, message: message.into(), broken_pipe: false }
    }

    /// A command's answer that is not a success, with its own status
    /// (1: problems found, or nothing to report).
    pub fn with_code(code: u8, message: impl Into<String>) -> Self {
        Failure { code, message: message.into(), broken_pipe: false }
    }

    /// Writing to stdout failed because the reader went away (`| head`):
    /// the command ends quietly.
    pub fn is_broken_pipe(&self) -> bool {
        self.broken_pipe
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let broken_pipe = matches!(&e, Error::Io(io) if io.kind() == io::ErrorKind::BrokenPipe);
        Failure { code: exit_code(e.kind()), message: e.to_string(), broken_pipe }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::from(Error::Io(e))
    }
}

/// What a command answers: its exit status, or why it failed.
pub type CmdResult = Result<u8, Failure>;
