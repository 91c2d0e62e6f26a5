//! `embed_migrations!` (src/db.rs) reads the workspace's `migrations/` folder when the crate
//! compiles: a new or changed migration file must rebuild the CLI.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
