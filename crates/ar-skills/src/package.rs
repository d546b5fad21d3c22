//! Skill packages: a host skill delivered as a zip archive (the format the original builds and
//! the Python SDK's package router serves as `application/zip`), checked against the
//! provider's `package_size` and `package_checksum`, then unpacked in memory under caps.
//!
//! The archive is the host's, so nothing in it is trusted: every entry name must be a plain
//! relative path (no `..`, no absolute or drive path, no backslash, no NUL or control
//! character), symbolic links and special files are refused, encrypted entries are refused,
//! and entry count, per-file and total unpacked size are capped while reading (a zip's
//! declared sizes can lie). Exactly one directory holds a `SKILL.md`; the files beneath it are
//! the skill's, the rest (e.g. `__MACOSX/`) is ignored. Nothing is written here: staging
//! writes the checked files later (see [`crate::stage`]).

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use sha2::{Digest, Sha256};

use serde::Deserialize;

use crate::definition::{
    clean_list, parse_skill_md, SkillDefinition, SkillError, SkillFile, SkillPolicy, SourceKind,
};
use crate::resolve::{foreign_transport, HostPolicy, HostSkill};

/// Largest archive accepted (the download is capped at the same size).
pub const MAX_PACKAGE_BYTES: usize = 8 * 1024 * 1024;
/// Most entries (files and directories) in one archive.
pub const MAX_ENTRIES: usize = 256;
/// Largest unpacked file.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Largest unpacked total.
pub const MAX_UNPACKED_BYTES: u64 = 16 * 1024 * 1024;
/// Longest entry name, in bytes, and deepest nesting.
const MAX_NAME_BYTES: usize = 512;
const MAX_DEPTH: usize = 8;
/// The original's short checksum: the first 12 hex digits of the SHA-256.
const SHORT_CHECKSUM: usize = 12;

/// Why a package cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("the archive is {actual} bytes but the provider declared package_size {declared}")]
    Size { declared: i64, actual: usize },
    #[error(
        "checksum mismatch: the provider declared {expected}, the archive's SHA-256 is {actual}"
    )]
    Checksum { expected: String, actual: String },
    #[error("package_checksum {0:?} is not a SHA-256 (64 hex digits, optionally prefixed `sha256:`, or its first 12)")]
    ChecksumFormat(String),
    #[error("the archive is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("not a zip archive: {0}")]
    NotZip(String),
    #[error("the archive has more than {limit} entries")]
    TooManyEntries { limit: usize },
    #[error("entry {0:?} is not a plain relative path inside the package")]
    BadPath(String),
    #[error("entry {0:?} is a symbolic link or special file")]
    NotRegular(String),
    #[error("entry {0:?} is encrypted")]
    Encrypted(String),
    #[error("entry {0:?} appears twice")]
    Duplicate(String),
    #[error("entry {path:?} is larger than {limit} bytes")]
    FileTooLarge { path: String, limit: u64 },
    #[error("the archive unpacks to more than {limit} bytes")]
    TotalTooLarge { limit: u64 },
    #[error("the archive has no SKILL.md")]
    NoSkillMd,
    #[error("the archive has more than one SKILL.md ({0:?} and {1:?})")]
    ManyRoots(String, String),
    #[error("entry {path:?} cannot be read: {reason}")]
    Read { path: String, reason: String },
    #[error("SKILL.md is not UTF-8")]
    NotText,
    #[error("agents/openai.yaml is invalid: {0}")]
    Config(String),
    #[error("it asks for interaction transport {0:?}; this runtime offers only tool_call")]
    Transport(String),
    #[error(transparent)]
    Skill(#[from] SkillError),
}

