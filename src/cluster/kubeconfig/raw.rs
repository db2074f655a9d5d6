//! The kubeconfig as written: every field the agent reads, all optional,
//! so that what is missing is named by [`super::parse`] with its field
//! path rather than by the YAML parser.

use serde::Deserialize;
use serde::de::IgnoredAny;

#[derive(Default, Deserialize)]
pub(super) struct RawKubeconfig {
    #[serde(default)]
    pub(super) clusters: Option<Vec<NamedCluster>>,
    #[serde(default)]
    pub(super) users: Option<Vec<NamedUser>>,
    #[serde(default)]
    pub(super) contexts: Option<Vec<NamedContext>>,
    #[serde(rename = "current-context", default)]
    pub(super) current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct NamedCluster {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) cluster: Option<RawCluster>,
}

#[derive(Deserialize)]
pub(super) struct NamedUser {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) user: Option<RawUser>,
}

#[derive(Debug, Deserialize)]
pub(super) struct NamedContext {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) context: Option<RawContext>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawContext {
    #[serde(default)]
    pub(super) cluster: Option<String>,
    #[serde(default)]
    pub(super) user: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawCluster {
    #[serde(default)]
    pub(super) server: Option<String>,
    #[serde(rename = "certificate-authority", default)]
    pub(super) certificate_authority: Option<String>,
    #[serde(rename = "certificate-authority-data", default)]
    pub(super) certificate_authority_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    pub(super) insecure_skip_tls_verify: Option<bool>,
    #[serde(rename = "tls-server-name", default)]
    pub(super) tls_server_name: Option<String>,
    #[serde(rename = "proxy-url", default)]
    pub(super) proxy_url: Option<String>,
}

#[derive(Default, Deserialize)]
pub(super) struct RawUser {
    #[serde(rename = "client-certificate", default)]
    pub(super) client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data", default)]
    pub(super) client_certificate_data: Option<String>,
    #[serde(rename = "client-key", default)]
    pub(super) client_key: Option<String>,
    #[serde(rename = "client-key-data", default)]
    pub(super) client_key_data: Option<String>,
    #[serde(default)]
    pub(super) token: Option<String>,
    #[serde(rename = "tokenFile", default)]
    pub(super) token_file: Option<String>,
    #[serde(default)]
    pub(super) username: Option<String>,
    #[serde(default)]
    pub(super) password: Option<String>,
    #[serde(default)]
    pub(super) exec: Option<IgnoredAny>,
    #[serde(rename = "auth-provider", default)]
    pub(super) auth_provider: Option<IgnoredAny>,
}
