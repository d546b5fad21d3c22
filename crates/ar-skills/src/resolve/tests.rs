//! Resolution: built-ins, the provider port, refusals, roles, validation, repository skills.

use std::sync::Mutex;

use super::*;

fn key(key: &str) -> SkillRef {
    SkillRef {
        key: key.into(),
        ..SkillRef::default()
    }
}

fn with_role(mut reference: SkillRef, role: &str) -> SkillRef {
    reference.config = Some(serde_json::json!({"runtime_skill_role": role}));
    reference
}

/// A provider with one skill, recording what it was asked.
#[derive(Default)]
struct OneSkill {
    asked: Mutex<Vec<LookupRequest>>,
    skill: HostSkill,
    /// The package store's one object (`pkg/1.zip`); empty: no package store.
    package: Vec<u8>,
}

#[async_trait]
impl SkillLookup for OneSkill {
    fn serves(&self, app_id: &str) -> bool {
        app_id == "app"
    }
    async fn by_id(&self, request: &LookupRequest) -> Result<Option<HostSkill>, LookupError> {
        self.asked.lock().unwrap().push(request.clone());
        Ok((request.skill_id == self.skill.id).then(|| self.skill.clone()))
    }
    async fn active_by_key(
        &self,
        request: &LookupRequest,
    ) -> Result<Option<HostSkill>, LookupError> {
        self.asked.lock().unwrap().push(request.clone());
        Ok((request.key == self.skill.key).then(|| self.skill.clone()))
    }
    async fn package(&self, app_id: &str, object_key: &str) -> Result<Vec<u8>, LookupError> {
        match (self.package.is_empty(), object_key) {
            (true, _) => Err(LookupError(format!(
                "app {app_id:?} has no skill package store"
            ))),
            (false, "pkg/1.zip") => Ok(self.package.clone()),
            (false, other) => Err(LookupError(format!(
                "GET objects/{other} returned HTTP 404"
            ))),
        }
    }
}

fn triage() -> OneSkill {
    OneSkill {
        skill: HostSkill {
            id: "sk_1".into(),
            key: "github_triage".into(),
            version_key: "v3".into(),
            title: "GitHub triage".into(),
            instructions: "Label every issue.".into(),
            required_tools: vec!["mcp__github__get_issue".into()],
            ..HostSkill::default()
        },
        ..OneSkill::default()
    }
}

fn context() -> LookupRequest {
    LookupRequest {
        app_id: "app".into(),
        run_id: "run_1".into(),
        ..LookupRequest::default()
    }
}

#[tokio::test]
async fn built_ins_resolve_and_compile_into_the_prompt() {
    let refs = [key("approval_protocol"), key("code_builder")];
    let resolution = resolve(Catalog::built_in(), None, &context(), &refs)
        .await
        .unwrap();
    let prompt = resolution.prompt_instructions();
    assert!(prompt.contains("## Skill: Approval Protocol"));
    assert!(prompt.contains("## Skill: Code Builder"));
    assert_eq!(resolution.available().count(), 2);
    assert_eq!(
        resolution.policy().completion_requires_interaction_kinds,
        ["approval_request"]
    );
}

#[tokio::test]
async fn an_unknown_key_without_a_provider_is_refused_by_name() {
    let error = resolve(Catalog::built_in(), None, &context(), &[key("ghost")])
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "unknown skill \"ghost\"");
    let error = resolve(Catalog::built_in(), None, &context(), &[key(" ")])
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "skill key is required");
}

#[tokio::test]
async fn duplicates_and_bad_roles_are_refused() {
    let refs = [key("code_builder"), key(" code_builder ")];
    let error = resolve(Catalog::built_in(), None, &context(), &refs)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "duplicate skill reference \"builtin:code_builder\""
    );
    let refs = [with_role(key("code_builder"), "sometimes")];
    let error = resolve(Catalog::built_in(), None, &context(), &refs)
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("invalid runtime_skill_role sometimes"),
        "{error}"
    );
}

