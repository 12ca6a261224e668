//! The cookie lane as a signed-in browser uses it: a session cookie made through the
//! sign-in service, same-origin requests, the `/rooms` page forms and reading the pages
//! they answer. Knows the account sign-in only, no feature route.

use helix_core::service::accounts::LinkIdentity;

use crate::TestApp;

impl TestApp {
    /// A signed-in browser of `subject` in `tenant-a`: its session cookie, made through the
    /// sign-in service.
    pub async fn session(&self, subject: &str) -> String {
        self.session_in(subject, "tenant-a").await
    }

    /// A browser of `subject` signed in under `tenant`.
    pub async fn session_in(&self, subject: &str, tenant: &str) -> String {
        let o = &self.state.services.config.oauth;
        let id = LinkIdentity { issuer: &o.issuer, tenant, provider: &o.provider, subject };
        let token = self.state.services.accounts.sign_in(&id, None).await.unwrap();
        format!("helix_session={}", token.expose())
    }

    /// A same-origin browser request carrying `cookie`.
    pub fn browser(&self, method: reqwest::Method, path: &str, cookie: &str) -> reqwest::RequestBuilder {
        let origin = self.state.services.config.browser.public_origin.clone();
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", cookie)
            .header("origin", origin)
            .header("sec-fetch-site", "same-origin")
    }

    /// A same-origin form POST (as the `/rooms` page forms send it, redirects not followed);
    /// returns (status, body text).
    pub async fn form(&self, cookie: &str, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
        let res = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .post(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .header("origin", self.state.services.config.browser.public_origin.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(fields))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }
}

/// `fields` as an `application/x-www-form-urlencoded` body (unreserved bytes kept, every
/// other byte percent-encoded).
pub fn form_body(fields: &[(&str, &str)]) -> String {
    let enc = |v: &str| {
        v.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    fields.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

/// The text of a page between the first `start` and the next `end` after it.
pub fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("{start} in {text}")) + start.len();
    &text[from..from + text[from..].find(end).unwrap()]
}
