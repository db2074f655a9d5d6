//! The main job (`./scripts/demo.sh`): a real Kubernetes cluster on
//! simulated nodes, a worker joining it through the agent, a pod on that
//! worker, shown step by step ([`testkit::demo`]). Needs root.
//!
//! `--containerd`: the worker's agent is told `runtime.name = "containerd"`
//! (by default `auto`: docker for the cluster's 1.20).
//!
//! Exit codes: 0 shown to the end, 1 a step failed (named), 2 this machine
//! cannot run simulated nodes, 64 an unknown argument, 130 interrupted (the
//! nodes are stopped).

use nix::sys::signal::{SigSet, Signal};
use std::process::ExitCode;
use testkit::demo::runtime::WorkerRuntime;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => None,
        ["--containerd"] => Some(WorkerRuntime::Containerd),
        _ => {
            eprintln!(
                "cluster-demo: unknown arguments {args:?} (none: the runtime the agent chooses; \
                 --containerd: containerd on the worker)"
            );
            return ExitCode::from(64);
        }
    };
    if let Err(e) = testkit::simnode::can_run() {
        eprintln!("cluster-demo: cannot run simulated nodes here: {e:#}");
        return ExitCode::from(2);
    }
    stop_nodes_on_interrupt();
    match testkit::demo::run(&mut std::io::stdout(), runtime) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\ncluster-demo: failed: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// On Ctrl-C (SIGINT), SIGTERM or SIGHUP: stops the nodes, exits 130.
fn stop_nodes_on_interrupt() {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    // Blocked in every thread (threads inherit the mask; child processes
    // start with an empty one), taken by the one below.
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        if let Ok(sig) = set.wait() {
            eprintln!("\ncluster-demo: {sig}: stopping the nodes");
            testkit::demo::stop_nodes();
            std::process::exit(130);
        }
    });
}
