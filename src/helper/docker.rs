//! Docker mode: the step's container run through Docker's API (bollard),
//! the way `bootkube.sh` ran it:
//! `docker run --volume $PWD:/assets --volume /etc/kubernetes:/etc/kubernetes
//! --network=host --entrypoint=/bootkube <image> start --asset-dir=/assets`.
//!
//! The container is named `node-bootstrap-<step>` and labelled
//! `io.node-bootstrap.step=<step>`; a leftover of a crashed attempt is
//! removed before the new one is created. Its logs are streamed (each line
//! logged with `step` and `stream`), its exit code reported, and it is
//! removed afterwards whatever happened (success, failure, timeout, stop).
//! A missing image is pulled once, like `docker run` does.

use super::config::DockerSettings;
use super::{LogTail, StepRun, clean_line};
use crate::docker::connect;
use crate::error::{Error, Result};
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, KillContainerOptions, LogsOptions,
    RemoveContainerOptions, WaitContainerOptions,
};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

/// Label that marks our containers.
pub const LABEL: &str = "io.node-bootstrap.step";

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    pub name: String,
    pub step: String,
    pub image: String,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    pub binds: Vec<String>,
    pub env: Vec<String>,
    pub host_network: bool,
}

impl ContainerSpec {
    pub fn new(step: &str, d: &DockerSettings, assets_dir: &Path) -> Self {
        ContainerSpec {
            name: format!("node-bootstrap-{step}"),
            step: step.to_string(),
            image: d.image.clone(),
            entrypoint: d.entrypoint.clone(),
            cmd: d.args.clone(),
            binds: d.binds(assets_dir),
            env: d.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            host_network: d.host_network,
        }
    }

