use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use waitroom::config::Config;
use waitroom::config::file::ConfigFile;
use waitroom::config::model::ProcessEnvironment;
use waitroom::tools::export::terraform_vars;

/// A self-hosted virtual waiting room in front of your shop.
#[derive(Parser)]
#[command(
    name = "waitroom-proxy",
    version,
    about,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The room's configuration file (see config/drop.toml).
    #[arg(long, short, required = true)]
    config: Option<PathBuf>,
    /// Check the configuration, print it with secrets masked, and exit.
    #[arg(long, short)]
    test: bool,
    /// Allow missing secrets (random ones for this run). Never in production.
    #[arg(long)]
    dev: bool,
    /// Take the listening sockets over from the running process (send it SIGQUIT next), through
    /// listen.upgrade_socket.
    #[arg(long, short)]
    upgrade: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Write the variables of the managed Cloudflare room (infra/cloudflare) from the config,
    /// and list on stderr what Cloudflare cannot express.
    ExportTerraform {
        /// The room's configuration file.
        #[arg(long, short)]
        config: PathBuf,
        /// Where to write the tfvars (standard output by default).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Propose total_active_users and new_users_per_minute, and the [autopilot]'s bounds and
    /// targets, from a load/k6-capacity.js summary.
    Calibrate {
        /// The JSON summary written by load/k6-capacity.js (its SUMMARY).
        #[arg(long)]
        summary: PathBuf,
        /// How long a visitor stays inside: the room's session_duration.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        session: Duration,
        /// Safety margin below the knee (0.35 = 35 %).
        #[arg(long, default_value_t = waitroom::tools::calibrate::DEFAULT_MARGIN)]
        margin: f64,
    },
    /// Print an entry token for a members-only line ([entry]), signed with entry.secret (or
    /// WR_ENTRY_SECRET) as the shop's sign-in would: for demos and tests.
    SignEntry {
        /// The room's configuration file.
        #[arg(long, short)]
        config: PathBuf,
        /// The customer's key (its id at the shop).
        #[arg(long)]
        key: String,
        /// How long the token is valid.
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        ttl: Duration,
        /// The room's id, when the token is for one room only.
        #[arg(long)]
        room: Option<String>,
        /// The shop's key for reaching the customer, sent to [notify] webhook_url when called
        /// (at most 256 bytes).
        #[arg(long)]
        contact: Option<String>,
    },
}

/// A duration as the config file writes it: "5m", "90s", "1500ms".
fn config_duration(d: Duration) -> String {
    match d.as_millis() {
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// `waitroom-proxy calibrate`: exit 0 with a proposal, 1 when no stage passed, 2 on bad input.
fn calibrate(summary: &Path, session: Duration, margin: f64) -> ExitCode {
    let parsed = std::fs::read_to_string(summary)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}")));
    let json: serde_json::Value = match parsed {
        Ok(json) => json,
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", summary.display());
            return ExitCode::from(2);
        }
    };
    match waitroom::tools::calibrate::propose(&json, session.as_secs_f64() / 60.0, margin) {
        Ok(proposal) => {
            println!("{}\n", proposal.explanation);
            print!("{}", proposal.room_toml());
            println!("session_duration = \"{}\"", config_duration(session));
            if let Some(autopilot) = &proposal.autopilot {
                print!("\n{}", autopilot.toml());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", summary.display());
            match e {
                waitroom::tools::calibrate::CalibrateError::NoPassingStage { .. } => {
                    ExitCode::FAILURE
                }
                _ => ExitCode::from(2),
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match (cli.command, cli.config) {
        (Some(Command::ExportTerraform { config, out }), _) => {
            export_terraform(&config, out.as_deref())
        }
        (
            Some(Command::Calibrate {
                summary,
                session,
                margin,
            }),
            _,
        ) => calibrate(&summary, session, margin),
        (
            Some(Command::SignEntry {
                config,
                key,
                ttl,
                room,
                contact,
            }),
            _,
        ) => sign_entry(
            &config,
            &waitroom::tools::sign_entry::Wanted {
                key: &key,
                ttl,
                room: room.as_deref(),
                contact: contact.as_deref(),
            },
        ),
        (None, Some(config)) => run(&config, cli.test, cli.dev, cli.upgrade),
        (None, None) => {
            eprintln!("waitroom-proxy: --config FILE is required");
            ExitCode::from(2)
        }
    }
}

/// `waitroom-proxy sign-entry`: the token on standard output; exit 2 on a bad file or key.
fn sign_entry(path: &Path, wanted: &waitroom::tools::sign_entry::Wanted<'_>) -> ExitCode {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let signed = ConfigFile::read(path)
        .map_err(|e| e.to_string())
        .and_then(|file| {
            waitroom::tools::sign_entry::sign_entry(&file, &ProcessEnvironment, wanted, now)
                .map_err(|e| e.to_string())
        });
    match signed {
        Ok(token) => {
            println!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

fn run(path: &Path, test: bool, dev: bool, upgrade: bool) -> ExitCode {
    let (config, warnings) = match Config::load(path, &ProcessEnvironment, dev) {
        Ok(loaded) => loaded,
        Err(e) => {
            // One line an error, each `key: reason`, all of them.
            for error in e.into_list() {
                eprintln!("waitroom-proxy: {}: {error}", path.display());
            }
            return ExitCode::from(2);
        }
    };
    waitroom::service::logging::init(config.log.format);
    for warning in &warnings {
        log::warn!("{warning}");
    }
    if test {
        let checked = waitroom::service::server::check_files(&config)
            .and_then(|()| waitroom::service::server::check_origin(&config));
        if let Err(e) = checked {
            eprintln!("waitroom-proxy: {}: {e}", path.display());
            return ExitCode::from(2);
        }
        print!("{}", config.masked_toml());
        eprintln!("waitroom-proxy: {}: configuration ok", path.display());
        for line in config.rooms.iter().flat_map(|room| room.explained()) {
            eprintln!("waitroom-proxy: {}: {line}", path.display());
        }
        for line in
            waitroom::service::live::live_overrides(&config, waitroom::service::live::TEST_TIMEOUT)
        {
            eprintln!("waitroom-proxy: {}: {line}", path.display());
        }
        return ExitCode::SUCCESS;
    }
    match waitroom::service::server::run(&config, upgrade) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("waitroom-proxy: {e}");
            ExitCode::FAILURE
        }
    }
}

fn export_terraform(path: &Path, out: Option<&Path>) -> ExitCode {
    let source = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    let export = match ConfigFile::read(path)
        .map_err(Into::into)
        .and_then(|file| terraform_vars(&file, &source))
    {
        Ok(export) => export,
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    eprintln!("waitroom-proxy: what Cloudflare cannot express or does differently:");
    for note in &export.notes {
        eprintln!("  - {note}");
    }
    match out {
        None => print!("{}", export.tfvars),
        Some(out) => {
            if let Err(e) = std::fs::write(out, &export.tfvars) {
                eprintln!("waitroom-proxy: cannot write {}: {e}", out.display());
                return ExitCode::FAILURE;
            }
            eprintln!("waitroom-proxy: wrote {}", out.display());
        }
    }
    ExitCode::SUCCESS
}
