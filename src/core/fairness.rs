//! Fairness you can see: how far admission order departs from arrival order. Kendall's tau is 1
//! when visitors are admitted exactly in arrival order (FIFO), near 0 when the order is unrelated
//! (a lottery within its window, a shuffled pre-queue), and -1 when it is reversed.

use std::collections::VecDeque;

use crate::clock::Millis;

/// Kendall's tau-a of the pairs (arrival, admission): concordant minus discordant pairs over all
/// pairs; pairs tied on either side count as neither. None below two pairs.
pub fn kendall_tau(pairs: &[(Millis, Millis)]) -> Option<f64> {
    let n = pairs.len();
    if n < 2 {
        return None;
    }
    let (mut concordant, mut discordant) = (0u64, 0u64);
    for (i, a) in pairs.iter().enumerate() {
        for b in &pairs[i + 1..] {
            match ((a.0 - b.0).signum(), (a.1 - b.1).signum()) {
                (0, _) | (_, 0) => {}
                (x, y) if x == y => concordant += 1,
                _ => discordant += 1,
            }
        }
    }
    let all = (n * (n - 1) / 2) as f64;
    Some((concordant as f64 - discordant as f64) / all)
}

/// The last admissions an instance saw, as (arrival, admission) times: counts order inversions
/// as they happen, and keeps the window's concordant and discordant pairs up to date as entries
/// come and go, so tau costs O(window) per admission, never O(window²).
#[derive(Debug)]
pub struct FairnessWindow {
    capacity: usize,
    recent: VecDeque<(Millis, Millis)>,
    concordant: u64,
    discordant: u64,
}

/// What one more admission added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compared {
    /// Earlier admissions in the window that arrived after this one.
    pub inversions: u64,
    /// Earlier admissions it was compared with (ties excluded).
    pub pairs: u64,
}

impl FairnessWindow {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(2),
            recent: VecDeque::with_capacity(capacity),
            concordant: 0,
            discordant: 0,
        }
    }

    /// One admission against every one in the window.
    fn compare(&self, (arrived_at, admitted_at): (Millis, Millis)) -> Compared {
        let mut compared = Compared::default();
        for &(arrived, admitted) in &self.recent {
            if arrived == arrived_at || admitted == admitted_at {
                continue;
            }
            compared.pairs += 1;
            if (arrived > arrived_at) == (admitted < admitted_at) {
                compared.inversions += 1;
            }
        }
        compared
    }

    pub fn record(&mut self, arrived_at: Millis, admitted_at: Millis) -> Compared {
        let compared = self.compare((arrived_at, admitted_at));
        self.concordant += compared.pairs - compared.inversions;
        self.discordant += compared.inversions;
        self.recent.push_back((arrived_at, admitted_at));
        if self.recent.len() > self.capacity
            && let Some(oldest) = self.recent.pop_front()
        {
            let gone = self.compare(oldest);
            self.concordant -= gone.pairs - gone.inversions;
            self.discordant -= gone.inversions;
        }
        compared
    }

    /// Kendall's tau of the window, as `kendall_tau` of its pairs.
    pub fn tau(&self) -> Option<f64> {
        let n = self.recent.len();
        (n >= 2).then(|| {
            let all = (n * (n - 1) / 2) as f64;
            (self.concordant as f64 - self.discordant as f64) / all
        })
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn tau_is_one_in_order_minus_one_reversed() {
        let in_order: Vec<_> = (0..50).map(|i| (i, i * 10)).collect();
        assert_eq!(kendall_tau(&in_order), Some(1.0));
        let reversed: Vec<_> = (0..50).map(|i| (i, -i)).collect();
        assert_eq!(kendall_tau(&reversed), Some(-1.0));
        assert_eq!(kendall_tau(&[(1, 1)]), None);
    }

    #[test]
    fn a_shuffle_is_uncorrelated() {
        let mut admission: Vec<Millis> = (0..400).collect();
        admission.shuffle(&mut StdRng::seed_from_u64(42));
        let pairs: Vec<_> = (0..400).map(|i| (i as Millis, admission[i])).collect();
        let tau = kendall_tau(&pairs).unwrap_or(1.0);
        // Under independence tau has a standard deviation of about 0.034 for 400 pairs.
        assert!(tau.abs() < 0.1, "tau {tau}");
    }

    #[test]
    fn the_window_keeps_tau_as_the_whole_computation_would() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut w = FairnessWindow::new(50);
        let mut all = Vec::new();
        for i in 0..300 {
            // Rounds of several admissions tie on the admission time; arrivals may tie too.
            let pair = (rng.random_range(0..200), i / 4);
            all.push(pair);
            w.record(pair.0, pair.1);
            let window = &all[all.len().saturating_sub(50)..];
            match (w.tau(), kendall_tau(window)) {
                (Some(kept), Some(whole)) => assert!((kept - whole).abs() < 1e-12, "{i}"),
                (kept, whole) => assert_eq!(kept, whole),
            }
        }
    }

    #[test]
    fn the_window_counts_inversions_as_they_happen() {
        let mut w = FairnessWindow::new(3);
        assert_eq!(w.record(10, 1), Compared::default());
        assert_eq!(
            w.record(20, 2),
            Compared {
                inversions: 0,
                pairs: 1
            }
        );
        // Arrived before both earlier admissions: two inversions.
        assert_eq!(
            w.record(5, 3),
            Compared {
                inversions: 2,
                pairs: 2
            }
        );
        // Same admission moment as the last: not compared with it.
        assert_eq!(
            w.record(30, 3),
            Compared {
                inversions: 0,
                pairs: 2
            }
        );
        // The window holds three: the first admission is forgotten.
        assert_eq!(
            w.record(1, 4),
            Compared {
                inversions: 3,
                pairs: 3
            }
        );
        assert!(w.tau().is_some_and(|t| t < 0.0));
    }
}