/// Checks an archive against what the provider declared. A size of 0 or no checksum means
/// the provider declared none (the original's store omits both for some skills).
pub fn verify(
    bytes: &[u8],
    declared_size: Option<i64>,
    checksum: Option<&str>,
) -> Result<(), PackageError> {
    if bytes.len() > MAX_PACKAGE_BYTES {
        return Err(PackageError::TooLarge {
            limit: MAX_PACKAGE_BYTES,
        });
    }
    if let Some(declared) = declared_size.filter(|size| *size != 0) {
        if usize::try_from(declared).ok() != Some(bytes.len()) {
            return Err(PackageError::Size {
                declared,
                actual: bytes.len(),
            });
        }
    }
    let Some(expected) = checksum.map(str::trim).filter(|c| !c.is_empty()) else {
        return Ok(());
    };
    let digits = expected_digits(expected)?;
    let actual = hex::encode(Sha256::digest(bytes));
    if !actual.starts_with(&digits) {
        return Err(PackageError::Checksum {
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(())
}

/// The lower-case hex digits of a declared checksum: 64, or the original's 12-digit prefix.
fn expected_digits(expected: &str) -> Result<String, PackageError> {
    let lower = expected.to_ascii_lowercase();
    let digits = lower
        .strip_prefix("sha256:")
        .or_else(|| lower.strip_prefix("sha256="))
        .unwrap_or(&lower);
    let hex_only = digits.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex_only || (digits.len() != 64 && digits.len() != SHORT_CHECKSUM) {
        return Err(PackageError::ChecksumFormat(expected.to_string()));
    }
    Ok(digits.to_string())
}

/// Unpacks an archive: the files beneath its one `SKILL.md` directory, paths relative to it,
/// sorted. `SKILL.md` is among them.
pub fn unpack(bytes: &[u8]) -> Result<Vec<SkillFile>, PackageError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|error| PackageError::NotZip(error.to_string()))?;
    if archive.len() > MAX_ENTRIES {
        return Err(PackageError::TooManyEntries { limit: MAX_ENTRIES });
    }
    let mut entries: BTreeMap<Vec<String>, Vec<u8>> = BTreeMap::new();
    let mut total: u64 = 0;
    for index in 0..archive.len() {
        let Some((parts, content)) = read_entry(&mut archive, index)? else {
            continue;
        };
        total += content.len() as u64;
        if total > MAX_UNPACKED_BYTES {
            return Err(PackageError::TotalTooLarge {
                limit: MAX_UNPACKED_BYTES,
            });
        }
        if entries.contains_key(&parts) {
            return Err(PackageError::Duplicate(parts.join("/")));
        }
        entries.insert(parts, content);
    }
    let root = skill_root(&entries)?;
    Ok(entries
        .into_iter()
        .filter(|(parts, _)| parts.starts_with(&root))
        .map(|(parts, content)| SkillFile {
            path: parts[root.len()..].join("/"),
            content,
        })
        .collect())
}

/// An entry's checked path components and its content.
type Entry = (Vec<String>, Vec<u8>);

/// One entry's checked path components and content; `None` for a directory.
fn read_entry(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    index: usize,
) -> Result<Option<Entry>, PackageError> {
    let entry = archive
        .by_index(index)
        .map_err(|error| PackageError::NotZip(error.to_string()))?;
    let name = match entry.name() {
        Ok(name) => name.into_owned(),
        Err(_) => {
            return Err(PackageError::BadPath(
                String::from_utf8_lossy(entry.name_raw()).into_owned(),
            ))
        }
    };
    let parts = entry_parts(&name).ok_or_else(|| PackageError::BadPath(name.clone()))?;
    if entry.encrypted() {
        return Err(PackageError::Encrypted(name));
    }
    let kind = entry.unix_mode().map(|mode| mode & 0o170000);
    let special = kind.is_some_and(|kind| kind != 0 && kind != 0o100000 && kind != 0o040000);
    if entry.is_symlink() || special {
        return Err(PackageError::NotRegular(name));
    }
    if entry.is_dir() || parts.is_empty() {
        return Ok(None);
    }
    let too_large = || PackageError::FileTooLarge {
        path: name.clone(),
        limit: MAX_FILE_BYTES,
    };
    if entry.size() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let mut content = Vec::new();
    entry
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut content)
        .map_err(|error| PackageError::Read {
            path: name.clone(),
            reason: error.to_string(),
        })?;
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    Ok(Some((parts, content)))
}

/// An entry name's components, or `None` when it is not a plain relative path.
fn entry_parts(name: &str) -> Option<Vec<String>> {
    let bad_char = |c: char| c == '\\' || c == ':' || c.is_control();
    if name.len() > MAX_NAME_BYTES || name.starts_with('/') || name.chars().any(bad_char) {
        return None;
    }
    let parts: Vec<String> = name
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .map(str::to_string)
        .collect();
    if parts.len() > MAX_DEPTH || parts.iter().any(|part| part == "..") {
        return None;
    }
    Some(parts)
}

