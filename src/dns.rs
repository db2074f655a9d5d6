//! Host names resolved by the agent itself, the way every client of it
//! resolves them (mirrors and the API server through reqwest, S3 and the
//! instance metadata through the AWS SDK): `/etc/hosts` first, then the
//! name servers of `/etc/resolv.conf` (its `search`, `ndots`, `timeout`
//! and `attempts` honoured), by hickory's stub resolver, over UDP and TCP.
//!
//! Never through glibc's `getaddrinfo`: the binary nodes run is linked
//! statically (README "Does it fit your cluster?"), and a static glibc
//! resolves names through NSS modules it loads from the OS at run time,
//! which must be the build machine's glibc release and are not on another
//! OS (Flatcar's `nsswitch.conf` names its own, `usrfiles` and `resolve`).
//! systemd-resolved's stub at 127.0.0.53 (Flatcar's `/etc/resolv.conf`) is
//! an ordinary name server to this resolver.
//!
//! One [`Resolver`] per HTTP client: hickory's connections live on the
//! tokio runtime that first used them, and each command's clients live on
//! one runtime. A `/etc/resolv.conf` that cannot be read leaves
//! `/etc/hosts` alone (no public fallback: a node may be on a network
//! without one); the error then says which file was missing.

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{LookupIpStrategy, ResolveHosts, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A lazily built stub resolver (built on the runtime of its first lookup).
#[derive(Clone, Default)]
pub struct Resolver {
    inner: Arc<OnceLock<Built>>,
}

struct Built {
    resolver: std::result::Result<TokioResolver, String>,
    /// Why the name servers are unknown (`/etc/resolv.conf` unreadable).
    no_servers: Option<String>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").finish_non_exhaustive()
    }
}

fn build() -> Built {
    let provider = TokioRuntimeProvider::default();
    let (mut builder, no_servers) = match TokioResolver::builder(provider.clone()) {
        Ok(b) => (b, None),
        Err(e) => (
            TokioResolver::builder_with_config(
                ResolverConfig::from_parts(None, vec![], vec![]),
                provider,
            ),
            Some(format!(
                "no name servers: /etc/resolv.conf could not be read ({e}); only /etc/hosts is used"
            )),
        ),
    };
    let opts = builder.options_mut();
    opts.use_hosts_file = ResolveHosts::Always;
    // Both families, as getaddrinfo gives them; the HTTP clients try each
    // address in turn (happy eyeballs).
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    Built {
        resolver: builder.build().map_err(|e| e.to_string()),
        no_servers,
    }
}

impl Resolver {
    /// The addresses of `name` (an IP address is its own answer).
    pub async fn lookup(&self, name: &str) -> std::result::Result<Vec<IpAddr>, BoxError> {
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return Ok(vec![ip]);
        }
        let built = self.inner.get_or_init(build);
        let resolver = built
            .resolver
            .as_ref()
            .map_err(|e| format!("cannot resolve {name}: {e}"))?;
        match resolver.lookup_ip(name).await {
            Ok(found) => {
                let ips: Vec<IpAddr> = found.iter().collect();
                if ips.is_empty() {
                    return Err(format!("{name} has no address").into());
                }
                Ok(ips)
            }
            Err(e) => Err(match &built.no_servers {
                Some(why) => format!("cannot resolve {name}: {e} ({why})").into(),
                None => format!("cannot resolve {name}: {e}").into(),
            }),
        }
    }
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        Box::pin(async move {
            let ips = this.lookup(name.as_str()).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

impl aws_smithy_runtime_api::client::dns::ResolveDns for Resolver {
    fn resolve_dns<'a>(
        &'a self,
        name: &'a str,
    ) -> aws_smithy_runtime_api::client::dns::DnsFuture<'a> {
        use aws_smithy_runtime_api::client::dns::{DnsFuture, ResolveDnsError};
        DnsFuture::new(async move { self.lookup(name).await.map_err(ResolveDnsError::new) })
    }
}

/// The AWS SDK's HTTPS client (the one `aws-config` builds by default:
/// hyper 1 and rustls with aws-lc, the proxy from the environment), with
/// names resolved by a [`Resolver`].
pub fn aws_http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::{Builder, ConnectorBuilder, tls};
    let resolver = Resolver::default();
    Builder::new().build_with_connector_fn(move |settings, runtime_components| {
        let mut conn = ConnectorBuilder::default().tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ));
        conn.set_connector_settings(settings.cloned());
        if let Some(components) = runtime_components {
            conn.set_sleep_impl(components.sleep_impl());
        }
        conn.set_proxy_config(Some(ProxyConfig::from_env()));
        conn.build_with_resolver(resolver.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_its_own_answer_without_a_lookup() {
        let r = Resolver::default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(
            rt.block_on(r.lookup("192.0.2.7")).unwrap(),
            ["192.0.2.7".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            rt.block_on(r.lookup("[2001:db8::1]")).unwrap(),
            ["2001:db8::1".parse::<IpAddr>().unwrap()]
        );
        assert!(r.inner.get().is_none(), "no resolver was built");
    }
}
