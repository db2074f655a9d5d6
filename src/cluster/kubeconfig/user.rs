//! The context's user: a client certificate and key, a bearer token or
//! basic auth, inline or from files, each checked before any request
//! (certificates parse, one private key, a token fits an HTTP header). An
//! error names the field and never quotes what could be a secret.

use super::pem::{check_certs, check_key, decode_b64, pem_blocks};
use super::raw::{RawKubeconfig, RawUser};
use super::{
    ClientCert, Credentials, SelectedContext, could_be_data, label, quoted, read_limited, resolve,
};
use crate::error::{Error, Result};
use std::path::Path;

/// The context's user's credentials; an absent or empty user means none.
pub(super) fn user_credentials(
    raw: &RawKubeconfig,
    ctx: &SelectedContext,
    base: &Path,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<Credentials> {
    let users = raw.users.as_deref().unwrap_or_default();
    if ctx.user.is_empty() && !users.iter().any(|u| u.name.is_none()) {
        return Ok(Credentials::default());
    }
    let u = users
        .iter()
        .find(|u| u.name.as_deref().unwrap_or("") == ctx.user)
        .ok_or_else(|| {
            bad(
                &format!("{}.user", ctx.field),
                &format!("names user {}, which is not in `users`", quoted(&ctx.user)),
            )
        })?;
    match &u.user {
        None => Ok(Credentials::default()),
        Some(ru) => credentials(ru, &format!("users[{}].user", label(&ctx.user)), base, bad),
    }
}

fn credentials(
    u: &RawUser,
    uf: &str,
    base: &Path,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<Credentials> {
    if u.exec.is_some() {
        return Err(bad(
            &format!("{uf}.exec"),
            "exec credential plugins are not supported; use a client certificate or a token",
        ));
    }
    if u.auth_provider.is_some() {
        return Err(bad(
            &format!("{uf}.auth-provider"),
            "auth providers are not supported; use a client certificate or a token",
        ));
    }
    let client_cert = client_cert(u, uf, base, bad)?;
    let token = token(u, uf, base, bad)?;
    let basic = match (u.username.as_deref(), u.password.as_deref()) {
        (None | Some(""), None | Some("")) => None,
        (Some(user), pw) => Some((user.to_string(), pw.unwrap_or("").to_string())),
        (None, Some(_)) => return Err(bad(&format!("{uf}.password"), "set without username")),
    };
    if token.is_some() && basic.is_some() {
        return Err(bad(
            uf,
            "username/password and a bearer token may not both be set",
        ));
    }
    Ok(Credentials {
        client_cert,
        token,
        basic,
    })
}

/// A client certificate and its key, both or neither (inline or from files).
fn client_cert(
    u: &RawUser,
    uf: &str,
    base: &Path,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<Option<ClientCert>> {
    let pick = |data: &Option<String>, file: &Option<String>, name: &str| match (
        data.as_deref(),
        file.as_deref(),
    ) {
        (Some(d), _) if !d.trim().is_empty() => decode_b64(d)
            .map(Some)
            .map_err(|m| bad(&format!("{uf}.{name}-data"), &m)),
        (_, Some(raw)) if !raw.trim().is_empty() => {
            let p = resolve(base, raw);
            read_limited(&p).map(Some).map_err(|e| {
                bad(
                    &format!("{uf}.{name}"),
                    &unreadable_file(raw, &p, &e, &format!("{name}-data"), false),
                )
            })
        }
        _ => Ok(None),
    };
    let cert = pick(
        &u.client_certificate_data,
        &u.client_certificate,
        "client-certificate",
    )?;
    let key = pick(&u.client_key_data, &u.client_key, "client-key")?;
    // The kubelet's own kubeconfig (TLS bootstrapping) names one file for
    // both, its certificate and key in one PEM (`kubelet-client-current.pem`),
    // as client-go allows: each field takes its blocks of that file.
    let one_file = u.client_certificate_data.is_none()
        && u.client_key_data.is_none()
        && u.client_certificate
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            == u.client_key.as_deref().map(str::trim);
    let (cert, key) = match (cert, key) {
        (Some(c), Some(_)) if one_file => (
            Some(pem_blocks(&c, |l| l == "CERTIFICATE")),
            Some(pem_blocks(&c, |l| l.ends_with("PRIVATE KEY"))),
        ),
        other => other,
    };
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(bad(
            uf,
            "has a client certificate but no client-key / client-key-data",
        )),
        (None, Some(_)) => Err(bad(
            uf,
            "has a client key but no client-certificate / client-certificate-data",
        )),
        (Some(cert_pem), Some(key_pem)) => {
            let field = |inline: bool, name: &str| {
                format!("{uf}.{name}{}", if inline { "-data" } else { "" })
            };
            check_certs(&cert_pem).map_err(|m| {
                bad(
                    &field(u.client_certificate_data.is_some(), "client-certificate"),
                    &m,
                )
            })?;
            check_key(&key_pem)
                .map_err(|m| bad(&field(u.client_key_data.is_some(), "client-key"), &m))?;
            Ok(Some(ClientCert { cert_pem, key_pem }))
        }
    }
}

/// A bearer token, inline or from `tokenFile`.
fn token(
    u: &RawUser,
    uf: &str,
    base: &Path,
    bad: &dyn Fn(&str, &str) -> Error,
) -> Result<Option<String>> {
    match (u.token.as_deref(), u.token_file.as_deref()) {
        (Some(t), _) if !t.is_empty() => Ok(Some(
            check_token(t).map_err(|m| bad(&format!("{uf}.token"), &m))?,
        )),
        (_, Some(raw)) if !raw.trim().is_empty() => {
            let p = resolve(base, raw);
            let field = format!("{uf}.tokenFile");
            let bytes = read_limited(&p)
                .map_err(|e| bad(&field, &unreadable_file(raw, &p, &e, "token", true)))?;
            let t = String::from_utf8(bytes).map_err(|_| bad(&field, "not UTF-8 text"))?;
            Ok(Some(check_token(t.trim()).map_err(|m| bad(&field, &m))?))
        }
        _ => Ok(None),
    }
}

/// What to say of a field that names a file (`certificate-authority`,
/// `client-key`, `tokenFile`, …) whose file cannot be read. Operators paste
/// the data into the file field by mistake, and the error must not quote
/// it (a key, a token): a value that [`could_be_data`] is described, never
/// shown; with `hide_bare_names`, so is a value without a `/` (a token is
/// such a value). Otherwise the path is shown, as it helps.
pub(super) fn unreadable_file(
    raw: &str,
    resolved: &Path,
    err: &std::io::Error,
    data_field: &str,
    hide_bare_names: bool,
) -> String {
    let raw = raw.trim();
    if could_be_data(raw) {
        format!(
            "cannot read the file it names: its {}-character value looks like data, not a file path \
             (not shown: it may be secret data, which goes in {data_field})",
            raw.chars().count()
        )
    } else if hide_bare_names && !raw.contains('/') {
        format!(
            "cannot read the file it names, relative to the kubeconfig's directory: {err} \
             (the name is not shown: it may be the secret itself, which goes in {data_field})"
        )
    } else {
        format!("cannot read {}: {err}", resolved.display())
    }
}

/// A bootstrap token's shape (Kubernetes' `^[a-z0-9]{6}\.[a-z0-9]{16}$`):
/// its id (the public half, `system:bootstrap:<id>`), or what is wrong
/// with it, in words that never quote it (the secret half is a secret,
/// and a malformed token may be anything).
pub fn bootstrap_token_id(token: &str) -> std::result::Result<&str, String> {
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    let expected = "a bootstrap token is <id>.<secret>, 6 and 16 characters of [a-z0-9]";
    let Some((id, secret)) = token.split_once('.') else {
        return Err(format!(
            "is not a bootstrap token: it has no '.' ({} characters; {expected})",
            token.chars().count()
        ));
    };
    let describe = |s: &str, n: usize| {
        if s.chars().count() != n {
            format!("{} characters", s.chars().count())
        } else {
            "characters outside [a-z0-9]".to_string()
        }
    };
    match (ok(id, 6), ok(secret, 16)) {
        (true, true) => Ok(id),
        (false, true) => Err(format!(
            "is not a bootstrap token: its id (before the '.') has {} ({expected})",
            describe(id, 6)
        )),
        (true, false) => Err(format!(
            "is not a bootstrap token: the secret of token {id} (after the '.') has {} ({expected})",
            describe(secret, 16)
        )),
        (false, false) => Err(format!(
            "is not a bootstrap token: its id has {} and its secret {} ({expected})",
            describe(id, 6),
            describe(secret, 16)
        )),
    }
}

/// A token goes into an HTTP header: printable ASCII, no spaces.
fn check_token(t: &str) -> std::result::Result<String, String> {
    if t.is_empty() {
        return Err("is empty".into());
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("contains characters that cannot go into an HTTP header".into());
    }
    Ok(t.to_string())
}