    /// The create request, as `docker run` would send it.
    pub fn body(&self) -> ContainerCreateBody {
        ContainerCreateBody {
            image: Some(self.image.clone()),
            entrypoint: self.entrypoint.clone(),
            cmd: self.cmd.clone(),
            env: (!self.env.is_empty()).then(|| self.env.clone()),
            labels: Some(HashMap::from([(LABEL.to_string(), self.step.clone())])),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            host_config: Some(HostConfig {
                binds: Some(self.binds.clone()),
                network_mode: self.host_network.then(|| "host".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

fn docker_err(what: &str, spec: &ContainerSpec, e: bollard::errors::Error) -> Error {
    Error::retryable(format!("{what} {} ({}): {e}", spec.name, spec.image))
}

fn is_status(e: &bollard::errors::Error, code: u16) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if *status_code == code)
}

/// Runs the container to completion, a timeout or `stop`, and removes it.
/// Failures to talk to Docker are errors; the container's own exit code is
/// in the [`StepRun`].
pub async fn run_container(
    step: &'static str,
    socket: &Path,
    spec: &ContainerSpec,
    timeout: Duration,
    tail_lines: usize,
    stop: impl Future<Output = String>,
) -> std::result::Result<StepRun, (Error, Vec<String>)> {
    let docker = connect(socket, Duration::from_secs(10))
        .await
        .map_err(|e| (e, vec![]))?;
    remove(&docker, step, &spec.name, true).await;
    let mut tail = LogTail::new(tail_lines);
    let mut partial = Partial::default();
    let outcome = run_inner(&docker, step, spec, timeout, &mut tail, &mut partial, stop).await;
    remove(&docker, step, &spec.name, false).await;
    let lines = tail.lines();
    match outcome {
        Ok((exit_code, stopped)) => Ok(StepRun {
            exit_code,
            stopped,
            tail: lines,
            last_stderr: partial.last_stderr,
        }),
        Err(e) => Err((e, lines)),
    }
}

async fn run_inner(
    docker: &Docker,
    step: &'static str,
    spec: &ContainerSpec,
    timeout: Duration,
    tail: &mut LogTail,
    partial: &mut Partial,
    stop: impl Future<Output = String>,
) -> Result<(Option<i64>, Option<String>)> {
    create_and_start(docker, step, spec).await?;
    let logs = docker.logs(
        &spec.name,
        Some(LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            ..Default::default()
        }),
    );
    let mut wait = docker.wait_container(
        &spec.name,
        Some(WaitContainerOptions {
            condition: "not-running".to_string(),
        }),
    );
    tokio::pin!(logs);
    tokio::pin!(stop);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut logs_open = true;
    let mut exit_code = None;
    let mut stopped = None;
    loop {
        tokio::select! {
            item = logs.next(), if logs_open => match item {
                Some(Ok(out)) => partial.feed(step, out, tail),
                Some(Err(e)) => {
                    tracing::warn!(step, error = %e, "container log stream broke");
                    logs_open = false;
                }
                None => logs_open = false,
            },
            res = wait.next(), if exit_code.is_none() => {
                exit_code = Some(match res {
                    Some(Ok(r)) => r.status_code,
                    Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
                    Some(Err(e)) => return Err(docker_err("failed to wait for container", spec, e)),
                    None => return Err(Error::retryable(format!(
                        "Docker ended the wait for container {} without an exit code", spec.name))),
                });
                break;
            }
            _ = &mut deadline => {
                stopped = Some(format!("timed out after {}s", timeout.as_secs()));
                break;
            }
            why = &mut stop => {
                stopped = Some(why);
                break;
            }
        }
    }
    if stopped.is_some() {
        tracing::warn!(step, container = %spec.name, reason = stopped.as_deref().unwrap_or(""), "killing the container");
        let _ = docker
            .kill_container(&spec.name, None::<KillContainerOptions>)
            .await;
    }
    // The rest of the output: the stream ends once the container stopped.
    let drain = async {
        while logs_open {
            match logs.next().await {
                Some(Ok(out)) => partial.feed(step, out, tail),
                _ => logs_open = false,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
    if exit_code.is_some() {
        catch_up_logs(docker, step, spec, tail, partial).await;
    }
    partial.flush(step, tail);
    if let Some(code) = exit_code {
        tracing::info!(step, container = %spec.name, exit_code = code, "container exited");
    }
    Ok((exit_code.filter(|_| stopped.is_none()), stopped))
}

/// Creates the container (pulling its image when missing) and starts it.
async fn create_and_start(docker: &Docker, step: &'static str, spec: &ContainerSpec) -> Result<()> {
    let opts = || CreateContainerOptions {
        name: Some(spec.name.clone()),
        ..Default::default()
    };
    let created = match docker.create_container(Some(opts()), spec.body()).await {
        Err(e) if is_status(&e, 404) => {
            tracing::info!(step, image = %spec.image, "image not present; pulling it");
            pull(docker, step, spec).await?;
            docker.create_container(Some(opts()), spec.body()).await
        }
        other => other,
    }
    .map_err(|e| docker_err("failed to create container", spec, e))?;
    for w in &created.warnings {
        tracing::warn!(step, warning = %w, "docker warning");
    }
    docker
        .start_container(&spec.name, None)
        .await
        .map_err(|e| docker_err("failed to start container", spec, e))?;
    tracing::info!(step, container = %spec.name, image = %spec.image, id = %created.id, "container started");
    Ok(())
}

/// Docker's json-file logger can write a container's last message (a final
/// line without a newline) after the follow stream saw the container stop.
/// Once it has stopped its log is complete: read it again and feed what
/// the stream missed.
async fn catch_up_logs(
    docker: &Docker,
    step: &'static str,
    spec: &ContainerSpec,
    tail: &mut LogTail,
    partial: &mut Partial,
) {
    let all = docker.logs(
        &spec.name,
        Some(LogsOptions {
            follow: false,
            stdout: true,
            stderr: true,
            ..Default::default()
        }),
    );
    let rest = async {
        let mut frames = Vec::new();
        tokio::pin!(all);
        while let Some(Ok(out)) = all.next().await {
            frames.push(out);
        }
        frames
    };
    if let Ok(frames) = tokio::time::timeout(Duration::from_secs(5), rest).await {
        partial.catch_up(step, frames, tail);
    }
}

/// Splits Docker's log frames into lines per stream.
#[derive(Default)]
struct Partial {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Bytes fed so far per stream (stdout, stderr), to catch up without
    /// repeating anything.
    seen: (usize, usize),
    last_stderr: Option<String>,
}

impl Partial {
    fn feed(&mut self, step: &'static str, out: LogOutput, tail: &mut LogTail) {
        let (stream, buf, msg) = match out {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                self.seen.0 += message.len();
                ("stdout", &mut self.stdout, message)
            }
            LogOutput::StdErr { message } => {
                self.seen.1 += message.len();
                ("stderr", &mut self.stderr, message)
            }
            LogOutput::StdIn { .. } => return,
        };
        buf.extend_from_slice(&msg);
        let mut lines = Vec::new();
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            lines.push(buf.drain(..=pos).collect::<Vec<u8>>());
        }
        for line in lines {
            self.emit(step, stream, &line, tail);
        }
    }

    /// Feeds the part of a complete log (all frames from the start) that
    /// was not fed yet.
    fn catch_up(&mut self, step: &'static str, frames: Vec<LogOutput>, tail: &mut LogTail) {
        let mut total = (0usize, 0usize);
        for out in frames {
            let (seen, total, message, rebuild): (
                usize,
                &mut usize,
                _,
                fn(bytes::Bytes) -> LogOutput,
            ) = match out {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    (self.seen.0, &mut total.0, message, |m| LogOutput::StdOut {
                        message: m,
                    })
                }
                LogOutput::StdErr { message } => (self.seen.1, &mut total.1, message, |m| {
                    LogOutput::StdErr { message: m }
                }),
                LogOutput::StdIn { .. } => continue,
            };
            let start = *total;
            *total += message.len();
            if *total > seen {
                let skip = seen.saturating_sub(start);
                self.feed(step, rebuild(message.slice(skip..)), tail);
            }
        }
    }

    fn flush(&mut self, step: &'static str, tail: &mut LogTail) {
        for stream in ["stdout", "stderr"] {
            let buf = match stream {
                "stdout" => std::mem::take(&mut self.stdout),
                _ => std::mem::take(&mut self.stderr),
            };
            if !buf.is_empty() {
                self.emit(step, stream, &buf, tail);
            }
        }
    }

    fn emit(&mut self, step: &'static str, stream: &'static str, raw: &[u8], tail: &mut LogTail) {
        let line = clean_line(raw);
        tracing::info!(step, stream, "{line}");
        if stream == "stderr" && !line.trim().is_empty() {
            self.last_stderr = Some(line.clone());
        }
        tail.push(line);
    }
}

async fn pull(docker: &Docker, step: &'static str, spec: &ContainerSpec) -> Result<()> {
    let (name, tag) = split_reference(&spec.image);
    let mut progress = docker.create_image(
        Some(CreateImageOptions {
            from_image: Some(name.to_string()),
            tag: Some(tag.to_string()),
            ..Default::default()
        }),
        None,
        None,
    );
    while let Some(item) = progress.next().await {
        match item {
            Ok(info) => {
                if let Some(status) = info.status {
                    tracing::debug!(step, image = %spec.image, "{status}");
                }
            }
            Err(e) => {
                return Err(Error::retryable(format!(
                    "failed to pull image {}: {e}",
                    spec.image
                )));
            }
        }
    }
    Ok(())
}

/// `repo[:tag][@digest]` -> (repo, tag or digest); the tag defaults to `latest`.
pub fn split_reference(image: &str) -> (&str, &str) {
    if let Some((repo, digest)) = image.split_once('@') {
        return (repo, digest);
    }
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rfind(':') {
        Some(i) => (&image[..last_slash + i], &image[last_slash + i + 1..]),
        None => (image, "latest"),
    }
}

async fn remove(docker: &Docker, step: &'static str, name: &str, leftover: bool) {
    let res = docker
        .remove_container(
            name,
            Some(RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            }),
        )
        .await;
    match res {
        Ok(()) if leftover => {
            tracing::warn!(
                step,
                container = name,
                "removed a container left by an earlier attempt"
            )
        }
        Ok(()) => tracing::info!(step, container = name, "container removed"),
        Err(e) if is_status(&e, 404) => {}
        Err(e) => tracing::warn!(step, container = name, error = %e, "could not remove container"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn references_split_like_docker() {
        assert_eq!(
            split_reference("quay.io/coreos/bootkube:v0.10.0"),
            ("quay.io/coreos/bootkube", "v0.10.0")
        );
        assert_eq!(
            split_reference("localhost:5000/bootkube"),
            ("localhost:5000/bootkube", "latest")
        );
        assert_eq!(split_reference("busybox"), ("busybox", "latest"));
        assert_eq!(
            split_reference("quay.io/x@sha256:abc"),
            ("quay.io/x", "sha256:abc")
        );
    }

    #[test]
    fn body_is_what_bootkube_sh_ran() {
        let d = DockerSettings {
            image: "quay.io/coreos/bootkube:v0.10.0".into(),
            entrypoint: Some(vec!["/bootkube".into()]),
            args: Some(vec!["start".into(), "--asset-dir=/assets".into()]),
            mounts: None,
            env: BTreeMap::from([("A".into(), "1".into())]),
            host_network: true,
        };
        let spec = ContainerSpec::new("bootkube", &d, Path::new("/opt/tectonic"));
        let body = spec.body();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["Image"], "quay.io/coreos/bootkube:v0.10.0");
        assert_eq!(json["Entrypoint"], serde_json::json!(["/bootkube"]));
        assert_eq!(
            json["Cmd"],
            serde_json::json!(["start", "--asset-dir=/assets"])
        );
        assert_eq!(json["Env"], serde_json::json!(["A=1"]));
        assert_eq!(
            json["HostConfig"]["Binds"],
            serde_json::json!(["/opt/tectonic:/assets", "/etc/kubernetes:/etc/kubernetes"])
        );
        assert_eq!(json["HostConfig"]["NetworkMode"], "host");
        assert_eq!(json["Labels"][LABEL], "bootkube");
        assert_eq!(spec.name, "node-bootstrap-bootkube");
    }

    #[test]
    fn log_frames_become_lines_per_stream() {
        let mut p = Partial::default();
        let mut tail = LogTail::new(10);
        p.feed(
            "t",
            LogOutput::StdOut {
                message: "a\nb".into(),
            },
            &mut tail,
        );
        p.feed(
            "t",
            LogOutput::StdErr {
                message: "err\n".into(),
            },
            &mut tail,
        );
        p.feed(
            "t",
            LogOutput::StdOut {
                message: "c\n".into(),
            },
            &mut tail,
        );
        p.feed(
            "t",
            LogOutput::StdOut {
                message: "d".into(),
            },
            &mut tail,
        );
        p.flush("t", &mut tail);
        assert_eq!(tail.lines(), vec!["a", "err", "bc", "d"]);
        assert_eq!(p.last_stderr.as_deref(), Some("err"));
    }

    #[test]
    fn catching_up_from_the_complete_log_adds_only_what_the_stream_missed() {
        let out = |m: &str| LogOutput::StdOut {
            message: m.to_string().into(),
        };
        let err = |m: &str| LogOutput::StdErr {
            message: m.to_string().into(),
        };
        let mut p = Partial::default();
        let mut tail = LogTail::new(10);
        // The follow stream saw these, then lost the rest.
        p.feed("t", out("one\ntw"), &mut tail);
        p.feed("t", err("e1\n"), &mut tail);
        // The complete log, framed differently.
        let all = vec![
            out("one\n"),
            err("e1\n"),
            out("two\nthree\n"),
            err("e2"),
            out("no trailing newline"),
        ];
        p.catch_up("t", all, &mut tail);
        p.flush("t", &mut tail);
        assert_eq!(
            tail.lines(),
            vec!["one", "e1", "two", "three", "no trailing newline", "e2"]
        );
        // Nothing more when the stream had seen everything.
        let mut p = Partial::default();
        let mut tail = LogTail::new(10);
        p.feed("t", out("a\nb"), &mut tail);
        p.catch_up("t", vec![out("a\n"), out("b")], &mut tail);
        p.flush("t", &mut tail);
        assert_eq!(tail.lines(), vec!["a", "b"]);
    }
}
