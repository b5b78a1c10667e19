//! The `process_*` series client_golang's process collector writes on Linux, which Flux's
//! control-plane dashboard counts controllers and plots CPU and memory from: CPU seconds,
//! open and maximum file descriptors, virtual and resident memory, the address-space limit,
//! start time, and IP bytes in and out. Read from `/proc` when scraped; the parsing is pure
//! ([`Sample::parse`]) and a file that cannot be read leaves its series out, as the Go
//! collector does.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc`'s times; procfs assumes 100, as every Linux build uses.
const USER_HZ: f64 = 100.0;

/// What `/proc` says of this process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub cpu_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub virtual_memory: Option<f64>,
    pub virtual_memory_max: Option<f64>,
    pub resident_memory: Option<f64>,
    pub start_time: Option<f64>,
    pub network_receive: Option<f64>,
    pub network_transmit: Option<f64>,
}

/// The texts of the `/proc` files a sample is made from.
#[derive(Debug, Default)]
pub struct ProcFiles {
    /// `/proc/self/stat`
    pub stat: Option<String>,
    /// `/proc/self/status`
    pub status: Option<String>,
    /// `/proc/self/limits`
    pub limits: Option<String>,
    /// `/proc/stat`
    pub system_stat: Option<String>,
    /// `/proc/self/net/netstat`
    pub netstat: Option<String>,
    /// Entries of `/proc/self/fd`.
    pub open_fds: Option<usize>,
}

impl ProcFiles {
    fn read() -> ProcFiles {
        let text = |path: &str| std::fs::read_to_string(path).ok();
        ProcFiles {
            stat: text("/proc/self/stat"),
            status: text("/proc/self/status"),
            limits: text("/proc/self/limits"),
            system_stat: text("/proc/stat"),
            netstat: text("/proc/self/net/netstat"),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count()),
        }
    }
}

impl Sample {
    pub fn parse(files: &ProcFiles) -> Sample {
        // Fields after the command name, which may hold spaces and parentheses.
        let stat: Vec<&str> = files
            .stat
            .as_deref()
            .and_then(|s| s.rsplit_once(')'))
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // `state` is field 3 of the whole line, so field N is stat[N - 3].
        let field = |n: usize| stat.get(n - 3).and_then(|v| v.parse::<f64>().ok());
        let cpu_seconds = field(14)
            .zip(field(15))
            .map(|(user, system)| (user + system) / USER_HZ);
        let boot_time = files.system_stat.as_deref().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        let start_time = field(22)
            .zip(boot_time)
            .map(|(ticks, boot)| boot + ticks / USER_HZ);
        let resident_memory = files.status.as_deref().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .map(|kib| kib * 1024.0)
        });
        let (receive, transmit) = files
            .netstat
            .as_deref()
            .map(ip_octets)
            .unwrap_or((None, None));
        Sample {
            cpu_seconds,
            open_fds: files.open_fds.map(|n| n as f64),
            max_fds: files
                .limits
                .as_deref()
                .and_then(|l| soft_limit(l, "Max open files")),
            virtual_memory: field(23),
            virtual_memory_max: files
                .limits
                .as_deref()
                .and_then(|l| soft_limit(l, "Max address space")),
            resident_memory,
            start_time,
            network_receive: receive,
            network_transmit: transmit,
        }
    }
}

/// A soft limit of `/proc/self/limits`; `unlimited` is the largest 64-bit value, as procfs
/// reads it.
fn soft_limit(limits: &str, name: &str) -> Option<f64> {
    let rest = limits.lines().find_map(|l| l.strip_prefix(name))?;
    let soft = rest.split_whitespace().next()?;
    if soft == "unlimited" {
        Some(u64::MAX as f64)
    } else {
        soft.parse().ok()
    }
}

/// IP bytes received and sent in the process's network namespace: `InOctets` and
/// `OutOctets` of `/proc/self/net/netstat`'s `IpExt` lines, as client_golang reads them.
fn ip_octets(netstat: &str) -> (Option<f64>, Option<f64>) {
    let mut lines = netstat.lines().filter_map(|l| l.strip_prefix("IpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return (None, None);
    };
    let value = |wanted: &str| {
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(name, _)| *name == wanted)
            .and_then(|(_, value)| value.parse::<f64>().ok())
    };
    (value("InOctets"), value("OutOctets"))
}

/// The collector registered beside the controller's metrics.
#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sample = Sample::parse(&ProcFiles::read());
        let counters = [
            (
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                sample.cpu_seconds,
            ),
            (
                "process_network_receive_bytes",
                "Number of bytes received by the process over the network.",
                sample.network_receive,
            ),
            (
                "process_network_transmit_bytes",
                "Number of bytes sent by the process over the network.",
                sample.network_transmit,
            ),
        ];
        for (name, help, value) in counters {
            if let Some(value) = value {
                let counter = ConstCounter::new(value);
                counter.encode(encoder.encode_descriptor(
                    name,
                    &crate::controller::exposition::collector_help(help),
                    None,
                    counter.metric_type(),
                )?)?;
            }
        }
        let gauges = [
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                sample.max_fds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                sample.open_fds,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                sample.resident_memory,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                sample.start_time,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                sample.virtual_memory,
            ),
            (
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes.",
                sample.virtual_memory_max,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(
                    name,
                    &crate::controller::exposition::collector_help(help),
                    None,
                    gauge.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_become_the_process_series() {
        let files = ProcFiles {
            stat: Some(
                "4242 (kustomize (ctl)) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 \
                 9 0 12000 73400320 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0"
                    .into(),
            ),
            status: Some("Name:\tkustomize\nVmSize:\t71680 kB\nVmRSS:\t  8000 kB\n".into()),
            limits: Some(
                "Limit                     Soft Limit           Hard Limit           Units\n\
                 Max open files            1048576              1048576              files\n\
                 Max address space         unlimited            unlimited            bytes\n"
                    .into(),
            ),
            system_stat: Some("cpu  1 2 3\nbtime 1764100000\nprocesses 9\n".into()),
            netstat: Some(
                "TcpExt: SyncookiesSent\nTcpExt: 0\n\
                 IpExt: InNoRoutes InTruncatedPkts InOctets OutOctets\n\
                 IpExt: 0 0 6000 8000\n"
                    .into(),
            ),
            open_fds: Some(12),
        };
        assert_eq!(
            Sample::parse(&files),
            Sample {
                cpu_seconds: Some(3.0),
                open_fds: Some(12.0),
                max_fds: Some(1_048_576.0),
                virtual_memory: Some(73_400_320.0),
                virtual_memory_max: Some(u64::MAX as f64),
                resident_memory: Some(8_192_000.0),
                start_time: Some(1_764_100_120.0),
                network_receive: Some(6000.0),
                network_transmit: Some(8000.0),
            }
        );
    }

    #[test]
    fn unreadable_files_leave_their_series_out() {
        assert_eq!(Sample::parse(&ProcFiles::default()).cpu_seconds, None);
        assert_eq!(Sample::parse(&ProcFiles::default()).open_fds, None);
    }

    #[test]
    fn this_process_is_described() {
        let sample = Sample::parse(&ProcFiles::read());
        assert!(
            sample.resident_memory.is_some_and(|b| b > 0.0),
            "{sample:?}"
        );
        assert!(sample.start_time.is_some_and(|t| t > 1.6e9), "{sample:?}");
        assert!(sample.open_fds.is_some_and(|n| n >= 3.0), "{sample:?}");
    }
}
