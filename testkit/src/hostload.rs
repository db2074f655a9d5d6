//! Keeps the tests of one test binary that load the whole host apart from
//! those that measure against its clock.
//!
//! libtest runs the tests of a binary side by side (one thread per core).
//! A private dockerd starting up takes the CPU for seconds; the fleet
//! (`crate::fleet`) spawns dozens of agent processes and asserts when their
//! retries arrive, with little slack. Next to a dockerd start, the fleet's
//! timing fails. So the rig pieces say what they do to the host: a private
//! dockerd holds a [`shared`] guard while it runs (several may run at once),
//! the fleet an [`exclusive`] one (it runs with none of those beside it).
//! Tests that use neither are not held back.
//!
//! Hold one guard at a time: a thread that holds one and asks for another
//! waits for itself.

use std::sync::{Condvar, Mutex};

struct State {
    shared: usize,
    exclusive: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    shared: 0,
    exclusive: false,
});
static CHANGED: Condvar = Condvar::new();

/// Released when dropped.
#[must_use = "the section ends when the guard is dropped"]
pub struct Guard {
    exclusive: bool,
}

fn lock() -> std::sync::MutexGuard<'static, State> {
    // A test that panicked while holding the mutex left a consistent state.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A section that loads the host (e.g. a private dockerd): waits while an
/// exclusive section runs; any number may run at once.
pub fn shared() -> Guard {
    let mut s = lock();
    while s.exclusive {
        s = CHANGED.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.shared += 1;
    Guard { exclusive: false }
}

/// A section that needs the host without the loads of [`shared`] sections
/// (e.g. the fleet, whose timing its tests assert): waits until none runs,
/// and keeps new ones waiting until it is done.
pub fn exclusive() -> Guard {
    let mut s = lock();
    while s.exclusive || s.shared > 0 {
        s = CHANGED.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.exclusive = true;
    Guard { exclusive: true }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut s = lock();
        if self.exclusive {
            s.exclusive = false;
        } else {
            s.shared -= 1;
        }
        CHANGED.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn an_exclusive_section_waits_for_shared_ones_and_holds_new_ones_back() {
        let a = shared();
        let b = shared();
        let in_exclusive = std::sync::Arc::new(AtomicBool::new(false));
        let flag = in_exclusive.clone();
        let t = std::thread::spawn(move || {
            let _x = exclusive();
            flag.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            flag.store(false, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !in_exclusive.load(Ordering::SeqCst),
            "ran beside shared sections"
        );
        drop(a);
        drop(b);
        // Once it started, a new shared section waits for its end.
        while !in_exclusive.load(Ordering::SeqCst) && !t.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _c = shared();
        assert!(!in_exclusive.load(Ordering::SeqCst));
        t.join().unwrap();
    }
}
