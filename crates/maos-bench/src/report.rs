//! The report: rows of metrics with their targets, percentiles of latency samples, and the
//! human and markdown tables they are printed as.

use std::fmt::Write as _;
use std::fs;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

#[derive(Clone, Debug)]
pub struct Metric {
    pub scenario: String,
    pub metric: String,
    pub value: f64,
    pub unit: &'static str,
    pub goal: Option<Goal>,
}

impl Metric {
    pub fn new(scenario: &str, metric: &str, value: f64, unit: &'static str) -> Metric {
        Metric {
            scenario: scenario.to_string(),
            metric: metric.to_string(),
            value,
            unit,
            goal: None,
        }
    }
    pub fn goal(mut self, g: Goal) -> Metric {
        self.goal = Some(g);
        self
    }
    pub fn verdict(&self) -> &'static str {
        match self.goal {
            None => "",
            Some(Goal::AtMost(t)) if self.value <= t => "PASS",
            Some(Goal::AtLeast(t)) if self.value >= t => "PASS",
            Some(_) => "MISS",
        }
    }
}

fn fmt_num(v: f64, unit: &str) -> String {
    let s = if unit == "×" || unit == "%" {
        format!("{v:.2}")
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        group_thousands(v.round() as i64)
    } else {
        format!("{v:.1}")
    };
    if unit.is_empty() {
        s
    } else if unit == "×" {
        format!("{s}×")
    } else {
        format!("{s} {unit}")
    }
}

pub fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

fn fmt_goal(m: &Metric) -> String {
    match m.goal {
        None => String::new(),
        Some(Goal::AtMost(t)) => format!("≤ {}", fmt_num(t, m.unit)),
        Some(Goal::AtLeast(t)) => format!("≥ {}", fmt_num(t, m.unit)),
    }
}

pub fn print_human(title: &str, metrics: &[Metric]) {
    println!("\n{title}");
    let w = metrics.iter().map(|m| m.metric.len()).max().unwrap_or(0);
    for m in metrics {
        let goal = fmt_goal(m);
        let tail = if goal.is_empty() {
            String::new()
        } else {
            format!("   (target {goal}: {})", m.verdict())
        };
        println!("  {:<w$}  {:>14}{tail}", m.metric, fmt_num(m.value, m.unit));
    }
}

pub fn markdown(metrics: &[Metric]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| Scenario | Metric | Result | Target | |");
    let _ = writeln!(s, "|---|---|---:|---|---|");
    for m in metrics {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            m.scenario,
            m.metric,
            fmt_num(m.value, m.unit),
            fmt_goal(m),
            m.verdict()
        );
    }
    s
}

/// Nearest-rank percentile of sorted samples (ns), in µs.
pub fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

fn mean_us(samples: &[u64]) -> f64 {
    samples.iter().sum::<u64>() as f64 / samples.len().max(1) as f64 / 1000.0
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// p50 / p99 / mean / max rows for a latency series.
pub fn latency_rows(
    scenario: &str,
    samples: &mut [u64],
    p50_goal: Option<Goal>,
    with_mean: bool,
) -> Vec<Metric> {
    samples.sort_unstable();
    let mut p50 = Metric::new(scenario, "p50 latency", pct(samples, 50.0), "µs");
    if let Some(g) = p50_goal {
        p50 = p50.goal(g);
    }
    let mut rows = vec![
        p50,
        Metric::new(scenario, "p99 latency", pct(samples, 99.0), "µs"),
    ];
    if with_mean {
        rows.push(Metric::new(
            scenario,
            "mean latency",
            mean_us(samples),
            "µs",
        ));
    }
    rows.push(Metric::new(
        scenario,
        "max latency",
        pct(samples, 100.0),
        "µs",
    ));
    rows
}

/// Latency rows with a p50 and a p99 target.
pub fn latency_rows_2(
    scenario: &str,
    samples: &mut [u64],
    goals: Option<(Goal, Goal)>,
) -> Vec<Metric> {
    let mut rows = latency_rows(scenario, samples, goals.map(|g| g.0), true);
    if let Some((_, p99)) = goals {
        rows[1].goal = Some(p99);
    }
    // Where p99 sits on a cliff (a rare slow commit), how many requests are past it says more.
    let slow = samples.iter().filter(|&&ns| ns > 1_000_000).count();
    rows.push(Metric::new(
        scenario,
        "requests over 1 ms",
        slow as f64 * 100.0 / samples.len().max(1) as f64,
        "%",
    ));
    rows
}

/// A scenario's name in the table: with the `synchronous` mode it ran in.
pub fn label(scenario: &str, sync: &str) -> String {
    format!("{scenario} ({sync})")
}

/// A duration in ms.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// CPUs, their model and the kernel, for the markdown table's heading.
pub fn machine() -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{n} CPUs ({cpu}), Linux {}", kernel.trim())
}
