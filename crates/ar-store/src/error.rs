//! Errors of opening a store, and the mapping of database errors onto `StoreError`.

use std::path::PathBuf;

use ar_core::store::StoreError;

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("unknown store driver {0:?} (expected sqlite, postgres or memory)")]
    UnknownDriver(String),
    #[error("no SQLite database path given (use a file path, a sqlite: URL or :memory:)")]
    MissingPath,
    #[error("invalid {backend} address {address:?}: {source}")]
    InvalidAddress {
        backend: &'static str,
        address: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("creating the database directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid schema name {0:?}: use letters, digits and underscores")]
    InvalidSchema(String),
    #[error("connecting to {backend}: {source}")]
    Connect {
        backend: &'static str,
        #[source]
        source: sqlx::Error,
    },
    #[error("opening the SQLite database: {source}")]
    Open {
        #[source]
        source: rusqlite::Error,
    },
    #[error("starting the SQLite checkpoint thread: {source}")]
    Thread {
        #[source]
        source: std::io::Error,
    },
    #[error("migrating the {backend} schema: {source}")]
    Migrate {
        backend: &'static str,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

/// Maps a database error to `StoreError::Backend`, naming the operation that failed.
pub(crate) fn db(context: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| StoreError::backend(context, error)
}

/// Whether a database error is a unique-constraint violation.
pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(inner) if inner.is_unique_violation())
}

/// A column that could not be decoded into its Rust type.
pub(crate) fn corrupt(column: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{column}: {error}"))
}
