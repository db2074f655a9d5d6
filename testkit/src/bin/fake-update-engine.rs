//! `fake-update-engine`: the update_engine stand-in on the system bus.
//! Options and behaviour: see `testkit::fake_update_engine`.

use anyhow::{Context as _, Result, bail};
use testkit::fake_update_engine::{FakeUpdateEngine, Scenario, Script};

fn parse_args(args: &[String]) -> Result<(Script, Option<String>)> {
    let mut script = Script::default();
    let mut address = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| -> Result<String> {
            it.next()
                .cloned()
                .with_context(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--script" => {
                let p = val("--script")?;
                let text = std::fs::read_to_string(&p).with_context(|| format!("reading {p}"))?;
                script = serde_json::from_str(&text).with_context(|| format!("parsing {p}"))?;
            }
            "--scenario" => {
                script.attempts = val("--scenario")?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<Vec<Scenario>>>()?;
            }
            "--startup" => script.startup = Some(val("--startup")?.parse()?),
            "--step-ms" => script.step_ms = val("--step-ms")?.parse().context("--step-ms")?,
            "--new-version" => script.new_version = val("--new-version")?,
            "--new-size" => script.new_size = val("--new-size")?.parse().context("--new-size")?,
            "--no-signals" => script.emit_signals = false,
            "--state-dir" => script.state_dir = val("--state-dir")?.into(),
            "--run-dir" => script.run_dir = val("--run-dir")?.into(),
            "--apply-pending-os-release" => {
                script.apply_pending_os_release = Some(val("--apply-pending-os-release")?.into())
            }
            "--os-release" => script.os_release = Some(val("--os-release")?.into()),
            "--address" => address = Some(val("--address")?),
            "-h" | "--help" => {
                println!(
                    "usage: fake-update-engine [--scenario S[,S...]] [--startup S] [--step-ms N] \
                     [--new-version V] [--new-size N] [--no-signals] [--state-dir DIR] [--run-dir DIR] \
                     [--apply-pending-os-release PATH] [--os-release PATH] [--script FILE.json] [--address ADDR]\n\
                     scenarios: no-update update error check-error hang drop-signals"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    Ok((script, address))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (script, address) = parse_args(&args)?;
    eprintln!("fake-update-engine: {script:?}");
    let engine = FakeUpdateEngine::start(address.as_deref(), script).await?;
    eprintln!("fake-update-engine: ready, serving com.coreos.update1");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!("fake-update-engine: stopping");
    engine.stop().await;
    Ok(())
}
