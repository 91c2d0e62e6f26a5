//! `gatehouse tenants`: the tenants a deployment serves and their limits, in the database, as
//! `gatehouse keys` manages their keys (docs/keys.md, "Tenants" and "Limits").

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use tokio_postgres::Client;

use super::AppArgs;
use super::keys::on_database;

#[derive(Subcommand)]
pub(super) enum TenantsCommand {
    /// Add a tenant; give it keys with `gatehouse keys create --tenant ID`.
    Create(CreateArgs),
    /// List the tenants with their limits and how many valid keys each has.
    List(ListArgs),
    /// Set or clear a tenant's limits.
    Limit(LimitArgs),
}

#[derive(Args)]
pub(super) struct CreateArgs {
    #[command(flatten)]
    app: AppArgs,
    /// The tenant's id: lowercase letters, digits and dashes, at most 63.
    id: String,
    /// A name for people, shown in lists.
    #[arg(long, default_value = "")]
    name: String,
    #[command(flatten)]
    limits: Limits,
}

#[derive(Args)]
pub(super) struct ListArgs {
    #[command(flatten)]
    app: AppArgs,
}

#[derive(Args)]
pub(super) struct LimitArgs {
    #[command(flatten)]
    app: AppArgs,
    id: String,
    #[command(flatten)]
    limits: Limits,
}

/// A tenant's limits; `none` clears one.
#[derive(Args)]
struct Limits {
    /// How many waiting PENDING calls the tenant may hold at once, over all its sessions.
    #[arg(long, value_name = "N|none", value_parser = parse_limit)]
    max_pending_calls: Option<Limit>,
    /// How many calls the tenant may create in any one second.
    #[arg(long, value_name = "N|none", value_parser = parse_limit)]
    creates_per_second: Option<Limit>,
}

/// A limit as given: a positive number, or none.
#[derive(Clone, Copy)]
struct Limit(Option<i32>);

fn parse_limit(text: &str) -> Result<Limit, String> {
    if text == "none" {
        return Ok(Limit(None));
    }
    match text.parse::<i32>() {
        Ok(n) if n > 0 => Ok(Limit(Some(n))),
        _ => Err(format!("{text:?} is not a positive number or \"none\"")),
    }
}

pub(super) async fn run(command: TenantsCommand) -> Result<()> {
    let app = match &command {
        TenantsCommand::Create(args) => &args.app,
        TenantsCommand::List(args) => &args.app,
        TenantsCommand::Limit(args) => &args.app,
    };
    on_database(app, async |client| match &command {
        TenantsCommand::Create(args) => create(client, &args.id, &args.name, &args.limits).await,
        TenantsCommand::List(_) => list(client).await,
        TenantsCommand::Limit(args) => limit(client, &args.id, &args.limits).await,
    })
    .await
}

async fn create(client: &Client, id: &str, name: &str, limits: &Limits) -> Result<()> {
    let made = client
        .execute(
            "INSERT INTO tenants (id, name, max_pending_calls, creates_per_second) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO NOTHING",
            &[&id, &name, &limits.max_pending_calls.and_then(|l| l.0), &limits.creates_per_second.and_then(|l| l.0)],
        )
        .await
        .with_context(|| format!("adding the tenant {id:?} (an id is lowercase letters, digits and dashes)"))?;
    if made == 0 {
        bail!("there is a tenant {id:?} already");
    }
    eprintln!("added tenant {id}: give it keys with `gatehouse keys create --tenant {id} --scope ...`");
    Ok(())
}

async fn list(client: &Client) -> Result<()> {
    let rows = client
        .query(
            "SELECT t.id, t.max_pending_calls, t.creates_per_second,
                    (SELECT count(*) FROM api_keys k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL), t.name
               FROM tenants t ORDER BY t.created_at, t.id",
            &[],
        )
        .await
        .context("listing the tenants")?;
    let shown = |limit: Option<i32>| limit.map_or_else(|| "none".to_owned(), |n| n.to_string());
    println!("{:<24} {:<18} {:<19} {:<11} name", "tenant", "max_pending_calls", "creates_per_second", "valid_keys");
    for row in rows {
        println!(
            "{:<24} {:<18} {:<19} {:<11} {}",
            row.get::<_, String>(0),
            shown(row.get(1)),
            shown(row.get(2)),
            row.get::<_, i64>(3),
            row.get::<_, String>(4),
        );
    }
    Ok(())
}

/// Sets the limits given and leaves the others as they are; a limit holds from the next create on.
async fn limit(client: &Client, id: &str, limits: &Limits) -> Result<()> {
    if limits.max_pending_calls.is_none() && limits.creates_per_second.is_none() {
        bail!("say which limit to set: --max-pending-calls or --creates-per-second (a number, or none)");
    }
    let changed = client
        .execute(
            "UPDATE tenants
                SET max_pending_calls  = CASE WHEN $2 THEN $3 ELSE max_pending_calls END,
                    creates_per_second = CASE WHEN $4 THEN $5 ELSE creates_per_second END
              WHERE id = $1",
            &[
                &id,
                &limits.max_pending_calls.is_some(),
                &limits.max_pending_calls.and_then(|l| l.0),
                &limits.creates_per_second.is_some(),
                &limits.creates_per_second.and_then(|l| l.0),
            ],
        )
        .await
        .context("setting the limits")?;
    if changed == 0 {
        bail!("there is no tenant {id:?}");
    }
    eprintln!("set the limits of {id}: they hold from its next create on");
    Ok(())
}
