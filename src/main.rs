use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use waitroom::config::Config;
use waitroom::config::file::ConfigFile;
use waitroom::config::model::ProcessEnvironment;
use waitroom::export::terraform_vars;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match (cli.command, cli.config) {
        (Some(Command::ExportTerraform { config, out }), _) => {
            export_terraform(&config, out.as_deref())
        }
        (None, Some(config)) => run(&config, cli.test, cli.dev),
        (None, None) => {
            eprintln!("waitroom-proxy: --config is required");
            ExitCode::from(2)
        }
    }
}

fn run(path: &Path, test: bool, dev: bool) -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let (config, warnings) = match Config::load(path, &ProcessEnvironment, dev) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("waitroom-proxy: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    for warning in &warnings {
        eprintln!("waitroom-proxy: warning: {warning}");
    }
    if test {
        print!("{}", config.masked_toml());
        eprintln!("waitroom-proxy: {}: configuration ok", path.display());
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
