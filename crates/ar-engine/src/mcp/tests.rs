//! Admission's rules for `mcp_servers`, one case per rule.

use super::*;

fn server() -> McpServerRequest {
    McpServerRequest {
        server_id: "docs-1".into(),
        server_name: "docs".into(),
        transport: "streamable_http".into(),
        url: "https://mcp.example.com/mcp".into(),
        tools: vec![
            ("search".into(), "read".into()),
            ("write.page".into(), "write".into()),
        ],
        credential: Some(McpCredentialRequest {
            credential_type: "bearer_token".into(),
            access_token: Secret::new("tok"),
            ..McpCredentialRequest::default()
        }),
        skills: Vec::new(),
    }
}

fn check(servers: Vec<McpServerRequest>) -> Result<Vec<McpServer>, String> {
    check_servers(&servers, &McpSettings::default(), Utc::now()).map_err(|e| e.to_string())
}

/// A change that breaks one rule.
type Edit = Box<dyn FnOnce(&mut McpServerRequest)>;

fn refused(edit: impl FnOnce(&mut McpServerRequest)) -> String {
    let mut request = server();
    edit(&mut request);
    check(vec![request]).expect_err("refused")
}

#[test]
fn a_valid_server_is_kept_without_its_secret() {
    let servers = check(vec![server()]).expect("valid");
    assert_eq!(servers[0].server_id, "docs-1");
    assert_eq!(servers[0].tools[1].access, McpAccess::Write);
    assert!(servers[0].has_credential);
    assert_eq!(servers[0].alias("write.page"), "mcp__docs__write_page");
}

#[test]
fn every_rule_refuses_naming_the_field() {
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|s| s.server_id = String::new()),
            "mcp_servers[0].server_id",
        ),
        (
            Box::new(|s| s.server_id = "-x".into()),
            "mcp_servers[0].server_id",
        ),
        (
            Box::new(|s| s.server_id = "a".repeat(129)),
            "mcp_servers[0].server_id",
        ),
        (
            Box::new(|s| s.server_name = "has space".into()),
            "mcp_servers[0].server_name",
        ),
        (
            Box::new(|s| s.server_name = "a".repeat(65)),
            "mcp_servers[0].server_name",
        ),
        (
            Box::new(|s| s.transport = "stdio".into()),
            "mcp_servers[0].transport",
        ),
        (
            Box::new(|s| s.url = "http://mcp.example.com/mcp".into()),
            "plain http is not allowed",
        ),
        (
            Box::new(|s| s.url = "https://u:p@mcp.example.com/".into()),
            "user info",
        ),
        (
            Box::new(|s| s.url = "https://mcp.example.com/?k=1".into()),
            "must not carry a",
        ),
        (
            Box::new(|s| s.url = "https://mcp.example.com/#f".into()),
            "must not carry a",
        ),
        (
            Box::new(|s| s.url = "not a url".into()),
            "mcp_servers[0].url",
        ),
        (Box::new(|s| s.tools.clear()), "mcp_servers[0].tools"),
        (
            Box::new(|s| s.tools = vec![("t".into(), "read".into()); 129]),
            "mcp_servers[0].tools",
        ),
        (
            Box::new(|s| s.tools[0].0 = "bad name".into()),
            "mcp_servers[0].tools[0].name",
        ),
        (
            Box::new(|s| s.tools[1].0 = "search".into()),
            "duplicate tool",
        ),
        (
            Box::new(|s| s.tools[0].1 = "admin".into()),
            "mcp_servers[0].tools[0].access",
        ),
        (
            Box::new(|s| s.credential.as_mut().unwrap().credential_type = "oauth".into()),
            "mcp_servers[0].credential.type",
        ),
        (
            Box::new(|s| s.credential.as_mut().unwrap().access_token = Secret::default()),
            "mcp_servers[0].credential.access_token",
        ),
        (
            Box::new(|s| {
                s.credential.as_mut().unwrap().expires_at =
                    Some(Utc::now() - chrono::Duration::seconds(1))
            }),
            "mcp_servers[0].credential.expires_at",
        ),
    ];
    for (edit, wanted) in cases {
        let message = refused(edit);
        assert!(
            message.contains(wanted),
            "{message:?} should name {wanted:?}"
        );
    }
}

#[test]
fn header_credentials_refuse_reserved_and_malformed_headers() {
    for (name, value, wanted) in [
        ("Mcp-Session-Id", "x", "may not be set"),
        ("host", "x", "may not be set"),
        ("Bad Header", "x", "not a header name"),
        ("X-Key", "a\r\nInjected: 1", "not a header value"),
    ] {
        let message = refused(|s| {
            s.credential = Some(McpCredentialRequest {
                credential_type: "headers".into(),
                headers: vec![(name.into(), Secret::new(value))],
                ..McpCredentialRequest::default()
            })
        });
        assert!(message.contains(wanted), "{name}: {message}");
    }
    let message = refused(|s| {
        s.credential = Some(McpCredentialRequest {
            credential_type: "headers".into(),
            ..McpCredentialRequest::default()
        })
    });
    assert!(
        message.contains("credential.headers: are required"),
        "{message}"
    );
}

#[test]
fn ids_and_aliases_are_unique_in_the_run_and_servers_are_capped() {
    let message = check(vec![server(), server()]).expect_err("duplicate id");
    assert!(message.contains("duplicate server_id"), "{message}");
    let mut twin = server();
    twin.server_id = "docs-2".into();
    let message = check(vec![server(), twin]).expect_err("same name, same tools");
    assert!(
        message.contains("alias mcp__docs__search is not unique"),
        "{message}"
    );
    let many = (0..17)
        .map(|i| McpServerRequest {
            server_id: format!("s{i}"),
            server_name: format!("n{i}"),
            ..server()
        })
        .collect();
    assert!(check(many).expect_err("17").contains("at most 16"));
}

#[test]
fn plain_http_is_accepted_when_allowed() {
    let mut request = server();
    request.url = "http://127.0.0.1:9/mcp".into();
    let settings = McpSettings {
        allow_http: true,
        ..McpSettings::default()
    };
    let servers = check_servers(&[request], &settings, Utc::now()).expect("allowed");
    assert_eq!(servers[0].url, "http://127.0.0.1:9/mcp");
}

#[test]
fn a_sealed_credential_opens_only_for_its_run_and_server() {
    let sealer = Sealer::from_key_material(&[7u8; 32]).unwrap();
    let changes = seal_credentials(&sealer, ("app", "run_1"), &[server()], Utc::now()).unwrap();
    let [SecretChange::Put { kind, ciphertext }] = changes.as_slice() else {
        panic!("one sealed credential: {changes:?}");
    };
    assert_eq!(kind, "mcp_credential:docs-1");
    let plain = sealer.open("app", "run_1", kind, ciphertext).unwrap();
    let sealed: SealedCredential = serde_json::from_slice(&plain).unwrap();
    assert_eq!(
        sealed.headers,
        [("Authorization".to_string(), "Bearer tok".to_string())]
    );
    assert!(sealer
        .open("app", "run_1", "mcp_credential:other", ciphertext)
        .is_err());
    assert!(sealer.open("app", "run_2", kind, ciphertext).is_err());
}
