// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests of the completion ring's index, against a model: every
//! completion is read exactly once.

use std::collections::VecDeque;

use proptest::prelude::*;
use rrdma_abi::ring::RingIndex;

#[derive(Clone, Debug)]
enum Step {
    Reserve(usize),
    Unreserve(usize),
    Complete,
    Lend(usize),
    Settle(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..6).prop_map(Step::Reserve),
        (0usize..3).prop_map(Step::Unreserve),
        Just(Step::Complete),
        Just(Step::Complete),
        (1usize..5).prop_map(Step::Lend),
        (0usize..5).prop_map(Step::Settle),
    ]
}

proptest! {
    /// Against a model: every completion that found a reservation is
    /// read exactly once (delivered, or given back and read later);
    /// nothing is lost or duplicated; records never share a slot; and
    /// reservations, ready and lent records never exceed the capacity.
    #[test]
    fn completions_are_read_exactly_once(
        cap in 1usize..9,
        steps in proptest::collection::vec(step(), 0..80),
    ) {
        let mut r = RingIndex::new(cap);
        let mut store: Vec<Option<u32>> = vec![None; cap];
        let mut model: VecDeque<u32> = VecDeque::new();
        let mut loans: Vec<Vec<u32>> = Vec::new();
        let mut next = 0u32;
        let mut delivered: Vec<u32> = Vec::new();
        for s in steps {
            match s {
                Step::Reserve(n) => { r.reserve(n); }
                Step::Unreserve(n) => r.unreserve(n),
                Step::Complete => {
                    if let Some(slot) = r.push() {
                        next += 1;
                        store[slot] = Some(next);
                        model.push_back(next);
                    }
                }
                Step::Lend(max) => {
                    let (first, n) = r.lend(max);
                    let taken: Vec<u32> = (0..n)
                        .map(|i| store[r.slot(first, i)].take().expect("a record"))
                        .collect();
                    for v in &taken {
                        prop_assert_eq!(model.pop_front(), Some(*v));
                    }
                    loans.push(taken);
                }
                Step::Settle(ok) => {
                    if let Some(loan) = loans.pop() {
                        let ok = ok.min(loan.len());
                        delivered.extend_from_slice(&loan[..ok]);
                        let at = r.settle(loan.len(), ok);
                        for (i, v) in loan[ok..].iter().enumerate() {
                            let slot = r.slot(at, i);
                            prop_assert!(store[slot].is_none());
                            store[slot] = Some(*v);
                        }
                        for v in loan[ok..].iter().rev() {
                            model.push_front(*v);
                        }
                    }
                }
            }
            prop_assert!(r.len() + r.reserved() + r.lent() <= cap);
            prop_assert_eq!(r.len(), model.len());
            prop_assert_eq!(store.iter().filter(|x| x.is_some()).count(), r.len());
        }
        // Settle what is still lent as failures, then read everything.
        while let Some(loan) = loans.pop() {
            let at = r.settle(loan.len(), 0);
            for (i, v) in loan.iter().enumerate() {
                store[r.slot(at, i)] = Some(*v);
            }
            for v in loan.iter().rev() {
                model.push_front(*v);
            }
        }
        let (first, n) = r.lend(cap);
        for i in 0..n {
            delivered.push(store[r.slot(first, i)].take().unwrap());
        }
        r.settle(n, n);
        delivered.sort_unstable();
        prop_assert_eq!(delivered, (1..=next).collect::<Vec<_>>());
    }
}
