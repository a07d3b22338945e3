//! The Linux cpulist syntax: comma-separated CPU numbers and inclusive ranges.

/// A cpulist that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list `{given}`: {reason} (expected e.g. \"0-3,8,10-11\")")]
pub struct CpuListError {
    /// The text given.
    pub given: String,
    /// What is wrong with it.
    pub reason: String,
}

/// CPU numbers a list may hold are below this (Linux allows at most 8192 CPUs by default).
pub const MAX_CPUS: usize = 1 << 16;

/// Parses "0-3,8,10-11" into the sorted CPU numbers [0, 1, 2, 3, 8, 10, 11]. Rejects empty items,
/// reversed ranges and CPUs listed twice.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    let err = |reason: String| CpuListError {
        given: text.to_string(),
        reason,
    };
    let number = |s: &str| {
        s.trim()
            .parse::<usize>()
            .ok()
            .filter(|&cpu| cpu < MAX_CPUS)
            .ok_or_else(|| {
                err(format!(
                    "`{}` is not a CPU number (0 to {})",
                    s.trim(),
                    MAX_CPUS - 1
                ))
            })
    };
    let mut cpus = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            return Err(err("empty item".into()));
        }
        match item.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (number(lo)?, number(hi)?);
                if lo > hi {
                    return Err(err(format!("range {lo}-{hi} is reversed")));
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(number(item)?),
        }
    }
    cpus.sort_unstable();
    if let Some(w) = cpus.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(format!("CPU {} is listed twice", w[0])));
    }
    Ok(cpus)
}

/// Formats CPU numbers in the cpulist syntax, merging consecutive numbers into ranges.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The logical CPUs this process may run on (its affinity mask), sorted. Falls back to
/// `0..available_parallelism` where the platform does not expose a mask.
pub fn available_cpus() -> Vec<usize> {
    let mut cpus: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus = (0..n).collect();
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The logical CPUs the kernel has online (Linux sysfs), or `None` where that file does not exist
/// or cannot be parsed.
pub fn online_cpus() -> Option<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_cpu_list(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_singletons() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list(" 5 ").unwrap(), [5]);
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn rejects_malformed_lists() {
        for bad in ["", "1,,2", "3-1", "a", "1-", "0-2,2"] {
            let e = parse_cpu_list(bad).unwrap_err();
            assert!(e.to_string().contains("expected e.g."), "{bad}: {e}");
        }
    }

    #[test]
    fn this_process_has_cpus() {
        let cpus = available_cpus();
        assert!(!cpus.is_empty());
        if let Some(online) = online_cpus() {
            assert!(cpus.iter().all(|c| online.contains(c)));
        }
    }
}
