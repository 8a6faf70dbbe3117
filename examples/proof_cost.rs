//! What a place costs under `[proof_of_work]`, on this machine: the server's work per place
//! (seal a seed, open it, check the answer: one hash) against a solver's (2^bits hashes on
//! average, native SHA-256 on one core, as a farm would run it), and the places per hour a
//! 100-core farm can take at each difficulty. BENCHMARKS.md, "Proof of work".
//!
//!   cargo run --release --example proof_cost [seconds of solving per difficulty, default 10]

use std::time::{Duration, Instant};

use waitroom::core::proof::{solve, solves};
use waitroom::token::{Seed, Signer, new_visitor_id};

const FARM_CORES: f64 = 100.0;

fn main() {
    let budget = std::env::args()
        .nth(1)
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(Duration::from_secs(10), Duration::from_secs);
    let signer = match Signer::new("bench-room", b"proof-cost-proof-cost-proof-cost!!") {
        Ok(signer) => signer,
        Err(e) => {
            eprintln!("proof_cost: {e}");
            return;
        }
    };

    // The server's side of one place: a seed sealed for the challenge, opened and checked
    // with one hash when the answer comes (the store's spend is a round trip, not CPU here).
    let rounds = 200_000u32;
    let mut sealed = Vec::with_capacity(rounds as usize);
    let started = Instant::now();
    for _ in 0..rounds {
        let seed = Seed {
            id: new_visitor_id(),
            bits: 16,
            expires_at: i64::MAX,
            claimed: false,
        };
        sealed.push(signer.seal_seed(&seed).unwrap_or_default());
    }
    let seal_us = started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    let started = Instant::now();
    let mut checked = 0u32;
    for (i, text) in sealed.iter().enumerate() {
        if let Some(seed) = signer.open_seed(text, 0) {
            // Almost every nonce here is wrong: the check costs the one hash either way.
            std::hint::black_box(solves(text, &i.to_string(), seed.bits));
            checked += 1;
        }
    }
    let check_us = started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    println!(
        "server per place: seal a seed {seal_us:.2} µs, open it and check the answer \
         {check_us:.2} µs ({checked} checked)"
    );

    // The solver's side: native SHA-256 on one core, seeds solved for `budget` at 16 bits.
    let started = Instant::now();
    let mut hashes = 0u64;
    let mut solved = 0u64;
    while started.elapsed() < budget {
        let seed = new_visitor_id();
        hashes += solve(&seed, 16, 0) + 1;
        solved += 1;
    }
    let rate = hashes as f64 / started.elapsed().as_secs_f64();
    println!(
        "solver (native, one core): {rate:.0} hashes/s ({solved} seeds at 16 bits, {hashes} \
         hashes)"
    );
    println!(
        "\n| difficulty_bits | hashes per place (mean) | one core, s per place | places per hour, {FARM_CORES} cores | server µs per place |"
    );
    println!("|--:|--:|--:|--:|--:|");
    for bits in [12u32, 14, 16, 18, 20, 22, 24] {
        let mean = 2f64.powi(bits as i32);
        let seconds = mean / rate;
        let per_hour = FARM_CORES * 3600.0 / seconds;
        println!(
            "| {bits} | {mean:.0} | {seconds:.3} | {per_hour:.0} | {:.2} |",
            seal_us + check_us
        );
    }
}
