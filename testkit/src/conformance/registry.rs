//! The image registries the conformance suite pulls from: Debian's
//! `docker-registry` (distribution 2.8) on loopback, twice, serving the
//! storage `scripts/build-e2e-images.sh` laid out (read-only): a public
//! registry, and a private one that asks for a user and password
//! (htpasswd, bcrypt) for the suite's private-registry specs. The nodes
//! share the host's network namespace, so their runtimes reach both at
//! `127.0.0.1:<port>` (plain HTTP: docker and containerd treat a loopback
//! registry as insecure by default). [`Registries::repo_list`] is the
//! `KUBE_TEST_REPO_LIST` that points the suite's image names at them,
//! [`Registries::docker_config`] the credentials `e2e.test
//! --docker-config-file` puts in the private-registry spec's pull secret.

use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's registry.
pub const DOCKER_REGISTRY: &str = "/usr/bin/docker-registry";

/// Both registries, running; stopped when dropped.
pub struct Registries {
    pub public_port: u16,
    pub private_port: u16,
    pub user: String,
    pub password: String,
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl Registries {
    /// Starts both registries on free loopback ports over the storage in
    /// `images` (`public/`, `private/`), and waits until they answer.
    pub fn start(images: &Path) -> Result<Registries> {
        let dir = tempfile::Builder::new()
            .prefix("nb-registries-")
            .tempdir_in("/var/tmp")?;
        let user = "nb-conformance".to_string();
        let password = hex::encode(rand::random::<[u8; 12]>());
        let out = Command::new("htpasswd")
            .args(["-Bbn", &user, &password])
            .output()
            .context("running htpasswd (Debian's apache2-utils)")?;
        if !out.status.success() {
            bail!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let htpasswd = dir.path().join("htpasswd");
        std::fs::write(&htpasswd, &out.stdout)?;
        let mut r = Registries {
            public_port: crate::kube::free_port(),
            private_port: crate::kube::free_port(),
            user,
            password,
            dir,
            children: Vec::new(),
        };
        let public = r.config("public", &images.join("public"), r.public_port, None)?;
        let private = r.config(
            "private",
            &images.join("private"),
            r.private_port,
            Some(&htpasswd),
        )?;
        for (config, name) in [(public, "public"), (private, "private")] {
            let log = std::fs::File::create(r.dir.path().join(format!("{name}.log")))?;
            let child = Command::new(DOCKER_REGISTRY)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| {
                    format!("starting {DOCKER_REGISTRY} (Debian's docker-registry)")
                })?;
            r.children.push(child);
        }
        r.wait_answering(Duration::from_secs(30))?;
        Ok(r)
    }

    fn config(
        &self,
        name: &str,
        storage: &Path,
        port: u16,
        htpasswd: Option<&Path>,
    ) -> Result<PathBuf> {
        if !storage.join("docker/registry/v2/repositories").is_dir() {
            bail!(
                "{} holds no registry storage (scripts/build-e2e-images.sh lays it out)",
                storage.display()
            );
        }
        let auth = htpasswd
            .map(|p| {
                format!(
                    "auth:\n  htpasswd:\n    realm: nb-conformance\n    path: {}\n",
                    p.display()
                )
            })
            .unwrap_or_default();
        let text = format!(
            "version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  \
             maintenance:\n    uploadpurging: {{enabled: false}}\n    readonly: {{enabled: true}}\n\
             http: {{addr: 127.0.0.1:{port}}}\n{auth}",
            storage.display()
        );
        let path = self.dir.path().join(format!("{name}.yml"));
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// `/v2/` answers 200 (public) and 401 (private, no credentials).
    fn wait_answering(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let code = |port: u16| {
            Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
                .arg(format!("http://127.0.0.1:{port}/v2/"))
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        loop {
            if code(self.public_port) == "200" && code(self.private_port) == "401" {
                return Ok(());
            }
            for c in &mut self.children {
                if let Some(st) = c.try_wait()? {
                    bail!("a registry exited ({st}): {}", self.logs());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "the registries did not answer within {timeout:?}: {}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn logs(&self) -> String {
        ["public.log", "private.log"]
            .iter()
            .map(|l| {
                format!(
                    "{l}: {}",
                    std::fs::read_to_string(self.dir.path().join(l)).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The `KUBE_TEST_REPO_LIST` file: the suite's registries
    /// (test/utils/image/manifest.go's `RegistryList`) mapped to the
    /// paths `scripts/build-e2e-images.sh` pushed the images to. The
    /// invalid registry stays invalid (its spec expects a failed pull).
    pub fn repo_list(&self) -> Result<PathBuf> {
        let (p, q) = (self.public_port, self.private_port);
        let text = format!(
            "promoterE2eRegistry: 127.0.0.1:{p}/e2e-test-images\n\
             e2eRegistry: 127.0.0.1:{p}/kubernetes-e2e-test-images\n\
             dockerLibraryRegistry: 127.0.0.1:{p}/library\n\
             gcRegistry: 127.0.0.1:{p}/k8s\n\
             gcAuthenticatedRegistry: 127.0.0.1:{q}/authenticated-image-pulling\n\
             privateRegistry: 127.0.0.1:{q}/k8s-authenticated-test\n"
        );
        let path = self.dir.path().join("repo-list.yaml");
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// The docker config JSON with the private registry's credentials
    /// (`e2e.test --docker-config-file`).
    pub fn docker_config(&self) -> Result<PathBuf> {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.user, self.password));
        let text = serde_json::json!({
            "auths": {format!("127.0.0.1:{}", self.private_port): {"auth": auth}}
        })
        .to_string();
        let path = self.dir.path().join("docker-config.json");
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

impl Drop for Registries {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
