//! Delays with jitter: reconnects exponential from `base` to `cap`, so that
//! many nodes dropped by one gateway restart do not come back in lockstep;
//! polls spread by a percentage, so that many nodes do not ask at once.

use std::time::Duration;

pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The next delay: `min(cap, base·2^n)` scaled by a random factor in
    /// [0.5, 1.0] ("equal jitter": never zero, never above the cap).
    pub fn next(&mut self) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.attempt.min(16));
        self.attempt = self.attempt.saturating_add(1);
        let ceiling = exp.min(self.cap);
        let mut byte = [0u8; 1];
        let _ = getrandom::fill(&mut byte);
        ceiling.mul_f64(0.5 + f64::from(byte[0]) / 510.0)
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// `d` give or take `pct` percent.
pub fn jitter(d: Duration, pct: u64) -> Duration {
    let mut byte = [0u8; 2];
    let _ = getrandom::fill(&mut byte);
    let r = u64::from(u16::from_le_bytes(byte)) % (2 * pct + 1);
    d * (100 - pct as u32 + r as u32) / 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let delays: Vec<Duration> = (0..10).map(|_| b.next()).collect();
        assert!(delays[0] >= Duration::from_millis(500) && delays[0] <= Duration::from_secs(1));
        assert!(delays[3] >= Duration::from_secs(4) && delays[3] <= Duration::from_secs(8));
        for d in &delays[5..] {
            assert!(
                *d >= Duration::from_secs(15) && *d <= Duration::from_secs(30),
                "{d:?}"
            );
        }
        b.reset();
        assert!(b.next() <= Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_its_percent() {
        for _ in 0..200 {
            let d = jitter(Duration::from_secs(10), 20);
            assert!(
                d >= Duration::from_secs(8) && d <= Duration::from_secs(12),
                "{d:?}"
            );
        }
    }
}
