use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use waitroom::config::Config;
use waitroom::config::model::ProcessEnvironment;

/// A self-hosted virtual waiting room in front of your shop.
#[derive(Parser)]
#[command(name = "waitroom-proxy", version, about)]
struct Cli {
    /// The room's configuration file (see config/drop.toml).
    #[arg(long, short)]
    config: PathBuf,
    /// Check the configuration, print it with secrets masked, and exit.
    #[arg(long, short)]
    test: bool,
    /// Allow missing secrets (random ones for this run). Never in production.
    #[arg(long)]
    dev: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let (config, warnings) = match Config::load(&cli.config, &ProcessEnvironment, cli.dev) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", cli.config.display());
            return ExitCode::from(2);
        }
    };
    for warning in &warnings {
        eprintln!("waitroom-proxy: warning: {warning}");
    }
    if cli.test {
        print!("{}", config.masked_toml());
        eprintln!("waitroom-proxy: {}: configuration ok", cli.config.display());
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
