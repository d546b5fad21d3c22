//! `SKILL.md` parsing: front matter, defaults, every refusal, policy merging.

use super::*;

const GOOD: &str = "---\nname: demo\ntitle: Demo\ndescription: A demo.\nruntimes: [native_sdk]\nrequired_tools: [read_file, read_file]\npolicy:\n  allow_implicit_invocation: false\n  completion_requires_interaction_kinds: [approval_request]\n---\n\nDo the demo.\n";

#[test]
fn parses_front_matter_and_body() {
    let skill = parse_skill_md(GOOD, "demo/SKILL.md", SourceKind::BuiltIn).unwrap();
    assert_eq!(skill.key, "demo");
    assert_eq!(skill.title, "Demo");
    assert_eq!(skill.instructions, "Do the demo.");
    assert_eq!(skill.required_tools, ["read_file"]);
    assert_eq!(skill.runtimes, ["native_sdk"]);
    assert_eq!(skill.policy.allow_implicit_invocation, Some(false));
    assert_eq!(
        skill.policy.completion_requires_interaction_kinds,
        ["approval_request"]
    );
}

#[test]
fn title_defaults_to_the_key_and_crlf_is_accepted() {
    let text = "---\r\nname: x\r\ndescription: d\r\n---\r\nbody\r\n";
    let skill = parse_skill_md(text, "x", SourceKind::Repository).unwrap();
    assert_eq!(skill.title, "x");
    assert_eq!(skill.instructions, "body");
}

#[test]
fn bad_files_are_typed_errors() {
    let cases: &[(&str, &str)] = &[
        ("no front matter", "must start with a front matter block"),
        (
            "---\nname: x\ndescription: d\n",
            "must start with a front matter block",
        ),
        ("---\nname: [\n---\nbody", "invalid front matter"),
        ("---\ndescription: d\n---\nbody", "`name` is required"),
        ("---\nname: x\n---\nbody", "`description` is required"),
        (
            "---\nname: ../x\ndescription: d\n---\nbody",
            "skill name \"../x\"",
        ),
        (
            "---\nname: x\ndescription: d\n---\n  \n",
            "has no instructions",
        ),
        (
            "---\nname: x\ndescription: d\npolicy: {bogus: 1}\n---\nbody",
            "invalid front matter",
        ),
    ];
    for (text, expected) in cases {
        let error = parse_skill_md(text, "f", SourceKind::Repository).unwrap_err();
        assert!(error.to_string().contains(expected), "{text:?}: {error}");
    }
}

#[test]
fn policy_merge_prefers_false_and_unites_kinds() {
    let mut policy = SkillPolicy {
        allow_implicit_invocation: Some(true),
        completion_requires_interaction_kinds: vec!["b".into()],
    };
    policy.merge(&SkillPolicy {
        allow_implicit_invocation: Some(false),
        completion_requires_interaction_kinds: vec!["a".into(), "b".into()],
    });
    assert_eq!(policy.allow_implicit_invocation, Some(false));
    assert_eq!(policy.completion_requires_interaction_kinds, ["a", "b"]);
}
