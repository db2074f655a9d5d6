//! The main job (`./scripts/demo.sh`): a real Kubernetes cluster on
//! simulated nodes, a worker joining it through the agent, a pod on that
//! worker, shown step by step ([`testkit::demo`]). Needs root.
//!
//! No argument: today's Flatcar (containerd, the kubelet as a system
//! extension). `--tectonic`: the seed's Tectonic flow on Container Linux
//! (docker through torcx, kubelet-wrapper); `--tectonic --containerd`: its
//! worker's agent told `runtime.name = "containerd"`.
//!
//! Exit codes: 0 shown to the end, 1 a step failed (named), 2 this machine
//! cannot run simulated nodes, 64 an unknown argument, 130 interrupted (the
//! nodes are stopped).

use nix::sys::signal::{SigSet, Signal};
use std::process::ExitCode;
use testkit::demo::Flow;
use testkit::demo::runtime::WorkerRuntime;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flow = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => Flow::Today,
        ["--tectonic"] => Flow::Tectonic(None),
        ["--tectonic", "--containerd"] => Flow::Tectonic(Some(WorkerRuntime::Containerd)),
        _ => {
            eprintln!(
                "cluster-demo: unknown arguments {args:?} (none: today's Flatcar; --tectonic: the \
                 seed's Tectonic flow; --tectonic --containerd: its worker on containerd)"
            );
            return ExitCode::from(64);
        }
    };
    if let Err(e) = testkit::simnode::can_run() {
        eprintln!("cluster-demo: cannot run simulated nodes here: {e:#}");
        return ExitCode::from(2);
    }
    stop_nodes_on_interrupt();
    match testkit::demo::run(&mut std::io::stdout(), flow) {
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
