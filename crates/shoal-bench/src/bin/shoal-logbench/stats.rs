//! Summaries: percentiles of latency samples, median and spread of repeated rates, and
//! the reader's per-writer sequence check.

/// The `p`-th percentile (0 to 100) of `v`, which it sorts; 0 when empty.
pub fn pct(v: &mut [u32], p: f64) -> u32 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * p / 100.0).round() as usize;
    v[i]
}

/// Median, least and greatest of `v`.
pub fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let med = if s.is_empty() { 0.0 } else { s[s.len() / 2] };
    (
        med,
        s.first().copied().unwrap_or(0.0),
        s.last().copied().unwrap_or(0.0),
    )
}

/// A latency in nanoseconds, as microseconds with two decimals.
pub fn us(ns: u32) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// What the reader saw of each writer: the next sequence number it expects from each,
/// the records it got, the records that came out of order or twice (a failure), and
/// the gaps (records lost: a failure, except for datagrams, where they are drops).
#[derive(Default)]
pub struct Check {
    next: Vec<u64>,
    /// Records read.
    pub got: u64,
    /// Records seen twice or out of their writer's order.
    pub disorder: u64,
    /// Records skipped over (never read).
    pub gaps: u64,
}

impl Check {
    /// A check of `writers` writers.
    pub fn new(writers: usize) -> Check {
        Check {
            next: vec![0; writers],
            ..Check::default()
        }
    }

    /// Counts record `seq` of writer `id`; false if `id` is no writer of the run.
    pub fn see(&mut self, id: u32, seq: u64) -> bool {
        let Some(n) = self.next.get_mut(id as usize) else {
            return false;
        };
        self.got += 1;
        if seq < *n {
            self.disorder += 1;
        } else {
            self.gaps += seq - *n;
            *n = seq + 1;
        }
        true
    }

    /// Records never read at the end of the run, given each writer's count: lost.
    pub fn finish(&mut self, written: &[u64]) {
        for (n, w) in self.next.iter().zip(written) {
            self.gaps += w.saturating_sub(*n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Check;

    #[test]
    fn a_lost_a_repeated_and_an_unread_record_are_counted() {
        let mut c = Check::new(2);
        for (id, seq) in [(0, 0), (1, 0), (0, 2), (0, 2), (1, 1)] {
            assert!(c.see(id, seq));
        }
        assert!(!c.see(5, 0), "a writer that is not in the run");
        // Writer 0 wrote 3 (seq 1 never read), writer 1 wrote 3 (seq 2 never read).
        c.finish(&[3, 3]);
        assert_eq!((c.got, c.gaps, c.disorder), (5, 2, 1));
    }
}