/// The one directory holding a `SKILL.md`.
fn skill_root(entries: &BTreeMap<Vec<String>, Vec<u8>>) -> Result<Vec<String>, PackageError> {
    let mut roots = entries
        .keys()
        .filter(|parts| parts.last().is_some_and(|name| name == "SKILL.md"))
        .map(|parts| parts[..parts.len() - 1].to_vec());
    let root = roots.next().ok_or(PackageError::NoSkillMd)?;
    if let Some(other) = roots.next() {
        let show = |parts: &[String]| {
            format!(
                "{}SKILL.md",
                parts.iter().map(|p| format!("{p}/")).collect::<String>()
            )
        };
        return Err(PackageError::ManyRoots(show(&root), show(&other)));
    }
    Ok(root)
}

/// The package's `SKILL.md` text.
pub fn skill_md(files: &[SkillFile]) -> Result<&str, PackageError> {
    let file = files
        .iter()
        .find(|file| file.path == "SKILL.md")
        .ok_or(PackageError::NoSkillMd)?;
    std::str::from_utf8(&file.content).map_err(|_| PackageError::NotText)
}

/// The optional `agents/openai.yaml` of a package (the original's interface and policy).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PackageConfig {
    interface: PackageInterface,
    policy: HostPolicy,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PackageInterface {
    display_name: Option<String>,
    short_description: Option<String>,
}

fn package_config(files: &[SkillFile]) -> Result<PackageConfig, PackageError> {
    let Some(file) = files.iter().find(|f| f.path == "agents/openai.yaml") else {
        return Ok(PackageConfig::default());
    };
    serde_yaml::from_slice(&file.content).map_err(|error| PackageError::Config(error.to_string()))
}

fn host_policy(policy: &HostPolicy) -> SkillPolicy {
    let mut kinds = clean_list(policy.completion_requires_interaction_kinds.clone());
    kinds.sort();
    SkillPolicy {
        allow_implicit_invocation: policy.allow_implicit_invocation,
        completion_requires_interaction_kinds: kinds,
    }
}

/// A host skill whose package is `bytes`: verified against what the provider declared and
/// unpacked; the package's `SKILL.md` (and `agents/openai.yaml`) describe the skill, the
/// provider's fields fill what they leave out, and the policies of both apply.
pub(crate) fn definition(skill: HostSkill, bytes: &[u8]) -> Result<SkillDefinition, PackageError> {
    verify(bytes, skill.package_size, skill.package_checksum.as_deref())?;
    let files = unpack(bytes)?;
    let key = skill.key.trim().to_string();
    let own = parse_skill_md(
        skill_md(&files)?,
        &format!("package {key}/SKILL.md"),
        SourceKind::Workspace,
    )?;
    let config = package_config(&files)?;
    let contracts = [
        skill.policy.interaction_contracts.clone(),
        config.policy.interaction_contracts.clone(),
    ]
    .concat();
    if let Some(transport) = foreign_transport(&contracts) {
        return Err(PackageError::Transport(transport));
    }
    let mut policy = host_policy(&skill.policy);
    policy.merge(&own.policy);
    policy.merge(&host_policy(&config.policy));
    let text = |value: Option<String>| {
        value
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let title = text(config.interface.display_name)
        .or_else(|| (own.title != own.key).then(|| own.title.clone()))
        .or_else(|| text(Some(skill.title.clone())))
        .unwrap_or_else(|| key.clone());
    let either = |own: Vec<String>, host: Vec<String>| {
        if own.is_empty() {
            clean_list(host)
        } else {
            own
        }
    };
    Ok(SkillDefinition {
        title,
        description: text(config.interface.short_description).unwrap_or(own.description),
        instructions: own.instructions,
        required_tools: either(own.required_tools, skill.required_tools),
        runtimes: either(own.runtimes, skill.supported_runtimes),
        policy,
        includes: Vec::new(),
        source: SourceKind::Workspace,
        skill_id: skill.id.trim().to_string(),
        version_key: skill.version_key.trim().to_string(),
        files: std::sync::Arc::new(files),
        key,
    })
}

#[cfg(test)]
pub(crate) mod tests;
