//! Opening the store a command or server names: a file path or a
//! `postgres://` URL, for reading (never created or changed) or writing.

use std::path::Path;

use decision_store::store::Store;
use decision_store::Result;

/// The URL when a store argument is a `postgres://` URL rather than a file.
pub fn url_of(db: &Path) -> Option<&str> {
    db.to_str().filter(|s| Store::is_url(s))
}

/// Opens a store for reading: read-only, never created.
pub fn open_read(db: &Path) -> Result<Store> {
    if let Some(url) = url_of(db) {
        return Store::connect_read_only(url);
    }
    let store = Store::open_read_only(db)?;
    // A command reads most pages once: a small cache costs less to fill.
    store.set_cache_kib(256)?;
    Ok(store)
}

/// Opens (or creates) a store for writing.
pub fn open_write(db: &Path) -> Result<Store> {
    match url_of(db) {
        Some(url) => Store::connect(url),
        None => Store::open(db),
    }
}
