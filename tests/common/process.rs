//! The proxy binary as a real process, for what only a process has: signals, the socket
//! hand-over, the pid file, its log output.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A waitroom-proxy process with its stderr in a file; killed when dropped.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `waitroom-proxy --config <config> <args>` with `env` added to the environment.
    pub fn start(config: &Path, args: &[&str], env: &[(&str, &str)], log: &Path) -> Self {
        Self::spawn(
            Command::new(env!("CARGO_BIN_EXE_waitroom-proxy")),
            config,
            args,
            env,
            log,
        )
    }

    /// Starts `waitroom-proxy --config <config>` with an open-file limit of `open_files` (soft
    /// and hard), through util-linux's `prlimit`.
    pub fn start_with_open_files(config: &Path, open_files: u64, log: &Path) -> Self {
        let mut command = Command::new("prlimit");
        command
            .arg(format!("--nofile={open_files}:{open_files}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_waitroom-proxy"));
        Self::spawn(command, config, &[], &[], log)
    }

    fn spawn(
        mut command: Command,
        config: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        log: &Path,
    ) -> Self {
        let stderr = std::fs::File::create(log).unwrap();
        command
            .arg("--config")
            .arg(config)
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("RUNTIME_DIRECTORY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (name, value) in env {
            command.env(name, value);
        }
        Self {
            child: command.spawn().unwrap(),
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        signal(self.pid(), name);
    }

    /// Its exit status, if it exits within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kill -<name> <pid>`.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Whether a process (not necessarily our child) still exists.
pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Polls `check` every 20 ms for at most `within`.
pub fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// `waitroom-proxy --test` on a config written from `text` (with the secrets every config needs
/// in the environment, and no Redis URL from outside): its exit code and its stderr.
pub fn config_test(text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .arg("--config")
        .arg(&path)
        .arg("--test")
        .env("WR_JWT_SECRET", "0123456789abcdef0123456789abcdef-secret")
        .env("WR_ADMIN_TOKEN", "0123456789abcdef0123456789abcdef-token")
        .env_remove("WR_REDIS_URL")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
