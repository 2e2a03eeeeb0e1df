// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the reconnect budget: delays stay within their
//! bounds, and attempts within the policy's.

mod branches;

use branches::{Branches, COUNTED_CASES};
use proptest::prelude::*;
use rrdma_abi::reconnect::{from_params, Budget};

/// Whatever the parameters: each delay lies between half its step and
/// its step, steps never shrink and never pass the cap, and no failure
/// is followed by more attempts than the policy allows. The attempts
/// are most often few, so that the budget runs out: the last check
/// runs only then.
#[test]
fn delays_bounded_and_attempts_capped() {
    let branches = Branches::new(
        "delays_bounded_and_attempts_capped",
        &["budget ran out", "budget lasted"],
    );
    let attempts = prop_oneof![3 => 0u32..=16, 1 => any::<u32>()];
    proptest!(ProptestConfig::with_cases(COUNTED_CASES),
              |(attempts in attempts, delay in any::<u32>(), cap in any::<u32>(),
                randoms in proptest::collection::vec(any::<u64>(), 0..64),
                establish_every in 1usize..64)| {
        let p = from_params(attempts, delay, cap);
        let mut b = Budget::new(p);
        b.established();
        let mut since = 0u32;
        let mut last_step = 0;
        let mut ran_out = false;
        for (i, r) in randoms.into_iter().enumerate() {
            if i % establish_every == 0 {
                b.established();
                since = 0;
                last_step = 0;
            }
            if !b.may_retry() {
                prop_assert_eq!(since, p.attempts);
                ran_out = true;
                continue;
            }
            let step = p.step_ms(b.tried());
            prop_assert!(step >= last_step && step <= p.max_delay_ms);
            let d = b.next_attempt(r);
            prop_assert!(d >= step / 2 && d <= step);
            since += 1;
            prop_assert!(since <= p.attempts);
            last_step = step;
        }
        branches.took(if ran_out { "budget ran out" } else { "budget lasted" });
    });
    branches.require(&[("budget ran out", 30), ("budget lasted", 10)]);
}
