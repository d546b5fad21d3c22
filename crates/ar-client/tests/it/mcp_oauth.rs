//! `mcpauth` against a real local OAuth authorization server written here on axum and the
//! `oauth2` crate's types (PKCE S256 checked with its challenge, RFC 6749 token and error
//! bodies): discovery from the resource's 401 challenge, dynamic registration, the
//! authorization request, the code exchange, refresh with rotation, and refusals.

use std::collections::HashMap;
use std::sync::Arc;

use ar_client::mcpauth::{hash_state, Client, Options, TokenEndpoint};
use axum::extract::{Form, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use oauth2::basic::{BasicErrorResponseType, BasicTokenType};
use oauth2::{
    AccessToken, EmptyExtraTokenFields, PkceCodeChallenge, PkceCodeVerifier, RefreshToken,
    StandardErrorResponse, StandardTokenResponse,
};
use parking_lot::Mutex;
use serde_json::json;

/// A code waiting to be exchanged.
struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    resource: String,
}

#[derive(Default)]
struct Issuer {
    base: String,
    clients: Mutex<HashMap<String, Vec<String>>>,
    codes: Mutex<HashMap<String, Grant>>,
    refresh_tokens: Mutex<HashMap<String, String>>,
    serial: Mutex<u64>,
}

impl Issuer {
    fn next(&self, prefix: &str) -> String {
        let mut serial = self.serial.lock();
        *serial += 1;
        format!("{prefix}-{serial}")
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }
}

type Shared = State<Arc<Issuer>>;

fn oauth_error(kind: BasicErrorResponseType) -> Response {
    let body = StandardErrorResponse::new(kind, None, None);
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

async fn resource(State(issuer): Shared) -> Response {
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
        issuer.base
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
    )
        .into_response()
}

async fn protected_resource(State(issuer): Shared) -> Response {
    Json(json!({"resource": issuer.resource(), "authorization_servers": [issuer.base]}))
        .into_response()
}

/// A resource whose authorization server is on a host nobody allowed.
async fn elsewhere(State(issuer): Shared) -> Response {
    Json(json!({"resource": format!("{}/elsewhere", issuer.base),
                "authorization_servers": ["https://login.attacker.example"]}))
    .into_response()
}

async fn metadata(State(issuer): Shared) -> Response {
    let base = &issuer.base;
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
    .into_response()
}

async fn register(State(issuer): Shared, Json(body): Json<serde_json::Value>) -> Response {
    let redirects: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if redirects.is_empty() || body["token_endpoint_auth_method"] != "none" {
        return oauth_error(BasicErrorResponseType::InvalidRequest);
    }
    let client_id = issuer.next("client");
    issuer.clients.lock().insert(client_id.clone(), redirects);
    (
        StatusCode::CREATED,
        Json(json!({"client_id": client_id, "token_endpoint_auth_method": "none"})),
    )
        .into_response()
}

async fn authorize(
    State(issuer): Shared,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let field = |key: &str| query.get(key).cloned().unwrap_or_default();
    let client_id = field("client_id");
    let registered = issuer
        .clients
        .lock()
        .get(&client_id)
        .cloned()
        .unwrap_or_default();
    if field("response_type") != "code"
        || !registered.contains(&field("redirect_uri"))
        || field("code_challenge_method") != "S256"
        || field("resource") != issuer.resource()
    {
        return oauth_error(BasicErrorResponseType::InvalidRequest);
    }
    let code = issuer.next("code");
    let grant = Grant {
        client_id,
        redirect_uri: field("redirect_uri"),
        challenge: field("code_challenge"),
        resource: field("resource"),
    };
    issuer.codes.lock().insert(code.clone(), grant);
    let location = format!(
        "{}?code={code}&state={}",
        field("redirect_uri"),
        field("state")
    );
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn token(State(issuer): Shared, Form(form): Form<HashMap<String, String>>) -> Response {
    let field = |key: &str| form.get(key).cloned().unwrap_or_default();
    let client_id = match field("grant_type").as_str() {
        "authorization_code" => {
            let Some(grant) = issuer.codes.lock().remove(&field("code")) else {
                return oauth_error(BasicErrorResponseType::InvalidGrant);
            };
            let verifier = PkceCodeVerifier::new(field("code_verifier"));
            let challenge = PkceCodeChallenge::from_code_verifier_sha256(&verifier);
            if challenge.as_str() != grant.challenge
                || grant.client_id != field("client_id")
                || grant.redirect_uri != field("redirect_uri")
                || grant.resource != field("resource")
            {
                return oauth_error(BasicErrorResponseType::InvalidGrant);
            }
            grant.client_id
        }
        "refresh_token" => match issuer.refresh_tokens.lock().remove(&field("refresh_token")) {
            Some(owner)
                if owner == field("client_id") && field("resource") == issuer.resource() =>
            {
                owner
            }
            _ => return oauth_error(BasicErrorResponseType::InvalidGrant),
        },
        _ => return oauth_error(BasicErrorResponseType::UnsupportedGrantType),
    };
    let refresh = issuer.next("refresh");
    issuer
        .refresh_tokens
        .lock()
        .insert(refresh.clone(), client_id);
    let mut body: StandardTokenResponse<EmptyExtraTokenFields, BasicTokenType> =
        StandardTokenResponse::new(
            AccessToken::new(issuer.next("access")),
            BasicTokenType::Bearer,
            EmptyExtraTokenFields {},
        );
    body.set_refresh_token(Some(RefreshToken::new(refresh)));
    body.set_expires_in(Some(&std::time::Duration::from_secs(3600)));
    Json(body).into_response()
}

async fn start_issuer() -> Arc<Issuer> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let issuer = Arc::new(Issuer {
        base: format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        ),
        ..Default::default()
    });
    let router = Router::new()
        .route("/mcp", get(resource))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/elsewhere",
            get(elsewhere),
        )
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(issuer.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    issuer
}

