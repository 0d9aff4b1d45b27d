//! The values that go into statements and come out of rows, and the few
//! constants both engines share: the leaf of the engine, which its other
//! modules import and which imports nothing of them.

use std::time::Duration;

use crate::error::Error;

/// How long a writer waits for another before giving up with [`Error::Busy`].
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A parameter value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    /// A list of keys, for `IN rarray(?N)`.
    Ints(&'a [i64]),
    /// A list of texts, for `IN rarray(?N)`.
    Texts(&'a [String]),
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}
impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(v)
    }
}
impl<'a> From<&'a [i64]> for Value<'a> {
    fn from(v: &'a [i64]) -> Self {
        Value::Ints(v)
    }
}
impl<'a> From<&'a [String]> for Value<'a> {
    fn from(v: &'a [String]) -> Self {
        Value::Texts(v)
    }
}
impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}
impl<'a> From<&'a Option<String>> for Value<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().map_or(Value::Null, Value::Text)
    }
}

/// Parameters of a statement: `vals![a, b]`.
macro_rules! vals {
    ($($v:expr),* $(,)?) => { &[$($crate::store::engine::value::Value::from($v)),*][..] };
}
pub(crate) use vals;

/// A column's value as it is stored, borrowed from its row.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ValueRef<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl<'a> From<Option<&'a str>> for ValueRef<'a> {
    fn from(v: Option<&'a str>) -> Self {
        v.map_or(ValueRef::Null, ValueRef::Text)
    }
}

/// The two engines, for the few statements whose text differs between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `sqlite` on SQLite, `postgres` on PostgreSQL.
    pub(crate) fn pick<T>(self, sqlite: T, postgres: T) -> T {
        match self {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }
}

/// A column that did not hold what the code asked for.
pub(crate) fn bad_column(i: usize, what: &str, e: impl std::fmt::Display) -> Error {
    Error::storage(format!("column {i}: expected {what}: {e}"))
}

/// PostgreSQL's text cannot hold U+0000 (SQLite's can): refuse it by
/// field name before the server refuses it by byte. JSON columns are not
/// affected: JSON writes the character as `\u0000`.
pub(crate) const NUL_REASON: &str = "holds the NUL character (U+0000), which PostgreSQL text cannot store";
