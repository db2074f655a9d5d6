//! HTTP as every client of the agent speaks it (artifact mirrors: docker
//! packages, metadata, agent binaries; the cluster's API server): one
//! client builder ([`client_builder`]: the user agent, the redirect policy,
//! the connect timeout) and one body reader ([`read_body`]: bounded, every
//! byte counted for the fleet metrics). Retries are [`crate::retry`]'s;
//! what a status code means, and the words of each error, are the
//! caller's.
//!
//! Redirects: at most 5, and never from https to plain http. Integrity
//! never depended on the transport (signatures and hashes), but a
//! downgrade would expose what is fetched and from where.

use crate::metrics::{Remote, record};
use std::time::Duration;

/// The `User-Agent` of every request.
pub const USER_AGENT: &str = concat!("node-bootstrap/", env!("CARGO_PKG_VERSION"));

/// The redirect policy for every download client.
pub fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() > 5 {
            return attempt.error("too many redirects (more than 5)");
        }
        let from_https = attempt
            .previous()
            .last()
            .is_some_and(|u| u.scheme() == "https");
        if from_https && attempt.url().scheme() != "https" {
            let to = attempt.url().scheme().to_string();
            return attempt.error(format!("refusing a redirect from https to {to}"));
        }
        attempt.follow()
    })
}

/// A client builder with the agent's user agent, [`redirect_policy`],
/// `connect_timeout` and names resolved by [`crate::dns`] (never glibc's
/// NSS); the caller adds its read or request timeout (and,
/// for the API server, its TLS trust and no redirects at all).
pub fn client_builder(connect_timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .dns_resolver(crate::dns::Resolver::default())
        .user_agent(USER_AGENT)
        .redirect(redirect_policy())
        .connect_timeout(connect_timeout)
}

/// Why a body was not read to its end.
#[derive(Debug)]
pub enum BodyError {
    /// It is more than the bytes allowed.
    TooLarge,
    /// The connection broke off, or timed out, in the middle.
    BrokeOff(reqwest::Error),
    /// Where it went refused it.
    Write(std::io::Error),
}

/// Reads `resp`'s body chunk by chunk into `out`, counting each chunk as
/// fetched from `remote`, and stops at more than `max` bytes in all, of
/// which `held` were there before (a resumed download). Returns the bytes
/// held at the end, or how many when it stopped and why.
pub async fn read_body(
    resp: &mut reqwest::Response,
    remote: Remote,
    held: u64,
    max: u64,
    mut out: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<u64, (u64, BodyError)> {
    let mut got = held;
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(got),
            Err(e) => return Err((got, BodyError::BrokeOff(e))),
        };
        record::fetched(remote, chunk.len() as u64);
        if got + chunk.len() as u64 > max {
            return Err((got + chunk.len() as u64, BodyError::TooLarge));
        }
        got += chunk.len() as u64;
        out(&chunk).map_err(|e| (got, BodyError::Write(e)))?;
    }
}
