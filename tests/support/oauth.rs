//! A scripted OAuth client of the development issuer, as an MCP client drives it:
//! discovery from the 401 challenge, registration, `/authorize` with the browser's sign-in
//! and consent forms posted as a browser posts them (Origin header, session cookie), and
//! `/token`. Knows the protocol and the pages' form fields, no tool.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Value, json};

use crate::{TestApp, read};

/// A registered client and the endpoints it discovered.
pub struct OAuthClient {
    pub client_id: String,
    pub redirect_uri: String,
    pub resource: String,
    pub authorize: String,
    pub token: String,
    /// No redirects followed, so each 303 is seen.
    pub http: reqwest::Client,
}

/// A PKCE pair (verifier, S256 challenge).
pub fn pkce() -> (String, String) {
    let verifier = format!("v-{}-{}", helix_core::domain::random_hex(20), "x".repeat(8));
    let digest = helix_core::domain::sha256_hex(&verifier);
    let bytes: Vec<u8> =
        (0..digest.len()).step_by(2).map(|i| u8::from_str_radix(&digest[i..i + 2], 16).unwrap()).collect();
    (verifier, B64.encode(bytes))
}

/// The value of the hidden or named input `name` in a page.
pub fn input_value(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\" value=\""))?;
    let rest = &html[at + name.len() + 15..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// `application/x-www-form-urlencoded` of the pairs (repeats kept).
pub fn encode<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    let mut url = reqwest::Url::parse("http://form.invalid/").unwrap();
    url.query_pairs_mut().extend_pairs(pairs.iter().map(|(k, v)| (k.as_ref(), v.as_ref())));
    url.query().unwrap_or("").to_owned()
}

/// What came back to the client's redirect URI.
#[derive(Debug)]
pub struct Callback {
    pub status: u16,
    pub location: Option<reqwest::Url>,
    pub body: String,
}

impl Callback {
    pub fn param(&self, name: &str) -> Option<String> {
        self.location.as_ref()?.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
    }
}

