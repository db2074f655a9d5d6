//! HTTP client policy shared by the downloaders (docker packages, artifact
//! metadata): at most 5 redirects, and never from https to plain http.
//! Integrity never depended on the transport (signatures and hashes), but a
//! downgrade would expose what is fetched and from where.

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
