//! Without the engine: every input of the checked-in corpus keeps its target's invariants (a
//! regression found by fuzzing is kept there, so it stays fixed), and the in-process replay
//! that `proxybench-fuzz TARGET --replay FILE` uses tells a panic from a broken invariant.

use proxybench_fuzz::planted::{HIDDEN, PLANTED};
use proxybench_fuzz::{corpus_dir, load_corpus, run_one, CrashKind, TARGETS};

#[test]
fn every_corpus_input_keeps_its_targets_invariants() {
    for t in TARGETS {
        let seeds = load_corpus(&corpus_dir(t.name())).expect("corpus directory");
        assert!(seeds.len() >= 6, "{}: only {} seeds", t.name(), seeds.len());
        for (i, s) in seeds.iter().enumerate() {
            if let Err((kind, msg)) = run_one(*t, s) {
                panic!(
                    "{}: seed {i} ({kind:?}): {msg}\ninput: b\"{}\"",
                    t.name(),
                    proxybench_fuzz::escape(s)
                );
            }
        }
    }
}

#[test]
fn replay_reports_a_panic_with_its_place() {
    let (kind, msg) = run_one(&PLANTED, b"BOOM!").unwrap_err();
    assert_eq!(kind, CrashKind::Panic);
    assert!(msg.contains("index out of bounds"), "{msg}");
    assert!(msg.contains("planted.rs"), "{msg}");
}

#[test]
fn replay_reports_a_broken_invariant() {
    let mut input = HIDDEN.to_vec();
    input.extend_from_slice(b" and more");
    let (kind, msg) = run_one(&PLANTED, &input).unwrap_err();
    assert_eq!(kind, CrashKind::Violation);
    assert!(msg.starts_with("the input starts with"), "{msg}");
    // One byte short of the hidden prefix is fine.
    assert_eq!(run_one(&PLANTED, &HIDDEN[..HIDDEN.len() - 1]), Ok(()));
}
