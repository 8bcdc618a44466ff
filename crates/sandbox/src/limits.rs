//! Per-task resource limits (`[tasks.limits]`): what one task's commands may use of the machine,
//! so that a fork bomb or a memory hog ends its own task, not the runner.
//!
//! A manifest writes them as [`LimitFields`] (`memory = "2GiB"`, `processes = 512`,
//! `open_files = 4096`, `file_size = "1GiB"`, `cpu_time = "30m"`, any of them `"unlimited"`);
//! the plan resolves them over [`Limits::defaults`] into a [`Limits`], which travels to the
//! supervisor inside the [`Policy`](super::Policy). There `memory`, `processes` and `cpu_time`
//! are watched over the command's whole process tree (the monitor, `sandbox::monitor`) and the per-process
//! resource limits of [`Rlimits`] are set between fork and exec.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The limits of one task's commands; `None` is "no limit of this kind".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes of memory, for all the processes of one command together.
    #[serde(default)]
    pub memory: Option<u64>,
    /// Processes (and threads) of one command alive at once.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Open files per process.
    #[serde(default)]
    pub open_files: Option<u64>,
    /// Bytes one file may grow to.
    #[serde(default)]
    pub file_size: Option<u64>,
    /// Seconds of CPU time per process.
    #[serde(default)]
    pub cpu_time: Option<u64>,
}

/// The default `open_files`: far above what builds open, low enough to bound kernel memory.
pub const DEFAULT_OPEN_FILES: u64 = 16_384;
/// The default `file_size`: larger than any build artifact, smaller than a runner's free disk.
pub const DEFAULT_FILE_SIZE: u64 = 8 << 30;
/// The least default `processes` (threads count), whatever the number of CPUs.
pub const MIN_DEFAULT_PROCESSES: u64 = 2048;
/// Default `processes` per logical CPU, above [`MIN_DEFAULT_PROCESSES`] (a parallel build runs
/// a compiler with its threads per CPU).
pub const DEFAULT_PROCESSES_PER_CPU: u64 = 64;

impl Limits {
    /// The limits a task gets when it sets none: `memory` half of the machine's RAM,
    /// `processes` max(2048, 64 per CPU), `open_files` 16384, `file_size` 8 GiB, `cpu_time`
    /// unlimited (the task's `timeout` bounds time). docs/src/security.md#resource-limits says why.
    pub fn defaults() -> Limits {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Limits {
            memory: physical_memory().map(|bytes| bytes / 2),
            processes: Some((DEFAULT_PROCESSES_PER_CPU * cpus).max(MIN_DEFAULT_PROCESSES)),
            open_files: Some(DEFAULT_OPEN_FILES),
            file_size: Some(DEFAULT_FILE_SIZE),
            cpu_time: None,
        }
    }
}

