//! Empty: Cargo resolves a package's build-dependencies, and so the host features listed in
//! Cargo.toml, only when it has a build script.
fn main() {}
