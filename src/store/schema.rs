//! The schema: the migrations of both dialects, embedded at build time,
//! and the versions they give.

mod embedded {
    refinery::embed_migrations!("migrations/sqlite");
}

#[cfg(feature = "postgres")]
mod embedded_postgres {
    refinery::embed_migrations!("migrations/postgres");
}

/// The newest version in refinery's history table.
pub(super) const HISTORY_VERSION: &str = "SELECT coalesce(max(version), 0) FROM refinery_schema_history";

// `MIGRATIONS` and `PG_MIGRATIONS`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The newest schema version this library knows.
pub fn supported_schema_version() -> i64 {
    MIGRATIONS.last().map_or(0, |&(version, _, _)| version)
}

/// The runner of the SQLite migrations.
pub(super) fn runner() -> refinery::Runner {
    embedded::migrations::runner()
}

/// The runner of the PostgreSQL migrations.
#[cfg(feature = "postgres")]
pub(super) fn postgres_runner() -> refinery::Runner {
    embedded_postgres::migrations::runner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_list_matches_refinery() {
        let listed: Vec<(i64, String, String)> =
            MIGRATIONS.iter().map(|&(v, n, c)| (v, n.to_owned(), c.to_owned())).collect();
        let refinery: Vec<(i64, String, String)> = runner()
            .get_migrations()
            .iter()
            .map(|m| (i64::from(m.version()), m.name().to_owned(), m.checksum().to_string()))
            .collect();
        assert_eq!(listed, refinery);
        assert_eq!(supported_schema_version(), 9);
        assert_eq!(PG_MIGRATIONS.last().map(|m| m.0), Some(9), "both dialects have every version");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_migration_list_matches_refinery() {
        let listed: Vec<(i64, String, String)> =
            PG_MIGRATIONS.iter().map(|&(v, n, c)| (v, n.to_owned(), c.to_owned())).collect();
        let refinery: Vec<(i64, String, String)> = postgres_runner()
            .get_migrations()
            .iter()
            .map(|m| (i64::from(m.version()), m.name().to_owned(), m.checksum().to_string()))
            .collect();
        assert_eq!(listed, refinery);
    }
}