/// The machine's RAM in bytes (`MemTotal` of `/proc/meminfo`), when known.
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One limit as a manifest writes it: a number or a string (`"2GiB"`, `"30m"`, `"unlimited"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum LimitValue {
    /// A bare number: a count, or seconds for `cpu_time` (sizes need a unit).
    Number(u64),
    /// A size with its unit, a duration, a count, or `"unlimited"`.
    Text(String),
}

/// `[tasks.limits]` (also in `[defaults]`): each field overlays the one below it on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LimitFields {
    /// Memory of all the processes of one command together: a size such as `"2GiB"`.
    pub memory: Option<LimitValue>,
    /// Processes and threads of one command alive at once.
    pub processes: Option<LimitValue>,
    /// Files one process may have open.
    pub open_files: Option<LimitValue>,
    /// The size one file may grow to: a size such as `"1GiB"`.
    pub file_size: Option<LimitValue>,
    /// CPU time of one process: a duration such as `"30m"` (a bare number is seconds).
    pub cpu_time: Option<LimitValue>,
}

/// The word that turns a limit off.
pub const UNLIMITED: &str = "unlimited";

impl LimitFields {
    /// `base` with every limit `top` sets replaced by `top`'s.
    pub fn overlay(base: Option<LimitFields>, top: Option<LimitFields>) -> Option<LimitFields> {
        match (base, top) {
            (Some(b), Some(t)) => Some(LimitFields {
                memory: t.memory.or(b.memory),
                processes: t.processes.or(b.processes),
                open_files: t.open_files.or(b.open_files),
                file_size: t.file_size.or(b.file_size),
                cpu_time: t.cpu_time.or(b.cpu_time),
            }),
            (b, t) => t.or(b),
        }
    }

    /// These fields over `defaults`; `Err` lists every invalid field with what is wrong.
    pub fn resolve(&self, defaults: &Limits) -> Result<Limits, Vec<(&'static str, LimitError)>> {
        let mut errors = Vec::new();
        let mut take = |name: &'static str,
                        value: &Option<LimitValue>,
                        default: Option<u64>,
                        parse: fn(&LimitValue) -> Result<Option<u64>, LimitError>| match value {
            None => default,
            Some(value) => parse(value).unwrap_or_else(|e| {
                errors.push((name, e));
                default
            }),
        };
        let limits = Limits {
            memory: take("memory", &self.memory, defaults.memory, size),
            processes: take("processes", &self.processes, defaults.processes, count),
            open_files: take("open_files", &self.open_files, defaults.open_files, count),
            file_size: take("file_size", &self.file_size, defaults.file_size, size),
            cpu_time: take("cpu_time", &self.cpu_time, defaults.cpu_time, seconds),
        };
        if errors.is_empty() { Ok(limits) } else { Err(errors) }
    }

    /// Every invalid field, as `(name, problem)`.
    pub fn problems(&self) -> Vec<(&'static str, LimitError)> {
        self.resolve(&Limits::default()).err().unwrap_or_default()
    }
}

/// Why one limit's value was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    /// A bare number for a size (`memory = 512`): more likely MiB than bytes.
    #[error("{0} has no unit: write \"{0}MiB\" or \"{0}B\" (units: B, KiB, MiB, GiB, TiB)")]
    SizeWithoutUnit(u64),
    /// A count that is neither a whole number nor [`UNLIMITED`].
    #[error("{0:?} is not a whole number or \"{UNLIMITED}\"")]
    NotACount(String),
    /// Zero, which would stop every command.
    #[error("0 would stop every command: give a limit above 0, or \"{UNLIMITED}\"")]
    Zero,
    /// A size that does not parse.
    #[error(transparent)]
    Size(#[from] SizeError),
    /// A CPU time that does not parse.
    #[error(transparent)]
    Duration(#[from] dracode_input::DurationError),
}

/// Why [`parse_size`] refused a text; it prints the text, why, and an example.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {text:?}: {problem} (write e.g. \"512MiB\" or \"2GiB\"; units: B, KiB, MiB, GiB, TiB)")]
pub struct SizeError {
    /// The text as written.
    pub text: String,
    /// What is wrong with it.
    pub problem: SizeProblem,
}

/// What is wrong with a size, in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SizeProblem {
    /// No number at the start.
    #[error("it does not start with a number")]
    NoNumber,
    /// A number without a unit.
    #[error("it has no unit")]
    NoUnit,
    /// `KB`, `MB`, …: decimal or binary?
    #[error("decimal units are ambiguous here; use the binary ones")]
    DecimalUnit,
    /// A unit that is not a size unit.
    #[error("unknown unit")]
    UnknownUnit,
    /// More bytes than a `u64` holds.
    #[error("it is too large")]
    TooLarge,
}

/// A size limit: `"512MiB"`, or `"unlimited"` (`None`). A bare number is refused: `memory = 512`
/// is far more likely to mean MiB than bytes.
fn size(value: &LimitValue) -> Result<Option<u64>, LimitError> {
    match value {
        LimitValue::Number(n) => Err(LimitError::SizeWithoutUnit(*n)),
        LimitValue::Text(text) if text.trim() == UNLIMITED => Ok(None),
        LimitValue::Text(text) => positive(parse_size(text)?).map(Some),
    }
}

/// A count limit: a positive whole number (also as a string), or `"unlimited"`.
fn count(value: &LimitValue) -> Result<Option<u64>, LimitError> {
    match value {
        LimitValue::Number(n) => positive(*n).map(Some),
        LimitValue::Text(text) if text.trim() == UNLIMITED => Ok(None),
        LimitValue::Text(text) => match text.trim().parse::<u64>() {
            Ok(n) => positive(n).map(Some),
            Err(_) => Err(LimitError::NotACount(text.clone())),
        },
    }
}

/// A CPU time: a duration (`"30m"`, a bare number of seconds), or `"unlimited"`.
fn seconds(value: &LimitValue) -> Result<Option<u64>, LimitError> {
    let text = match value {
        LimitValue::Number(n) => n.to_string(),
        LimitValue::Text(text) if text.trim() == UNLIMITED => return Ok(None),
        LimitValue::Text(text) => text.clone(),
    };
    let duration = dracode_input::duration::parse_positive(&text)?;
    Ok(Some(duration.as_secs_f64().ceil() as u64))
}

fn positive(n: u64) -> Result<u64, LimitError> {
    if n == 0 { Err(LimitError::Zero) } else { Ok(n) }
}

/// The binary units of a size, largest first.
const UNITS: [(&str, u64); 5] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];

/// Parses a size with a binary unit: `B`, `KiB`/`K`, `MiB`/`M`, `GiB`/`G`, `TiB`/`T` (case
/// does not matter; `1.5GiB` is fine). Decimal units (`GB`) are refused as ambiguous.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = (&trimmed[..split], trimmed[split..].trim());
    let bad = |problem| SizeError { text: text.to_string(), problem };
    let amount: f64 = number.parse().map_err(|_| bad(SizeProblem::NoNumber))?;
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => return Err(bad(SizeProblem::NoUnit)),
        "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" | "mb" | "gb" | "tb" => return Err(bad(SizeProblem::DecimalUnit)),
        _ => return Err(bad(SizeProblem::UnknownUnit)),
    };
    let bytes = amount * factor as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad(SizeProblem::TooLarge));
    }
    Ok(bytes.round() as u64)
}

/// A size as a person reads it: the largest binary unit that divides it (`256 MiB`), else with
/// one decimal (`1.5 GiB`), else bytes.
pub fn format_size(bytes: u64) -> String {
    let larger = UNITS.iter().filter(|(_, factor)| *factor > 1 && bytes >= *factor);
    if let Some((unit, factor)) = larger.clone().find(|(_, factor)| bytes.is_multiple_of(*factor)) {
        return format!("{} {unit}", bytes / factor);
    }
    match larger.clone().next() {
        Some((unit, factor)) => format!("{:.1} {unit}", bytes as f64 / *factor as f64),
        None => format!("{bytes} B"),
    }
}

/// A limit's value as [`Report::LimitReached`](super::incidents::Report::LimitReached) and the task's
/// error show it.
pub fn format_limit(limit: &str, value: u64) -> String {
    match limit {
        "memory" | "file_size" => format_size(value),
        "cpu_time" => humantime::format_duration(std::time::Duration::from_secs(value)).to_string(),
        _ => value.to_string(),
    }
}

/// The per-process resource limits of a command, computed before the fork and set in the child
/// between fork and exec ([`Rlimits::apply`]). Each is a ceiling, never a raise: the value is
/// `min(limit, the hard limit dracode runs with)`, set as both soft and hard limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rlimits {
    settings: [Option<(RlimitResource, u64)>; 5],
}

#[cfg(target_os = "linux")]
type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_os = "linux"))]
type RlimitResource = libc::c_int;

/// Seconds of CPU time the kernel allows past `cpu_time` before it kills a process itself: the
/// monitor normally stops it first, and reports it.
const CPU_BACKSTOP_SECS: u64 = 2;

/// Processes (threads) the user's other programs — dracode itself, other tasks' commands, the
/// CI agent — may start while a command runs, above what ran when it started: without it, the
/// `RLIMIT_NPROC` backstop, which counts all of them, would make an ordinary command's `fork` fail
/// on a busy machine before the monitor's exact per-command count sees anything.
pub const NPROC_HEADROOM: u64 = 1024;

impl Rlimits {
    /// The rlimits for `limits`: `RLIMIT_NOFILE` (open_files), `RLIMIT_FSIZE` (file_size),
    /// `RLIMIT_CPU` (cpu_time, a backstop behind the monitor), `RLIMIT_DATA` (with `memory`: a
    /// per-process backstop at the larger of `memory` and the machine's RAM, so that no single
    /// process maps more writable memory than there is, while the monitor enforces `memory`
    /// itself; not `RLIMIT_AS`, which runtimes reserving address space break), and `RLIMIT_NPROC` (processes, a backstop: it counts every process of the user, so it
    /// is set to the tasks now running on the machine plus twice the limit plus
    /// [`NPROC_HEADROOM`] for what other tasks and programs of the same user start meanwhile;
    /// root ignores it).
    pub fn for_limits(limits: &Limits) -> Rlimits {
        let nproc = limits.processes.map(|p| system_tasks().saturating_add(p.saturating_mul(2)).saturating_add(NPROC_HEADROOM));
        let entries = [
            (libc::RLIMIT_NOFILE, limits.open_files),
            (libc::RLIMIT_FSIZE, limits.file_size),
            (libc::RLIMIT_CPU, limits.cpu_time.map(|s| s + CPU_BACKSTOP_SECS)),
            (libc::RLIMIT_DATA, limits.memory.map(|m| m.max(physical_memory().unwrap_or(0)))),
            (libc::RLIMIT_NPROC, nproc),
        ];
        let mut settings = [None; 5];
        for (slot, (resource, value)) in settings.iter_mut().zip(entries) {
            *slot = value.map(|v| (resource, v));
        }
        Rlimits { settings }
    }

    /// Sets every limit on the calling process.
    ///
    /// # Safety
    /// Meant for `pre_exec`: only `getrlimit`/`setrlimit` on stack memory.
    pub unsafe fn apply(&self) -> std::io::Result<()> {
        for (resource, value) in self.settings.iter().flatten() {
            // SAFETY: both calls read or write one rlimit struct on the stack.
            unsafe {
                let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                if libc::getrlimit(*resource, &mut current) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ceiling = (*value as libc::rlim_t).min(current.rlim_max);
                let wanted = libc::rlimit { rlim_cur: ceiling, rlim_max: ceiling };
                if libc::setrlimit(*resource, &wanted) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Tasks (threads) on the whole machine now: the denominator of the fourth field of
/// `/proc/loadavg` (one small read); 0 when unknown.
fn system_tasks() -> u64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().nth(3).and_then(|f| f.split_once('/')).and_then(|(_, total)| total.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Option<LimitValue> {
        Some(LimitValue::Text(s.into()))
    }

    #[test]
    fn sizes_take_binary_units_and_refuse_bare_numbers() {
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("100B").unwrap(), 100);
        for bad in ["512", "2GB", "lots", "1 parsec", "GiB", ""] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("2GB").unwrap_err().to_string().contains("binary"), "says why");
        assert_eq!(
            parse_size("lots").unwrap_err().to_string(),
            "invalid size \"lots\": it does not start with a number (write e.g. \"512MiB\" or \"2GiB\"; units: B, KiB, MiB, GiB, TiB)"
        );
        assert_eq!(format_size(200 << 20), "200 MiB");
        assert_eq!(format_size(3 << 29), "1536 MiB");
        assert_eq!(format_size(1500), "1.5 KiB");
        assert_eq!(format_size(1000), "1000 B");
        assert_eq!(format_size(5), "5 B");
        assert_eq!(format_limit("cpu_time", 90), "1m 30s");
    }

    #[test]
    fn fields_resolve_over_the_defaults_and_unlimited_turns_one_off() {
        let defaults = Limits::defaults();
        let fields = LimitFields {
            memory: text("200MiB"),
            processes: Some(LimitValue::Number(32)),
            open_files: text("unlimited"),
            file_size: None,
            cpu_time: text("30m"),
        };
        let limits = fields.resolve(&defaults).unwrap();
        assert_eq!(limits.memory, Some(200 << 20));
        assert_eq!(limits.processes, Some(32));
        assert_eq!(limits.open_files, None);
        assert_eq!(limits.file_size, defaults.file_size);
        assert_eq!(limits.cpu_time, Some(1800));
        let bare = LimitFields { cpu_time: Some(LimitValue::Number(90)), ..LimitFields::default() }.resolve(&defaults).unwrap_err();
        assert!(bare[0].1.to_string().contains("no unit"), "a bare number is not a duration: {bare:?}");
    }

    #[test]
    fn every_bad_field_is_named() {
        let fields = LimitFields {
            memory: Some(LimitValue::Number(512)),
            processes: Some(LimitValue::Number(0)),
            open_files: text("many"),
            file_size: text("1GB"),
            cpu_time: text("forever"),
        };
        let problems = fields.problems();
        let names: Vec<&str> = problems.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["memory", "processes", "open_files", "file_size", "cpu_time"], "{problems:?}");
        let shown: Vec<String> = problems.iter().map(|(_, e)| e.to_string()).collect();
        assert_eq!(shown[0], "512 has no unit: write \"512MiB\" or \"512B\" (units: B, KiB, MiB, GiB, TiB)");
        assert_eq!(shown[1], "0 would stop every command: give a limit above 0, or \"unlimited\"");
        assert_eq!(shown[2], "\"many\" is not a whole number or \"unlimited\"");
    }

    #[test]
    fn overlay_is_per_field() {
        let below = LimitFields { memory: text("1GiB"), processes: Some(LimitValue::Number(100)), ..LimitFields::default() };
        let above = LimitFields { memory: text("2GiB"), ..LimitFields::default() };
        let merged = LimitFields::overlay(Some(below), Some(above)).unwrap();
        assert_eq!((merged.memory, merged.processes), (text("2GiB"), Some(LimitValue::Number(100))));
    }

    #[test]
    fn defaults_stop_a_bomb_and_a_hog_but_leave_room_for_a_build() {
        let d = Limits::defaults();
        let ram = physical_memory().unwrap();
        assert_eq!(d.memory, Some(ram / 2));
        assert!(d.processes.unwrap() >= MIN_DEFAULT_PROCESSES);
        assert!(d.open_files.unwrap() >= 4096 && d.file_size.unwrap() >= 1 << 30);
        assert_eq!(d.cpu_time, None, "the task's timeout bounds time");
        assert!(system_tasks() > 0);
    }
}
