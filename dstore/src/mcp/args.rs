//! A tool's arguments, read field by field: every wrong value is an error
//! that names the field and says what it should be, and a field that the
//! tool does not take is refused by name.

use decision_store::{DecisionId, PlanId};
use serde_json::{Map, Value};

/// Bad input: the message a tool result with `isError: true` carries.
#[derive(Debug)]
pub struct Refusal(pub String);

impl Refusal {
    pub fn field(name: &str, reason: impl std::fmt::Display) -> Self {
        Refusal(format!("`{name}`: {reason}"))
    }
}

impl From<decision_store::Error> for Refusal {
    fn from(e: decision_store::Error) -> Self {
        Refusal(e.to_string())
    }
}

pub type Outcome<T> = Result<T, Refusal>;

/// A list's page size when the caller names none, and the largest it gets.
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 500;

#[derive(Debug)]
pub struct Args(Map<String, Value>);

impl Args {
    /// The arguments of a tool that takes the fields `known`.
    pub fn new(args: Option<Map<String, Value>>, known: &[&str]) -> Outcome<Self> {
        let args = args.unwrap_or_default();
        if let Some(unknown) = args.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(Refusal::field(unknown, format!("unknown field; this tool takes {}", known.join(", "))));
        }
        Ok(Args(args))
    }

    /// The value of `name`; JSON null counts as absent.
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn opt_str(&self, name: &str) -> Outcome<Option<&str>> {
        self.get(name).map(|v| v.as_str().ok_or_else(|| Refusal::field(name, "must be a string"))).transpose()
    }

    pub fn str(&self, name: &str) -> Outcome<&str> {
        self.opt_str(name)?.ok_or_else(|| Refusal::field(name, "is required"))
    }

    pub fn opt_u64(&self, name: &str) -> Outcome<Option<u64>> {
        self.get(name)
            .map(|v| v.as_u64().ok_or_else(|| Refusal::field(name, "must be a non-negative integer")))
            .transpose()
    }

    pub fn opt_u32(&self, name: &str) -> Outcome<Option<u32>> {
        self.opt_u64(name)?
            .map(|n| u32::try_from(n).map_err(|_| Refusal::field(name, format!("must be at most {}", u32::MAX))))
            .transpose()
    }

    pub fn opt_bool(&self, name: &str) -> Outcome<Option<bool>> {
        self.get(name).map(|v| v.as_bool().ok_or_else(|| Refusal::field(name, "must be true or false"))).transpose()
    }

    /// A list of strings; absent is empty.
    pub fn strings(&self, name: &str) -> Outcome<Vec<String>> {
        let Some(v) = self.get(name) else { return Ok(Vec::new()) };
        let items = v.as_array().ok_or_else(|| Refusal::field(name, "must be an array of strings"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Refusal::field(&format!("{name}[{i}]"), "must be a string"))
            })
            .collect()
    }

    /// A list of strings that must not be empty.
    pub fn nonempty_strings(&self, name: &str) -> Outcome<Vec<String>> {
        let list = self.strings(name)?;
        if list.is_empty() {
            return Err(Refusal::field(name, "is required: a non-empty array of strings"));
        }
        Ok(list)
    }

    pub fn decision_id(&self, name: &str) -> Outcome<DecisionId> {
        DecisionId::parse(self.str(name)?).map_err(|e| Refusal::field(name, e))
    }

    pub fn opt_plan_id(&self, name: &str) -> Outcome<Option<PlanId>> {
        self.opt_str(name)?.map(|s| PlanId::parse(s).map_err(|e| Refusal::field(name, e))).transpose()
    }

    pub fn plan_id(&self, name: &str) -> Outcome<PlanId> {
        self.opt_plan_id(name)?.ok_or_else(|| Refusal::field(name, "is required"))
    }

    /// `limit` (clamped to [`MAX_LIMIT`]) and the offset that `cursor` names.
    pub fn page(&self) -> Outcome<Page> {
        let limit = match self.opt_u64("limit")? {
            None => DEFAULT_LIMIT,
            Some(0) => return Err(Refusal::field("limit", "must be at least 1")),
            Some(n) => usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
        };
        let offset = match self.opt_str("cursor")? {
            None => 0,
            Some(c) => c
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| Refusal::field("cursor", "is not a cursor that this server gave out"))?,
        };
        Ok(Page { offset, limit })
    }

    /// The arguments as they came, for decoding as a whole.
    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }
}

const CURSOR_PREFIX: &str = "o";

/// One page of a list: `limit` items from `offset`.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    pub offset: usize,
    pub limit: usize,
}

impl Page {
    /// This page of `items`, and the cursor of the next page (null at the end).
    pub fn of<T>(self, items: impl IntoIterator<Item = T>, total: usize) -> (Vec<T>, Value) {
        let page: Vec<T> = items.into_iter().skip(self.offset).take(self.limit).collect();
        let end = self.offset.saturating_add(page.len());
        let next = if end < total { Value::String(format!("{CURSOR_PREFIX}{end}")) } else { Value::Null };
        (page, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Outcome<Args> {
        Args::new(v.as_object().cloned(), &["limit", "cursor", "focus", "flag"])
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_named() {
        assert!(args(json!({"nope": 1})).unwrap_err().0.starts_with("`nope`: unknown field"));
        let a = args(json!({"limit": -1, "focus": ["a", 2], "flag": "yes"})).unwrap();
        assert_eq!(a.page().unwrap_err().0, "`limit`: must be a non-negative integer");
        assert_eq!(a.strings("focus").unwrap_err().0, "`focus[1]`: must be a string");
        assert_eq!(a.opt_bool("flag").unwrap_err().0, "`flag`: must be true or false");
    }

    #[test]
    fn pages_clamp_and_cursors_round_trip() {
        let page = args(json!({"limit": 100_000})).unwrap().page().unwrap();
        assert_eq!((page.offset, page.limit), (0, MAX_LIMIT));
        let (first, next) = Page { offset: 0, limit: 2 }.of(0..5, 5);
        assert_eq!((first, next.clone()), (vec![0, 1], json!("o2")));
        let page = args(json!({"cursor": next, "limit": 2})).unwrap().page().unwrap();
        assert_eq!(page.of(0..5, 5), (vec![2, 3], json!("o4")));
        assert_eq!(Page { offset: 4, limit: 2 }.of(0..5, 5), (vec![4], Value::Null));
        assert!(args(json!({"cursor": "x"})).unwrap().page().unwrap_err().0.starts_with("`cursor`"));
        assert!(args(json!({"limit": 0})).unwrap().page().is_err());
    }
}