fn local() -> Options {
    Options {
        insecure_localhost: true,
        ..Default::default()
    }
}

/// Opens the authorization URL as the person's browser would; the callback's code and state.
async fn sign_in(url: &str) -> (String, String) {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("browser");
    let answer = browser.get(url).send().await.expect("authorize");
    assert_eq!(answer.status(), 302, "{:?}", answer.text().await);
    let location = answer.headers()[header::LOCATION]
        .to_str()
        .expect("location")
        .to_string();
    let callback = reqwest::Url::parse(&location).expect("callback URL");
    let pairs: HashMap<String, String> = callback.query_pairs().into_owned().collect();
    (pairs["code"].clone(), pairs["state"].clone())
}

#[tokio::test]
async fn discovery_registration_pkce_exchange_and_refresh_against_a_real_authorization_server() {
    let issuer = start_issuer().await;
    let oauth = Client::new(&issuer.resource(), local()).expect("client");
    let configuration = oauth.discover().await.expect("discover");
    assert_eq!(configuration.resource.resource, issuer.resource());
    assert_eq!(configuration.authorization.issuer, issuer.base);
    let redirect = format!("{}/callback", issuer.base);
    let registration = oauth
        .register(
            &configuration.authorization.registration_endpoint,
            &redirect,
        )
        .await
        .expect("register");
    assert_eq!(registration.token_endpoint_auth_method, "none");

    let scopes = vec!["issues:read".to_string()];
    let request = oauth
        .new_authorization_request(&configuration, &registration.client_id, &redirect, &scopes)
        .expect("authorization request");
    assert_eq!(hash_state(&request.state).len(), 64);
    assert!(!format!("{request:?}").contains(&request.verifier));
    let url = reqwest::Url::parse(&request.url).expect("url");
    let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["scope"], "issues:read");
    let (code, state) = sign_in(&request.url).await;
    assert_eq!(state, request.state, "the state comes back");

    let endpoint = TokenEndpoint {
        url: configuration.authorization.token_endpoint.clone(),
        client_id: registration.client_id.clone(),
        resource: configuration.resource.resource.clone(),
        ..Default::default()
    };
    let token = oauth
        .exchange_code(&endpoint, &code, &request.verifier, &redirect)
        .await
        .expect("exchange");
    assert!(
        token.access_token.starts_with("access-") && token.refresh_token.starts_with("refresh-")
    );
    assert!(token.expires_at.is_some_and(|at| at > chrono::Utc::now()));
    assert!(!format!("{token:?}").contains(&token.access_token));
    let again = oauth
        .exchange_code(&endpoint, &code, &request.verifier, &redirect)
        .await
        .expect_err("a code is used once");
    assert!(
        again.is_status(400) && again.code == "token_rejected",
        "{again}"
    );

    let rotated = oauth
        .refresh(&endpoint, &token.refresh_token)
        .await
        .expect("refresh");
    assert_ne!(rotated.refresh_token, token.refresh_token);
    let stale = oauth
        .refresh(&endpoint, &token.refresh_token)
        .await
        .expect_err("the old refresh token is spent");
    assert!(stale.is_status(400));
    assert!(!stale.to_string().contains(&token.refresh_token));
}

#[tokio::test]
async fn a_wrong_verifier_and_unallowed_destinations_are_refused() {
    let issuer = start_issuer().await;
    let oauth = Client::new(&issuer.resource(), local()).expect("client");
    let configuration = oauth.discover().await.expect("discover");
    let redirect = format!("{}/callback", issuer.base);
    let registration = oauth
        .register(
            &configuration.authorization.registration_endpoint,
            &redirect,
        )
        .await
        .expect("register");
    let request = oauth
        .new_authorization_request(&configuration, &registration.client_id, &redirect, &[])
        .expect("authorization request");
    let (code, _) = sign_in(&request.url).await;
    let endpoint = TokenEndpoint {
        url: configuration.authorization.token_endpoint.clone(),
        client_id: registration.client_id.clone(),
        resource: issuer.resource(),
        ..Default::default()
    };
    let other_verifier = "x".repeat(64);
    let refused = oauth
        .exchange_code(&endpoint, &code, &other_verifier, &redirect)
        .await
        .expect_err("PKCE");
    assert!(refused.is_status(400), "{refused}");

    // An authorization server on a host nobody allowed is never contacted.
    let elsewhere = Client::new(&format!("{}/elsewhere", issuer.base), local()).expect("client");
    let error = elsewhere.discover().await.expect_err("not allowed");
    assert_eq!(error.code, "metadata_invalid", "{error}");
    // Plain HTTP and loopback need the development option.
    assert!(Client::new(&issuer.resource(), Options::default()).is_err());
    let mut stolen = endpoint.clone();
    stolen.url = "https://token.attacker.example/token".into();
    let error = oauth.refresh(&stolen, "refresh-1").await.expect_err("host");
    assert_eq!(error.code, "metadata_invalid");
}
