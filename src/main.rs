use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use waitroom::config::Config;
use waitroom::config::model::ProcessEnvironment;

/// A self-hosted virtual waiting room in front of your shop.
#[derive(Parser)]
#[command(
    name = "waitroom-proxy",
    version,
    about,
    subcommand_negates_reqs = true
)]
struct Cli {
    /// The room's configuration file (see config/drop.toml).
    #[arg(long, short, required = true)]
    config: Option<PathBuf>,
    /// Check the configuration, print it with secrets masked, and exit.
    #[arg(long, short)]
    test: bool,
    /// Allow missing secrets (random ones for this run). Never in production.
    #[arg(long)]
    dev: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Propose total_active_users and new_users_per_minute from a load/k6-capacity.js summary.
    Calibrate {
        /// The JSON summary written by load/k6-capacity.js (its SUMMARY).
        #[arg(long)]
        summary: PathBuf,
        /// How long a visitor stays inside: the room's session_duration.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        session: Duration,
        /// Safety margin below the knee (0.35 = 35 %).
        #[arg(long, default_value_t = waitroom::calibrate::DEFAULT_MARGIN)]
        margin: f64,
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
    match waitroom::calibrate::propose(&json, session.as_secs_f64() / 60.0, margin) {
        Ok(proposal) => {
            println!("{}\n", proposal.explanation);
            print!("{}", proposal.room_toml());
            println!("session_duration = \"{}\"", config_duration(session));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", summary.display());
            match e {
                waitroom::calibrate::CalibrateError::NoPassingStage { .. } => ExitCode::FAILURE,
                _ => ExitCode::from(2),
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Calibrate {
        summary,
        session,
        margin,
    }) = &cli.command
    {
        return calibrate(summary, *session, *margin);
    }
    let Some(config_path) = cli.config else {
        eprintln!("waitroom-proxy: --config FILE is required");
        return ExitCode::from(2);
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let (config, warnings) = match Config::load(&config_path, &ProcessEnvironment, cli.dev) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", config_path.display());
            return ExitCode::from(2);
        }
    };
    for warning in &warnings {
        eprintln!("waitroom-proxy: warning: {warning}");
    }
    if cli.test {
        print!("{}", config.masked_toml());
        eprintln!(
            "waitroom-proxy: {}: configuration ok",
            config_path.display()
        );
        return ExitCode::SUCCESS;
    }
    match waitroom::server::run_forever(&config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("waitroom-proxy: {e}");
            ExitCode::FAILURE
        }
    }
}
