//! `gatehouse keys`: a tenant's API keys, made, listed, rotated and revoked in the database, as
//! `migrate` talks to it (docs/keys.md). A key is printed once, when it is made; afterwards
//! only its prefix names it.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use gatehouse_domain::keys::{self, DEFAULT_TENANT, Scope};
use tokio_postgres::Client;

use super::AppArgs;
use crate::db::{Database, migrate};

#[derive(Subcommand)]
pub(super) enum KeysCommand {
    /// Make a key and print it (the only time it is shown).
    Create(CreateArgs),
    /// List a tenant's keys by prefix, with their scopes and whether they are revoked.
    List(ListArgs),
    /// Make a new key with the same tenant, scopes and label as PREFIX's; both stay valid until
    /// the old one is revoked.
    Rotate(OneKey),
    /// Refuse PREFIX's key from its next request on, on every host.
    Revoke(OneKey),
}

#[derive(Args)]
pub(super) struct CreateArgs {
    #[command(flatten)]
    app: AppArgs,
    /// What the key may do; repeatable: calls:write, calls:read, tools:read, admin.
    #[arg(long = "scope", required = true, value_parser = parse_scope)]
    scopes: Vec<Scope>,
    /// The tenant the key belongs to.
    #[arg(long, default_value = DEFAULT_TENANT)]
    tenant: String,
    /// Who or what the key is for, shown in lists.
    #[arg(long, default_value = "")]
    label: String,
}

#[derive(Args)]
pub(super) struct ListArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Only this tenant's keys.
    #[arg(long)]
    tenant: Option<String>,
}

#[derive(Args)]
pub(super) struct OneKey {
    #[command(flatten)]
    app: AppArgs,
    /// The key's prefix (`ghk_` and eight hex digits), as `keys list` shows it.
    prefix: String,
}

fn parse_scope(name: &str) -> Result<Scope, String> {
    Scope::parse(name).ok_or_else(|| {
        let known: Vec<&str> = Scope::ALL.iter().map(|scope| scope.as_str()).collect();
        format!("no scope {name:?}; the scopes are {}", known.join(", "))
    })
}

pub(super) async fn run(command: KeysCommand) -> Result<()> {
    let app = match &command {
        KeysCommand::Create(args) => &args.app,
        KeysCommand::List(args) => &args.app,
        KeysCommand::Rotate(args) | KeysCommand::Revoke(args) => &args.app,
    };
    on_database(app, async |client| match &command {
        KeysCommand::Create(args) => create(client, &args.tenant, &args.scopes, &args.label, None).await,
        KeysCommand::List(args) => list(client, args.tenant.as_deref()).await,
        KeysCommand::Rotate(args) => rotate(client, &args.prefix).await,
        KeysCommand::Revoke(args) => revoke(client, &args.prefix).await,
    })
    .await
}

/// Runs `work` on the application's database (DATABASE_URL, or the embedded one), migrated
/// first, as `migrate` does: the keys and tenants commands' one way in.
pub(super) async fn on_database(app: &AppArgs, work: impl AsyncFnOnce(&Client) -> Result<()>) -> Result<()> {
    let database = Database::open(&app.project_root()?, &app.state_dir()?).await?;
    let outcome = async {
        for migration in migrate(&database.url, None).await?.applied {
            eprintln!("applied migration {migration}");
        }
        let (client, driver) =
            gatehouse_pg_connect::connect(&database.url).await.context("connecting to the database")?;
        let outcome = work(&client).await;
        drop(client);
        let _ = driver.await;
        outcome
    }
    .await;
    let stopped = database.stop();
    outcome?;
    stopped
}

/// Makes a key, stores its hash, and prints it once (stdout: the key alone, for a script).
async fn create(client: &Client, tenant: &str, scopes: &[Scope], label: &str, replaces: Option<&str>) -> Result<()> {
    let mut prefix = [0u8; 4];
    let mut secret = [0u8; 32];
    getrandom::fill(&mut prefix)
        .and_then(|()| getrandom::fill(&mut secret))
        .map_err(|e| anyhow::anyhow!("the operating system gave no random bytes: {e}"))?;
    let key = keys::compose_key(prefix, secret);
    let public = keys::key_prefix(&key).context("a made key is well formed")?;
    let names: Vec<&str> = scopes.iter().map(|scope| scope.as_str()).collect();
    let hash = keys::key_hash(&key).to_vec();
    let made = client
        .execute(
            "INSERT INTO api_keys (id, tenant_id, prefix, key_hash, scopes, label, replaces)
             SELECT gen_random_uuid(), $1, $2, $3, $4, $5, (SELECT id FROM api_keys WHERE prefix = $6)
             WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $1)",
            &[&tenant, &public, &hash, &names, &label, &replaces],
        )
        .await
        .context("storing the key")?;
    if made == 0 {
        bail!("there is no tenant {tenant:?}");
    }
    println!("{key}");
    eprintln!("made {public} for tenant {tenant} with {}: the key above is shown this once", names.join(", "));
    Ok(())
}

async fn list(client: &Client, tenant: Option<&str>) -> Result<()> {
    let rows = client
        .query(
            "SELECT k.prefix, k.tenant_id, array_to_string(k.scopes, ','), k.label,
                    to_char(k.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    to_char(k.revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    old.prefix
             FROM api_keys AS k LEFT JOIN api_keys AS old ON old.id = k.replaces
             WHERE $1::text IS NULL OR k.tenant_id = $1
             ORDER BY k.tenant_id, k.created_at",
            &[&tenant],
        )
        .await
        .context("listing the keys")?;
    println!("{:<13} {:<16} {:<32} {:<21} {:<28} label", "prefix", "tenant", "scopes", "created", "state");
    for row in rows {
        let revoked: Option<String> = row.get(5);
        let replaces: Option<String> = row.get(6);
        let state = match (revoked, replaces) {
            (Some(at), _) => format!("revoked {at}"),
            (None, Some(old)) => format!("valid, replaces {old}"),
            (None, None) => "valid".to_owned(),
        };
        println!(
            "{:<13} {:<16} {:<32} {:<21} {:<28} {}",
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, String>(2),
            row.get::<_, String>(4),
            state,
            row.get::<_, String>(3),
        );
    }
    Ok(())
}

async fn rotate(client: &Client, prefix: &str) -> Result<()> {
    let row = client
        .query_opt("SELECT tenant_id, scopes, label FROM api_keys WHERE prefix = $1 AND revoked_at IS NULL", &[&prefix])
        .await
        .context("reading the key")?;
    let Some(row) = row else { bail!("there is no valid key {prefix}") };
    let scopes: Vec<String> = row.get(1);
    let scopes: Vec<Scope> = scopes.iter().filter_map(|name| Scope::parse(name)).collect();
    let (tenant, label): (String, String) = (row.get(0), row.get(2));
    create(client, &tenant, &scopes, &label, Some(prefix)).await?;
    eprintln!(
        "{prefix} stays valid: revoke it with `gatehouse keys revoke {prefix}` once every client uses the new key"
    );
    Ok(())
}

async fn revoke(client: &Client, prefix: &str) -> Result<()> {
    let revoked = client
        .execute("UPDATE api_keys SET revoked_at = now() WHERE prefix = $1 AND revoked_at IS NULL", &[&prefix])
        .await
        .context("revoking the key")?;
    if revoked == 0 {
        bail!("there is no valid key {prefix}");
    }
    eprintln!("revoked {prefix}: it is refused from its next request on");
    Ok(())
}
