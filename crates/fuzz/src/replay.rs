//! Running inputs in this process, without the engine: `proxybench-fuzz TARGET --replay FILE`,
//! the corpus tests, and a crash's second look. A panic is caught and its message kept; a
//! broken invariant is returned as such. Also the types a crash is reported with, whichever
//! way it was found.

use crate::{escape, Target};
use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Once;

/// What went wrong with an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    /// The target panicked.
    Panic,
    /// The target returned, but an invariant did not hold.
    Violation,
    /// One input ran past the time budget.
    Hang,
    /// The process's memory passed the limit while one input ran.
    Memory,
}

/// An input that made a target fail, and how.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The target's name.
    pub target: &'static str,
    /// Panic, broken invariant, hang or memory.
    pub kind: CrashKind,
    /// The panic message (with its location), the invariant that broke, or the engine's words.
    pub message: String,
    /// The input itself.
    pub input: Vec<u8>,
    /// Where the input was written, if it was.
    pub file: Option<PathBuf>,
}

impl fmt::Display for Crash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {:?}: {}",
            self.target,
            self.kind,
            self.message.trim_end()
        )?;
        write!(
            f,
            "input ({} bytes): b\"{}\"",
            self.input.len(),
            escape(&self.input)
        )?;
        if let Some(p) = &self.file {
            write!(
                f,
                "\nwritten to {}; replay: proxybench-fuzz {} --replay {}",
                p.display(),
                self.target,
                p.display()
            )?;
        }
        Ok(())
    }
}

thread_local! {
    /// Set while this thread runs a target: the panic hook stores the message here instead
    /// of printing it.
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs (once) a panic hook that keeps caught target panics quiet and records their
/// message and place; panics of other threads still reach the previous hook.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let captured = CAPTURE.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                            (*s).to_string()
                        } else if let Some(s) = info.payload().downcast_ref::<String>() {
                            s.clone()
                        } else {
                            "(non-string panic payload)".to_string()
                        };
                        *slot = match info.location() {
                            Some(l) => format!("panicked at {}:{}: {msg}", l.file(), l.line()),
                            None => format!("panicked: {msg}"),
                        };
                        true
                    }
                    None => false,
                }
            });
            if !captured {
                previous(info);
            }
        }));
    });
}

/// Runs one input through a target (cut to its `max_len`, as the engine does), turning a
/// panic into an error.
pub fn run_one(target: &dyn Target, input: &[u8]) -> Result<(), (CrashKind, String)> {
    install_hook();
    let input = &input[..input.len().min(target.max_len())];
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    let r = panic::catch_unwind(AssertUnwindSafe(|| target.run(input)));
    let msg = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(violation)) => Err((CrashKind::Violation, violation.0)),
        Err(_) => Err((CrashKind::Panic, msg)),
    }
}
