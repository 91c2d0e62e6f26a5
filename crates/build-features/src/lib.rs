//! No code. This crate's manifest asks for the features the workspace's test build turns on in
//! the runner's dependencies, so that the runner alone and the whole workspace compile those
//! dependencies once, with one feature set (docs/development.md, "One feature set").
