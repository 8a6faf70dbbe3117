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
    /// Take the listening sockets over from the running process (send it SIGQUIT next), through
    /// listen.upgrade_socket.
    #[arg(long, short)]
    upgrade: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, warnings) = match Config::load(&cli.config, &ProcessEnvironment, cli.dev) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", cli.config.display());
            return ExitCode::from(2);
        }
    };
    waitroom::logging::init(config.log.format);
    for warning in &warnings {
        log::warn!("{warning}");
    }
    if cli.test {
        if let Err(e) = waitroom::server::check_files(&config) {
            eprintln!("waitroom-proxy: {}: {e}", cli.config.display());
            return ExitCode::from(2);
        }
        print!("{}", config.masked_toml());
        eprintln!("waitroom-proxy: {}: configuration ok", cli.config.display());
        return ExitCode::SUCCESS;
    }
    match waitroom::server::run(&config, cli.upgrade) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("waitroom-proxy: {e}");
            ExitCode::FAILURE
        }
    }
}
