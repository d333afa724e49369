//! Numbers, sizes and times for humans.

/// `1536` → `"1.5 KiB"`; exact multiples have no decimals (`"256 KiB"`).
pub fn size(b: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64;
    let mut unit = 0;
    v /= 1024.0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else if v < 10.0 {
        format!("{v:.2} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `1234567` → `"1,234,567"`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate rounded to whole units with thousands separators.
pub fn rate(r: f64) -> String {
    if r.is_finite() && r >= 0.0 {
        count(r.round() as u64)
    } else {
        "-".into()
    }
}

/// `part` as a percentage of `whole`.
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

pub use shoal_log::format::utc;

/// A plain text table: a header row, then the rows; columns are right-aligned except the
/// ones listed in `left`. Every line ends with a newline.
pub fn table(headers: &[&str], rows: &[Vec<String>], left: &[usize]) -> String {
    let n = headers.len();
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, c) in cells.enumerate().take(n) {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w[i].saturating_sub(c.chars().count());
            if left.contains(&i) {
                s.push_str(c);
                if i + 1 < n {
                    s.push_str(&" ".repeat(pad));
                }
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(&mut headers.iter().copied());
    for r in rows {
        out.push_str(&line(&mut r.iter().map(|s| s.as_str())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.50 KiB");
        assert_eq!(size(256 * 1024), "256 KiB");
        assert_eq!(size(1 << 40), "1 TiB");
        assert_eq!(size(15 * 1024 * 1024 + 300_000), "15.3 MiB");
    }

    #[test]
    fn counts() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
    }

    #[test]
    fn tables() {
        let t = table(
            &["NAME", "N"],
            &[
                vec!["a".into(), "10".into()],
                vec!["long".into(), "2".into()],
            ],
            &[0],
        );
        assert_eq!(t, "NAME   N\na     10\nlong   2\n");
    }
}