impl TestApp {
    /// Discovery from the MCP endpoint's 401 challenge to the issuer's metadata, then
    /// registration with `redirect_uri`.
    pub async fn oauth_client(&self, redirect_uri: &str) -> OAuthClient {
        let res = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
        let challenge = res.headers()["www-authenticate"].to_str().unwrap().to_owned();
        let prm_url = challenge.split("resource_metadata=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
        let (_, prm) = read(self.http.get(&prm_url).send().await.unwrap()).await;
        let issuer = prm["authorization_servers"][0].as_str().unwrap().to_owned();
        let (status, meta) =
            read(self.http.get(format!("{issuer}/.well-known/oauth-authorization-server")).send().await.unwrap()).await;
        assert_eq!(status, 200, "{meta}");
        assert_eq!(meta["issuer"], issuer);
        let body = json!({
            "client_name": "Scripted client", "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none",
        });
        let reg = meta["registration_endpoint"].as_str().unwrap();
        let (status, c) = read(self.http.post(reg).json(&body).send().await.unwrap()).await;
        assert_eq!(status, 201, "{c}");
        OAuthClient {
            client_id: c["client_id"].as_str().unwrap().to_owned(),
            redirect_uri: redirect_uri.to_owned(),
            resource: prm["resource"].as_str().unwrap().to_owned(),
            authorize: meta["authorization_endpoint"].as_str().unwrap().to_owned(),
            token: meta["token_endpoint"].as_str().unwrap().to_owned(),
            http: reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap(),
        }
    }
}

impl OAuthClient {
    /// The authorization request's query for `scope` and `challenge` (state `st-1`),
    /// `resource` sent twice as some clients do.
    pub fn authorize_query(&self, scope: &str, challenge: &str) -> Vec<(String, String)> {
        [
            ("response_type", "code"),
            ("client_id", &self.client_id),
            ("redirect_uri", &self.redirect_uri),
            ("state", "st-1"),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("scope", scope),
            ("resource", &self.resource),
            ("resource", &self.resource),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    pub async fn get_authorize(&self, query: &[(String, String)]) -> Callback {
        let res = self.http.get(format!("{}?{}", self.authorize, encode(query))).send().await.unwrap();
        callback(res).await
    }

    /// A form POST to `url`.
    pub fn post_form(&self, url: &str, form: &[(&str, &str)]) -> reqwest::RequestBuilder {
        self.http.post(url).header("Content-Type", "application/x-www-form-urlencoded").body(encode(form))
    }

    fn origin(&self) -> String {
        let url = reqwest::Url::parse(&self.authorize).unwrap();
        url.origin().ascii_serialization()
    }

    /// The whole browser step: sign-in page, sign-in form, consent form with `approve`
    /// (ticking `keep` of the requested scopes) or deny.
    pub async fn browser(&self, query: &[(String, String)], who: (&str, &str), keep: Option<&[&str]>) -> Callback {
        let page = self.get_authorize(query).await;
        assert_eq!(page.status, 200, "the sign-in page: {page:?}");
        assert!(page.body.contains("id=\"subject\"") && page.body.contains("id=\"sign-in\""), "{}", page.body);
        let pending = input_value(&page.body, "pending").expect("the pending authorization");
        let form = [("pending", pending.as_str()), ("subject", who.0), ("tenant", who.1)];
        let res = self.post_form(&self.authorize, &form).header("Origin", self.origin()).send().await.unwrap();
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("helix_session="))
            .map(|c| c.split(';').next().unwrap().to_owned())
            .expect("signed in");
        let consent = res.text().await.unwrap();
        assert!(consent.contains("id=\"approve\"") && consent.contains("allows agents to act"), "{consent}");
        let mut body = format!("pending={pending}");
        match keep {
            Some(scopes) => {
                for s in scopes {
                    assert!(consent.contains(&format!("name=\"scope\" value=\"{s}\" checked")), "{s}: {consent}");
                    body.push_str(&format!("&scope={}", s));
                }
                body.push_str("&decision=approve");
            }
            None => body.push_str("&decision=deny"),
        }
        let res = self
            .http
            .post(&self.authorize)
            .header("Origin", self.origin())
            .header("Cookie", cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        callback(res).await
    }

    pub async fn token_request(&self, form: &[(&str, &str)]) -> (u16, Value, Option<String>) {
        let res = self.post_form(&self.token, form).send().await.unwrap();
        let cache = res.headers().get("cache-control").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (status, body) = read(res).await;
        (status, body, cache)
    }

    /// Exchanges `code` (with `verifier`) for tokens.
    pub async fn exchange(&self, code: &str, verifier: &str) -> (u16, Value) {
        let (status, body, cache) = self
            .token_request(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("code_verifier", verifier),
                ("client_id", &self.client_id),
                ("redirect_uri", &self.redirect_uri),
                ("resource", &self.resource),
            ])
            .await;
        assert_eq!(cache.as_deref(), Some("no-store"));
        (status, body)
    }

    pub async fn refresh(&self, refresh_token: &str) -> (u16, Value) {
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", &self.client_id),
            ("resource", &self.resource),
        ];
        let (status, body, _) = self.token_request(&form).await;
        (status, body)
    }

    /// The whole flow for `who`, approving `scopes`: the token answer.
    pub async fn authorize_all(&self, who: (&str, &str), scopes: &[&str]) -> Value {
        let (verifier, challenge) = pkce();
        let back = self.browser(&self.authorize_query(&scopes.join(" "), &challenge), who, Some(scopes)).await;
        assert_eq!(back.param("state").as_deref(), Some("st-1"), "{back:?}");
        let code = back.param("code").unwrap_or_else(|| panic!("a code: {back:?}"));
        let (status, tokens) = self.exchange(&code, &verifier).await;
        assert_eq!(status, 200, "{tokens}");
        tokens
    }
}

async fn callback(res: reqwest::Response) -> Callback {
    let status = res.status().as_u16();
    let location = res.headers().get("location").and_then(|l| reqwest::Url::parse(l.to_str().ok()?).ok());
    Callback { status, location, body: res.text().await.unwrap_or_default() }
}
