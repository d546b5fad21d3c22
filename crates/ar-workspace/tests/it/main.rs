//! Integration tests of ar-workspace on real files in temporary directories: confinement of
//! every file tool, the file tools' behaviour, and `run_command` under Landlock.

mod command;
mod escapes;
mod files;
mod search;
mod support;
