//! Build script: rebuilds the crate when a migration file is added or changed, since
//! `sqlx::migrate!` embeds the migrations at compile time and stable Rust cannot track a new
//! file in the directory by itself.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
