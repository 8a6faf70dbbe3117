//! The process's signals, for a proxy run as a service:
//!
//! - SIGTERM: stop accepting, let requests in flight finish for `listen.grace_period`, exit;
//! - SIGINT: exit at once;
//! - SIGQUIT: hand the listening sockets to a new process started with `--upgrade`, then drain
//!   like SIGTERM (Pingora's zero-downtime upgrade);
//! - SIGUSR2: start that new process itself (the same command line plus `--upgrade`, so the same
//!   binary path: put the new version there first), wait until it is ready to take the sockets,
//!   then hand over as on SIGQUIT. A successor that fails to start changes nothing. Started from
//!   this process, it stays inside the same service (systemd unit, sandbox, environment);
//! - SIGHUP: reload the room settings from the configuration file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora_core::server::{ShutdownSignal, ShutdownSignalWatch};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::service::reload::Reloader;

/// How long a successor may take to start (read its file, reach the store) before it is given
/// up and this process keeps serving.
const SUCCESSOR_READY: Duration = Duration::from_secs(30);
const SUCCESSOR_POLL: Duration = Duration::from_millis(50);

pub struct Signals {
    reloader: Arc<Reloader>,
    upgrade_socket: Option<PathBuf>,
}

fn listen(kind: SignalKind, name: &str) -> Option<Signal> {
    signal(kind)
        .map_err(|e| log::error!("cannot watch {name}: {e}"))
        .ok()
}

/// The next delivery of a signal; never, if it could not be watched (or its stream closed).
async fn next(signal: &mut Option<Signal>) {
    if let Some(s) = signal.as_mut()
        && s.recv().await.is_some()
    {
        return;
    }
    *signal = None;
    std::future::pending().await
}

/// This process's command line with `--upgrade` (once) at the end.
fn successor_command() -> Option<(OsString, Vec<OsString>)> {
    let mut args = std::env::args_os();
    let program = args.next()?;
    let mut rest: Vec<OsString> = args.filter(|a| a != "--upgrade" && a != "-u").collect();
    rest.push("--upgrade".into());
    Some((program, rest))
}

enum Successor {
    /// Listening on the upgrade socket: the sockets can go.
    Ready,
    Failed(String),
}

async fn wait_ready(child: &mut Child, socket: &Path) -> Successor {
    let deadline = Instant::now() + SUCCESSOR_READY;
    loop {
        if socket.exists() {
            return Successor::Ready;
        }
        match child.try_wait() {
            Ok(Some(status)) => return Successor::Failed(format!("it exited ({status})")),
            Ok(None) => {}
            Err(e) => return Successor::Failed(format!("cannot watch it: {e}")),
        }
        if Instant::now() > deadline {
            // Never two half-started proxies: this one keeps the sockets.
            let _ = child.kill();
            let _ = child.wait();
            return Successor::Failed(format!("not ready after {SUCCESSOR_READY:?}"));
        }
        tokio::time::sleep(SUCCESSOR_POLL).await;
    }
}

impl Signals {
    pub fn new(reloader: Arc<Reloader>, upgrade_socket: Option<PathBuf>) -> Self {
        Self {
            reloader,
            upgrade_socket,
        }
    }

    /// Starts the successor and says whether the sockets can be handed to it.
    async fn start_successor(&self) -> bool {
        let Some(socket) = &self.upgrade_socket else {
            log::error!("SIGUSR2 ignored: set listen.upgrade_socket to hand over to a new process");
            return false;
        };
        let Some((program, args)) = successor_command() else {
            log::error!("SIGUSR2 ignored: this process's command line is unknown");
            return false;
        };
        // A socket file left by an interrupted hand-over would look like a ready successor.
        if let Err(e) = std::fs::remove_file(socket)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            log::error!("SIGUSR2 ignored: cannot clear {}: {e}", socket.display());
            return false;
        }
        let mut child = match Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                log::error!(
                    "SIGUSR2: cannot start {}: {e}; this process keeps serving",
                    program.to_string_lossy()
                );
                return false;
            }
        };
        let pid = child.id();
        match wait_ready(&mut child, socket).await {
            Successor::Ready => {
                log::info!(successor = pid; "successor ready: handing over the listening sockets");
                true
            }
            Successor::Failed(why) => {
                log::error!(
                    successor = pid;
                    "successor failed to start: {why}; this process keeps serving"
                );
                false
            }
        }
    }
}

#[async_trait]
impl ShutdownSignalWatch for Signals {
    async fn recv(&self) -> ShutdownSignal {
        let mut term = listen(SignalKind::terminate(), "SIGTERM");
        let mut int = listen(SignalKind::interrupt(), "SIGINT");
        let mut quit = listen(SignalKind::quit(), "SIGQUIT");
        let mut usr2 = listen(SignalKind::user_defined2(), "SIGUSR2");
        let mut hup = listen(SignalKind::hangup(), "SIGHUP");
        loop {
            tokio::select! {
                _ = next(&mut term) => return ShutdownSignal::GracefulTerminate,
                _ = next(&mut int) => return ShutdownSignal::FastShutdown,
                _ = next(&mut quit) => return ShutdownSignal::GracefulUpgrade,
                _ = next(&mut usr2) => {
                    if self.start_successor().await {
                        return ShutdownSignal::GracefulUpgrade;
                    }
                }
                _ = next(&mut hup) => self.reloader.reload_and_log().await,
            }
        }
    }
}

/// Records this process as the service's main process (systemd's `PIDFile=` follows it across a
/// hand-over).
pub fn write_pid_file(path: &Path) -> std::io::Result<()> {
    std::fs::write(path, format!("{}\n", std::process::id()))
}
