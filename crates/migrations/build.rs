//! `embed_migrations!` (src/lib.rs) reads the workspace's `migrations/` folder when the crate
//! compiles: a new or changed migration file must rebuild this crate.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
