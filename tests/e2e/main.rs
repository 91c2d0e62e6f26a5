//! Every end-to-end test, in one binary: the application built from this repository, served by
//! the runner (or the hosts pinned to Spin's wasmtime releases), driven over real HTTP against a
//! real PostgreSQL with pgvector. One module per area; what they share is in `tests/support`.
//! docs/development.md says how to run one area (`cargo nextest run -p gatehouse-tests mcp::`).

mod application;
mod bench;
mod cli;
mod component_imports;
mod conformance;
mod dashboard;
mod declared_tools;
mod demo;
mod deployment;
mod drain;
mod embeddings_server;
mod gmail;
mod hardening;
mod history;
mod ingest;
mod keys;
mod kubernetes;
mod layout;
mod lifecycle;
mod listing;
mod mcp;
mod metrics;
mod openapi;
mod pinned_hosts;
mod properties;
mod retention;
mod rotation;
mod runner_fidelity;
mod scale_out;
mod strict_input;
mod tenants;
mod tls;
mod tool_hosts;
mod tool_sdks;
mod traces;
mod upgrade;
mod vector_search;
