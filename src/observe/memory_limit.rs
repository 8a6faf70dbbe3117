//! The memory limit the kernel holds the proxy to, read from its control group at each scrape:
//! past it the kernel kills the process (an OOM kill drops every open page at once), and RSS
//! alone does not say how close that is. `waitroom_memory_limit_bytes` is 0 when no limit is set
//! (or none could be read), so a rule can divide by it only where it is above 0.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGauge, Opts};

/// cgroup v1's "no limit": the largest page-aligned i64, or near it. Anything this large is no
/// limit a machine has.
const UNLIMITED_FROM: u64 = 1 << 60;

pub(super) struct MemoryLimit {
    gauge: IntGauge,
}

impl MemoryLimit {
    pub(super) fn new(name: &str) -> prometheus::Result<Self> {
        let gauge = IntGauge::with_opts(Opts::new(
            name,
            "The memory limit of the proxy's control group in bytes (systemd MemoryMax=, a \
             container's limit), the smallest on the way to the root; 0 when there is none",
        ))?;
        Ok(Self { gauge })
    }
}

impl Collector for MemoryLimit {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let limit = cgroup_memory_limit().unwrap_or(0);
        self.gauge.set(i64::try_from(limit).unwrap_or(i64::MAX));
        self.gauge.collect()
    }
}

fn cgroup_memory_limit() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    limit_from(&cgroups, |path| std::fs::read_to_string(path).ok())
}

/// The limit in force for the groups of `/proc/self/cgroup`: the smallest set on the way from
/// the process's group up to the root (a limit on a parent, a systemd slice say, holds the
/// child too), in cgroup v2 (`0::<path>`, `memory.max`) or v1 (the `memory` controller's line,
/// `memory.limit_in_bytes`). A group outside the mounted tree (a container without its own
/// cgroup namespace) is looked up as far as its files exist: the container's own root holds its
/// limit.
fn limit_from(cgroups: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let mut least: Option<u64> = None;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (root, file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir = path.trim_end_matches('/');
        loop {
            if let Some(limit) = read(&format!("{root}{dir}/{file}")).and_then(|t| parse(&t)) {
                least = Some(least.map_or(limit, |l| l.min(limit)));
            }
            match dir.rfind('/') {
                Some(parent) => dir = &dir[..parent],
                None => break,
            }
        }
    }
    least
}

/// A limit file's value: none for `max` (v2) or v1's huge "unlimited".
fn parse(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|&bytes| bytes < UNLIMITED_FROM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn limit(cgroups: &str, files: &[(&str, &str)]) -> Option<u64> {
        let files: HashMap<&str, &str> = files.iter().copied().collect();
        limit_from(cgroups, |path| files.get(path).map(|t| t.to_string()))
    }

    #[test]
    fn the_smallest_limit_on_the_way_to_the_root_holds() {
        let unit = "0::/system.slice/waitroom.service\n";
        let files = [
            (
                "/sys/fs/cgroup/system.slice/waitroom.service/memory.max",
                "2147483648\n",
            ),
            ("/sys/fs/cgroup/system.slice/memory.max", "1073741824\n"),
        ];
        assert_eq!(limit(unit, &files), Some(1 << 30));
        let files = [(
            "/sys/fs/cgroup/system.slice/waitroom.service/memory.max",
            "max\n",
        )];
        assert_eq!(limit(unit, &files), None);
    }

    #[test]
    fn a_container_finds_its_limit_at_its_own_root() {
        // With its own cgroup namespace the group is "/"; without, a path the container's
        // mount does not have.
        let files = [("/sys/fs/cgroup/memory.max", "536870912")];
        assert_eq!(limit("0::/\n", &files), Some(512 << 20));
        assert_eq!(
            limit("0::/kubepods/burstable/pod1/abc\n", &files),
            Some(512 << 20)
        );
    }

    #[test]
    fn cgroup_v1_reads_the_memory_controller_and_its_unlimited_is_none() {
        let groups = "5:cpu,cpuacct:/x\n4:memory:/process_api/abc\n0::/\n";
        let unlimited = [(
            "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes",
            "9223372036854771712",
        )];
        assert_eq!(limit(groups, &unlimited), None);
        let limited = [(
            "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes",
            "268435456",
        )];
        assert_eq!(limit(groups, &limited), Some(256 << 20));
    }

    #[test]
    fn nothing_readable_is_no_limit() {
        assert_eq!(limit("", &[]), None);
        assert_eq!(
            limit("0::/a\n", &[("/sys/fs/cgroup/a/memory.max", "lots")]),
            None
        );
    }
}
