//! This crate compiles the tool templates of `templates/` into the binary (`include_dir!`,
//! which Cargo does not track): an edit to a template must rebuild it.
fn main() {
    println!("cargo::rerun-if-changed=../../templates");
}
