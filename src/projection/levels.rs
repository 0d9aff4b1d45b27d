//! Named detail levels per domain (`FULL_SOURCE` = 9 in `uko-code:` …).

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};

/// Named depths of one domain, e.g. `SIGNATURES` = 4.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DetailLevelMap {
    levels: BTreeMap<String, u32>,
}

impl DetailLevelMap {
    /// A map from (name, depth) pairs.
    pub fn new<'a>(levels: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        DetailLevelMap { levels: levels.into_iter().map(|(n, d)| (n.to_owned(), d)).collect() }
    }

    /// Code: `MODULE_LISTING` 0, `SIGNATURES` 4, `FULL_SOURCE` 9.
    pub fn code() -> Self {
        Self::new([("MODULE_LISTING", 0), ("SIGNATURES", 4), ("FULL_SOURCE", 9)])
    }

    /// Docs: `TITLE_ONLY` 0, `FULL_CONTENT` 10.
    pub fn docs() -> Self {
        Self::new([("TITLE_ONLY", 0), ("FULL_CONTENT", 10)])
    }

    /// Database: `SCHEMA_LISTING` 0, `TABLE_LISTING` 1, `FULL_CATALOG` 11.
    pub fn database() -> Self {
        Self::new([("SCHEMA_LISTING", 0), ("TABLE_LISTING", 1), ("FULL_CATALOG", 11)])
    }

    /// The depth of a named level.
    pub fn resolve(&self, name: &str) -> Option<u32> {
        self.levels.get(name).copied()
    }

    /// Level names and depths, by name.
    pub fn levels(&self) -> impl Iterator<Item = (&str, u32)> {
        self.levels.iter().map(|(n, &d)| (n.as_str(), d))
    }
}

/// Detail level maps keyed by domain prefix (`uko-code:` …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetailLevelRegistry {
    maps: HashMap<String, DetailLevelMap>,
}

impl Default for DetailLevelRegistry {
    /// The three presets: `uko-code:`, `uko-docs:`, `uko-db:`.
    fn default() -> Self {
        let mut r = Self::empty();
        r.register("uko-code:", DetailLevelMap::code());
        r.register("uko-docs:", DetailLevelMap::docs());
        r.register("uko-db:", DetailLevelMap::database());
        r
    }
}

impl DetailLevelRegistry {
    /// A registry with no maps.
    pub fn empty() -> Self {
        DetailLevelRegistry { maps: HashMap::new() }
    }

    /// Registers (or replaces) the map of a domain.
    pub fn register(&mut self, domain: impl Into<String>, map: DetailLevelMap) {
        self.maps.insert(domain.into(), map);
    }

    pub fn get(&self, domain: &str) -> Option<&DetailLevelMap> {
        self.maps.get(domain)
    }

    /// Resolves a named level in a domain.
    ///
    /// # Errors
    /// [`Error::Validation`] on `depth` saying there is no DetailLevelMap for
    /// the domain, or that the map has no such level.
    pub fn resolve(&self, domain: &str, name: &str) -> Result<u32> {
        let map = self.maps.get(domain).ok_or_else(|| {
            Error::validation(
                "depth",
                format!("no DetailLevelMap registered for domain {domain:?} to resolve {name:?}"),
            )
        })?;
        map.resolve(name).ok_or_else(|| {
            let known: Vec<&str> = map.levels().map(|(n, _)| n).collect();
            Error::validation(
                "depth",
                format!("the DetailLevelMap of {domain:?} has no level {name:?} (known: {})", known.join(", ")),
            )
        })
    }
}