#[tokio::test]
async fn explicit_roles_split_prompt_policy_and_tools() {
    let refs = [
        with_role(key("approval_protocol"), "instruction"),
        with_role(key("review_agent"), "available"),
    ];
    let resolution = resolve(Catalog::built_in(), None, &context(), &refs)
        .await
        .unwrap();
    assert!(resolution.explicit_roles());
    assert_eq!(resolution.prompt_instructions(), "");
    let available: Vec<_> = resolution.available().map(|d| d.key.as_str()).collect();
    assert_eq!(available, ["review_agent"]);
    assert_eq!(
        resolution.policy().completion_requires_interaction_kinds,
        ["approval_request"]
    );
}

#[tokio::test]
async fn host_skills_resolve_by_key_and_id_with_the_request_context() {
    let provider = triage();
    let refs = [key("github_triage")];
    let resolution = resolve(Catalog::built_in(), Some(&provider), &context(), &refs)
        .await
        .unwrap();
    let skill = &resolution.skills[0].definition;
    assert_eq!(
        (skill.source, skill.skill_id.as_str()),
        (SourceKind::Workspace, "sk_1")
    );
    let by_id = SkillRef {
        skill_id: "sk_1".into(),
        version_key: "v3".into(),
        ..SkillRef::default()
    };
    resolve(Catalog::built_in(), Some(&provider), &context(), &[by_id])
        .await
        .unwrap();
    let asked = provider.asked.lock().unwrap();
    assert_eq!(
        (asked[0].key.as_str(), asked[0].run_id.as_str()),
        ("github_triage", "run_1")
    );
    assert_eq!(asked[1].skill_id, "sk_1");
}

#[tokio::test]
async fn host_skill_problems_are_refused() {
    let provider = triage();
    let pinned = SkillRef {
        key: "github_triage".into(),
        version: "v2".into(),
        ..SkillRef::default()
    };
    let cases = [
        (pinned, "workspace skill \"github_triage\" version mismatch"),
        (
            SkillRef {
                skill_id: "sk_9".into(),
                ..SkillRef::default()
            },
            "workspace skill not found",
        ),
        (key("other"), "unknown skill \"other\""),
    ];
    for (reference, expected) in cases {
        let error = resolve(
            Catalog::built_in(),
            Some(&provider),
            &context(),
            &[reference],
        )
        .await
        .unwrap_err();
        assert_eq!(error.to_string(), expected);
    }
    let by_id = SkillRef {
        skill_id: "sk_1".into(),
        ..SkillRef::default()
    };
    let error = resolve(Catalog::built_in(), None, &context(), &[by_id])
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "workspace skill lookup is not configured"
    );
    let mut packaged = triage();
    packaged.skill.package_object_key = Some("pkg/1.zip".into());
    let error = resolve(
        Catalog::built_in(),
        Some(&packaged),
        &context(),
        &[key("github_triage")],
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("workspace skill \"github_triage\" package \"pkg/1.zip\" could not be fetched: app \"app\" has no skill package store"),
        "{error}"
    );
    let mut fenced = triage();
    fenced.skill.policy.interaction_contracts = vec![serde_json::json!({
        "kind": "review_checkpoint",
        "transports": {"native": {"type": "tool_call"}, "codex": {"type": "fenced_json", "block_label": "review"}}
    })];
    let error = resolve(
        Catalog::built_in(),
        Some(&fenced),
        &context(),
        &[key("github_triage")],
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("interaction transport \"fenced_json\""),
        "{error}"
    );
    let mut native = triage();
    native.skill.policy.interaction_contracts = vec![
        serde_json::json!({"kind": "approval_request", "transports": {"native": {"type": "tool_call"}}}),
    ];
    resolve(
        Catalog::built_in(),
        Some(&native),
        &context(),
        &[key("github_triage")],
    )
    .await
    .unwrap();
    let mut archived = triage();
    archived.skill.is_archived = true;
    let error = resolve(
        Catalog::built_in(),
        Some(&archived),
        &context(),
        &[key("github_triage")],
    )
    .await
    .unwrap_err();
    assert_eq!(error.to_string(), "unknown skill \"github_triage\"");
}

