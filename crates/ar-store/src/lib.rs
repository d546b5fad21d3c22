//! SQLite and PostgreSQL implementations of the domain store traits, with migrations per backend.
