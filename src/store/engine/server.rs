//! What a PostgreSQL server tells of itself: its version, and its place
//! in streaming replication. A file has neither.

use super::Conn;
use crate::error::Result;

/// What `Store::replication` found on the server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Replication {
    /// The server is a standby (in recovery): it serves reads only.
    pub standby: bool,
    /// On a standby: bytes of WAL received but not yet replayed.
    pub lag_bytes: Option<i64>,
    /// On a standby: how old its last replayed commit is, in milliseconds
    /// (0 when it has replayed everything it received).
    pub lag_ms: Option<i64>,
    /// On a primary: its standbys, as `pg_stat_replication` shows them.
    pub standbys: Vec<StandbyState>,
}

/// One standby of a primary.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StandbyState {
    /// Its `application_name` (Patroni: the member's name).
    pub name: String,
    /// `streaming`, `catchup`, ...
    pub state: String,
    /// `sync`, `async`, `potential`, `quorum`.
    pub sync_state: String,
    /// Bytes of WAL the primary wrote that it has not replayed.
    pub lag_bytes: Option<i64>,
    /// `replay_lag` in milliseconds (`None` when the server has no recent figure).
    pub lag_ms: Option<i64>,
}

/// The server's version (`SHOW server_version`); `None` for SQLite.
pub(crate) fn version(conn: &Conn) -> Result<Option<String>> {
    if !conn.is_postgres() {
        return Ok(None);
    }
    conn.query_one("SELECT current_setting('server_version')", &[], |r| r.string(0)).map(Some)
}

/// The server's place in streaming replication; `None` for SQLite.
pub(crate) fn replication(conn: &Conn) -> Result<Option<Replication>> {
    if !conn.is_postgres() {
        return Ok(None);
    }
    let standby = conn.query_one("SELECT pg_is_in_recovery()", &[], |r| r.bool(0))?;
    if standby {
        // Received but not yet replayed, and the age of the last replayed
        // commit (0 when everything received is replayed: an idle primary sends nothing).
        let lag = conn.query_one(
            "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint, \
             CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 \
             ELSE (extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::bigint END",
            &[],
            |r| Ok((r.opt_i64(0)?, r.opt_i64(1)?)),
        )?;
        return Ok(Some(Replication { standby: true, lag_bytes: lag.0, lag_ms: lag.1, standbys: Vec::new() }));
    }
    let standbys = conn.query_vec(
        "SELECT application_name, coalesce(state, ''), coalesce(sync_state, ''), \
         pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint, \
         (extract(epoch FROM replay_lag) * 1000)::bigint \
         FROM pg_stat_replication ORDER BY application_name",
        &[],
        |r| {
            Ok(StandbyState {
                name: r.string(0)?,
                state: r.string(1)?,
                sync_state: r.string(2)?,
                lag_bytes: r.opt_i64(3)?,
                lag_ms: r.opt_i64(4)?,
            })
        },
    )?;
    Ok(Some(Replication { standby: false, lag_bytes: None, lag_ms: None, standbys }))
}
