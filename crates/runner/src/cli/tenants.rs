//! `gatehouse tenants`: the tenants a deployment serves and their limits, in the database, as
//! `gatehouse keys` manages their keys (docs/keys.md, "Tenants" and "Limits").

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use tokio_postgres::Client;

use gatehouse_domain::CallbackAllowlist;
use gatehouse_domain::keys::DEFAULT_TENANT;
use gatehouse_domain::tenant_callbacks::TenantCallbacks;

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
    /// Where a tenant's callbacks may go, and the secret that signs them: name its relays'
    /// hosts, print its secret for its relays, rotate it.
    Callbacks(CallbacksArgs),
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
    /// The hosts the tenant's callbacks may reach, in `callback_allowed_hosts`' syntax
    /// (`relay.acme.example:443,10.0.0.7:8000..8010`). Without it the tenant gets no callbacks.
    #[arg(long, value_name = "HOSTS")]
    callback_hosts: Option<String>,
}

#[derive(Args)]
pub(super) struct CallbacksArgs {
    #[command(flatten)]
    app: AppArgs,
    id: String,
    /// The hosts its callbacks may reach (`callback_allowed_hosts`' syntax), or `none`. The first
    /// tenant's are the deployment's `callback_allowed_hosts` variable.
    #[arg(long, value_name = "HOSTS|none")]
    hosts: Option<String>,
    /// Start a rotation of its secret: callbacks are signed with the new secret and the old one
    /// until --end-rotation, so its relays can move to the new one without a refused callback.
    #[arg(long, conflicts_with = "end_rotation")]
    rotate_secret: bool,
    /// End the rotation: only the newest secret signs.
    #[arg(long)]
    end_rotation: bool,
    /// Print the tenant's callback secret (and, during a rotation, the previous one) for its
    /// relays. It is derived from the deployment's callback_secret, which this reads from
    /// SPIN_VARIABLE_CALLBACK_SECRET.
    #[arg(long)]
    show_secret: bool,
    #[arg(long, env = "SPIN_VARIABLE_CALLBACK_SECRET", hide_env_values = true, hide = true)]
    callback_secret: Option<String>,
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
        TenantsCommand::Callbacks(args) => &args.app,
    };
    on_database(app, async |client| match &command {
        TenantsCommand::Create(args) => {
            create(client, &args.id, &args.name, &args.limits, args.callback_hosts.as_deref()).await
        }
        TenantsCommand::Callbacks(args) => callbacks(client, args).await,
        TenantsCommand::List(_) => list(client).await,
        TenantsCommand::Limit(args) => limit(client, &args.id, &args.limits).await,
    })
    .await
}

async fn create(client: &Client, id: &str, name: &str, limits: &Limits, callback_hosts: Option<&str>) -> Result<()> {
    let hosts = callback_hosts.map(checked_hosts).transpose()?;
    let made = client
        .execute(
            "INSERT INTO tenants (id, name, max_pending_calls, creates_per_second, callback_allowed_hosts)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (id) DO NOTHING",
            &[
                &id,
                &name,
                &limits.max_pending_calls.and_then(|l| l.0),
                &limits.creates_per_second.and_then(|l| l.0),
                &hosts,
            ],
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

/// A hosts list as given, refused when an entry would be dropped when read (a bad port), so what
/// the operator typed is what holds.
fn checked_hosts(list: &str) -> Result<String> {
    let list = list.trim();
    let entries = list.split(',').map(str::trim).filter(|entry| !entry.is_empty()).count();
    if entries == 0 || CallbackAllowlist::parse(list).len() != entries {
        bail!("{list:?} is not a list of host[:port] entries (a port may be N, LOW..HIGH or *)");
    }
    if list.len() > MAX_HOSTS_CHARS {
        bail!("the hosts list is longer than {MAX_HOSTS_CHARS} characters");
    }
    Ok(list.to_owned())
}

/// What migration V28 lets the column hold.
const MAX_HOSTS_CHARS: usize = 2000;

/// `gatehouse tenants callbacks`: the tenant's hosts, its secret's rotation, its secret.
async fn callbacks(client: &Client, args: &CallbacksArgs) -> Result<()> {
    let id = args.id.as_str();
    if id == DEFAULT_TENANT && args.hosts.is_some() {
        bail!("the first tenant's callback hosts are the deployment's callback_allowed_hosts variable");
    }
    if args.hosts.is_none() && !args.rotate_secret && !args.end_rotation && !args.show_secret {
        bail!("say what to do: --hosts, --rotate-secret, --end-rotation or --show-secret");
    }
    let hosts = match args.hosts.as_deref() {
        Some("none") => Some(None),
        Some(list) => Some(Some(checked_hosts(list)?)),
        None => None,
    };
    let row = client
        .query_opt(
            "UPDATE tenants
                SET callback_allowed_hosts = CASE WHEN $2 THEN $3 ELSE callback_allowed_hosts END,
                    callback_secret_previous_generation = CASE
                        WHEN $4 THEN callback_secret_generation
                        WHEN $5 THEN NULL
                        ELSE callback_secret_previous_generation END,
                    callback_secret_generation = callback_secret_generation + CASE WHEN $4 THEN 1 ELSE 0 END
              WHERE id = $1
          RETURNING callback_allowed_hosts, callback_secret_generation, callback_secret_previous_generation",
            &[&id, &hosts.is_some(), &hosts.clone().flatten(), &args.rotate_secret, &args.end_rotation],
        )
        .await
        .context("changing the tenant's callbacks")?;
    let Some(row) = row else { bail!("there is no tenant {id:?}") };
    let settings =
        TenantCallbacks { allowed_hosts: row.get(0), secret_generation: row.get(1), previous_generation: row.get(2) };
    let shown_hosts = if id == DEFAULT_TENANT {
        "the deployment's callback_allowed_hosts".to_owned()
    } else {
        settings.allowed_hosts.clone().unwrap_or_else(|| "none: its calls get no callbacks".to_owned())
    };
    eprintln!("{id}: callback hosts {shown_hosts}; secret generation {}", settings.secret_generation);
    if args.rotate_secret {
        eprintln!("callbacks are now signed with the new secret and the old one: move the relays, then --end-rotation");
    }
    if args.show_secret {
        let Some(master) = args.callback_secret.as_deref().filter(|secret| !secret.is_empty()) else {
            bail!("set SPIN_VARIABLE_CALLBACK_SECRET to the deployment's callback_secret to derive the tenant's");
        };
        // stdout: the secrets alone, newest first, one a line, for a script to hand to a relay.
        for secret in settings.secrets(id, &[master.to_owned()]) {
            println!("{secret}");
        }
    }
    Ok(())
}