#[tokio::test]
async fn validation_checks_runtimes_and_required_tools() {
    let refs = [key("approval_protocol")];
    let resolution = resolve(Catalog::built_in(), None, &context(), &refs)
        .await
        .unwrap();
    resolution
        .validate("native_sdk", &["request_human_approval".into()])
        .unwrap();
    let error = resolution
        .validate("native_sdk", &["get_context".into()])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "skill \"approval_protocol\" requires tool \"request_approval\""
    );
    let error = resolution
        .validate("opencode", &["request_approval".into()])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "skill \"approval_protocol\" does not support runtime \"opencode\""
    );
}

#[tokio::test]
async fn repository_skills_join_as_available_and_host_keys_win() {
    let refs = [key("code_builder")];
    let mut resolution = resolve(Catalog::built_in(), None, &context(), &refs)
        .await
        .unwrap();
    let mut repo = Catalog::built_in().get("review_agent").unwrap().clone();
    repo.source = SourceKind::Repository;
    let mut shadow = Catalog::built_in().get("code_builder").unwrap().clone();
    shadow.instructions = "repository version".into();
    resolution.add_repository(vec![repo, shadow]);
    assert_eq!(resolution.skills.len(), 2);
    assert_eq!(resolution.skills[1].role, SkillRole::Available);
    assert_ne!(
        resolution.skills[0].definition.instructions,
        "repository version"
    );
}

/// A zip of text entries.
fn zip_of(entries: &[(&str, &str)]) -> Vec<u8> {
    let bytes: Vec<(&str, &[u8])> = entries.iter().map(|(n, c)| (*n, c.as_bytes())).collect();
    crate::package::tests::zip_of(&bytes)
}

#[tokio::test]
async fn a_packaged_host_skill_takes_its_text_and_policy_from_the_package() {
    let archive = zip_of(&[
        (
            "github_triage/SKILL.md",
            "---\nname: github_triage\ndescription: Triage from the package.\nmetadata:\n  title: Packaged triage\n  supported_runtimes: [native_sdk]\n---\nFollow scripts/labels.md.",
        ),
        ("github_triage/scripts/labels.md", "bug, feature"),
        (
            "github_triage/agents/openai.yaml",
            "policy:\n  completion_requires_interaction_kinds: [approval_request]\n",
        ),
    ]);
    let mut packaged = triage();
    packaged.skill.package_object_key = Some("pkg/1.zip".into());
    packaged.skill.package_size = Some(archive.len() as i64);
    packaged.skill.package_checksum = Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        &archive,
    )));
    packaged.package = archive;
    let resolution = resolve(
        Catalog::built_in(),
        Some(&packaged),
        &context(),
        &[key("github_triage")],
    )
    .await
    .unwrap();
    let skill = &resolution.skills[0].definition;
    assert_eq!(skill.instructions, "Follow scripts/labels.md.");
    assert_eq!(skill.title, "Packaged triage");
    assert_eq!(skill.description, "Triage from the package.");
    assert_eq!(skill.runtimes, ["native_sdk"]);
    assert_eq!(
        skill.required_tools,
        ["mcp__github__get_issue"],
        "the provider's, the package names none"
    );
    assert_eq!(
        skill.policy.completion_requires_interaction_kinds,
        ["approval_request"]
    );
    assert_eq!(
        (skill.skill_id.as_str(), skill.version_key.as_str()),
        ("sk_1", "v3")
    );
    let paths: Vec<&str> = skill.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["SKILL.md", "agents/openai.yaml", "scripts/labels.md"]
    );

    packaged.skill.package_checksum = Some("0".repeat(64));
    let error = resolve(
        Catalog::built_in(),
        Some(&packaged),
        &context(),
        &[key("github_triage")],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("workspace skill \"github_triage\" package \"pkg/1.zip\" cannot be used: checksum mismatch"),
        "{error}"
    );
}
