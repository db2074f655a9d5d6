//! Guest kernel lockups: an emulator fault the rig recovers from.
//!
//! Under TCG (no KVM) a guest vCPU can stop answering the other one's
//! inter-processor interrupts (a lost IPI under multi-threaded TCG): the
//! waiting CPU spins in the kernel and the guest's watchdog prints
//! `watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [systemd:1]`
//! every ~30 s, forever. Seen once in CI (boot 3 of a power-cut test, PID 1
//! stuck from 15 s into the boot; nothing of the product had run yet), never
//! in the many local runs. No program in the guest can cause or end it, so
//! the rig does what a hardware watchdog does on a real machine: it cuts
//! the power and boots again, says so, and counts it
//! ([`super::VmNode::lockup_restarts`]). Only while a test waits for the
//! guest agent ([`super::VmNode::wait_ready`]), which is when it was seen:
//! a guest that already answers is not cut for a lockup line (a stall the
//! kernel came out of, as can happen on a starved host), and a lockup
//! later in a boot fails the test's wait with the console in its
//! diagnostics, as before.

/// What the guest kernel prints when a CPU has been stuck in the kernel
/// for over twice `kernel.watchdog_thresh` (20 s by default).
pub const SOFT_LOCKUP: &str = "watchdog: BUG: soft lockup";

/// How often one machine is booted again after a lockup before the rig
/// gives up (a guest that locks up every boot is not an emulator fluke).
pub const MAX_RESTARTS: u32 = 2;

/// The first soft-lockup line of a boot's console output, if any.
pub fn soft_lockup_line(console: &str) -> Option<&str> {
    console.lines().find(|l| l.contains(SOFT_LOCKUP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_watchdog_line_of_a_stuck_cpu_and_nothing_in_a_clean_boot() {
        let stuck = "\n===== vm boot 3: root=LABEL=root\n\
            [   34.775039] rcu: INFO: rcu_preempt self-detected stall on CPU\n\
            [   60.524878] watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [systemd:1]\n\
            [   88.524799] watchdog: BUG: soft lockup - CPU#0 stuck for 71s! [systemd:1]\n";
        assert_eq!(
            soft_lockup_line(stuck),
            Some("[   60.524878] watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [systemd:1]")
        );
        let clean = "\n===== vm boot 2: root=LABEL=root\n\
            [    1.2] rcu: INFO: rcu_preempt self-detected stall on CPU\n";
        assert_eq!(soft_lockup_line(clean), None);
    }
}
