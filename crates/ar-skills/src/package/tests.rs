//! Unpacking and verification of skill packages: what a host's archive may not do.

use std::io::{Cursor, Write};

use zip::write::SimpleFileOptions;

use super::*;

const SKILL: &str = "---\nname: triage\ndescription: Triage an issue.\n---\nRead the issue first.";

/// A zip of `(name, content)` entries, deflated (resolution tests use it too).
pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, content) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn a_package_unpacks_beneath_its_skill_root() {
    let archive = zip_of(&[
        ("triage/SKILL.md", SKILL.as_bytes()),
        ("triage/scripts/check.sh", b"echo ok\n"),
        ("triage/./docs//guide.md", b"# Guide"),
        ("__MACOSX/triage/._SKILL.md", b"junk"),
    ]);
    let files = unpack(&archive).unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["SKILL.md", "docs/guide.md", "scripts/check.sh"]);
    assert_eq!(skill_md(&files).unwrap(), SKILL);
    let flat = unpack(&zip_of(&[("SKILL.md", SKILL.as_bytes()), ("a.txt", b"a")])).unwrap();
    assert_eq!(flat.len(), 2);
}

#[test]
fn escaping_names_are_refused() {
    for name in [
        "../SKILL.md",
        "triage/../../etc/passwd",
        "/etc/passwd",
        "C:/evil",
        "triage\\..\\evil",
        "tri\u{0}age/x",
        "a/b/c/d/e/f/g/h/i/deep.md",
    ] {
        let archive = zip_of(&[("SKILL.md", SKILL.as_bytes()), (name, b"x")]);
        let error = unpack(&archive).unwrap_err();
        assert!(
            matches!(error, PackageError::BadPath(_)),
            "{name:?}: {error}"
        );
    }
}

#[test]
fn links_and_encrypted_or_duplicate_entries_are_refused() {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    writer.start_file("SKILL.md", options).unwrap();
    writer.write_all(SKILL.as_bytes()).unwrap();
    writer
        .add_symlink("passwd", "/etc/passwd", options)
        .unwrap();
    let archive = writer.finish().unwrap().into_inner();
    let error = unpack(&archive).unwrap_err();
    assert!(
        matches!(error, PackageError::NotRegular(ref n) if n == "passwd"),
        "{error}"
    );

    let twice = zip_of(&[
        ("SKILL.md", SKILL.as_bytes()),
        ("x/a", b"1"),
        ("x//a", b"2"),
    ]);
    assert!(matches!(
        unpack(&twice).unwrap_err(),
        PackageError::Duplicate(_)
    ));
}

#[test]
fn caps_on_entries_and_sizes_hold() {
    let names: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("f{i}")).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("SKILL.md", SKILL.as_bytes())];
    entries.extend(names.iter().map(|n| (n.as_str(), b"x".as_slice())));
    let error = unpack(&zip_of(&entries)).unwrap_err();
    assert!(
        matches!(error, PackageError::TooManyEntries { .. }),
        "{error}"
    );

    // Zeros deflate to almost nothing: the cap is on what comes out, not what goes in.
    let big = vec![0u8; MAX_FILE_BYTES as usize + 1];
    let archive = zip_of(&[("SKILL.md", SKILL.as_bytes()), ("big.bin", &big)]);
    assert!(archive.len() < 64 * 1024);
    let error = unpack(&archive).unwrap_err();
    assert!(
        matches!(error, PackageError::FileTooLarge { .. }),
        "{error}"
    );

    let chunk = vec![0u8; MAX_FILE_BYTES as usize];
    let names: Vec<String> = (0..9).map(|i| format!("part{i}")).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("SKILL.md", SKILL.as_bytes())];
    entries.extend(names.iter().map(|n| (n.as_str(), chunk.as_slice())));
    let error = unpack(&zip_of(&entries)).unwrap_err();
    assert!(
        matches!(error, PackageError::TotalTooLarge { .. }),
        "{error}"
    );

    let huge = vec![7u8; MAX_PACKAGE_BYTES + 1];
    let error = verify(&huge, None, None).unwrap_err();
    assert!(matches!(error, PackageError::TooLarge { .. }), "{error}");
}

#[test]
fn a_package_needs_exactly_one_skill_md() {
    let none = zip_of(&[("triage/README.md", b"hi")]);
    assert!(matches!(
        unpack(&none).unwrap_err(),
        PackageError::NoSkillMd
    ));
    let two = zip_of(&[
        ("a/SKILL.md", SKILL.as_bytes()),
        ("b/SKILL.md", SKILL.as_bytes()),
    ]);
    let error = unpack(&two).unwrap_err().to_string();
    assert!(
        error.contains("\"a/SKILL.md\" and \"b/SKILL.md\""),
        "{error}"
    );
    assert!(matches!(
        unpack(b"not a zip at all").unwrap_err(),
        PackageError::NotZip(_)
    ));
}

#[test]
fn size_and_checksum_are_verified() {
    let archive = zip_of(&[("SKILL.md", SKILL.as_bytes())]);
    let sum = sha256(&archive);
    let len = archive.len() as i64;
    verify(&archive, Some(len), Some(&sum)).unwrap();
    verify(
        &archive,
        None,
        Some(&format!("SHA256:{}", sum.to_uppercase())),
    )
    .unwrap();
    verify(&archive, Some(0), Some(&sum[..12])).unwrap();
    verify(&archive, None, None).unwrap();

    let error = verify(&archive, Some(len + 1), Some(&sum)).unwrap_err();
    assert!(matches!(error, PackageError::Size { .. }), "{error}");
    let wrong = sha256(b"something else");
    let error = verify(&archive, Some(len), Some(&wrong))
        .unwrap_err()
        .to_string();
    assert!(error.contains("checksum mismatch"), "{error}");
    assert!(error.contains(&sum), "the actual digest is named: {error}");
    for bad in ["md5:abc", "xyz", &sum[..20]] {
        let error = verify(&archive, None, Some(bad)).unwrap_err();
        assert!(
            matches!(error, PackageError::ChecksumFormat(_)),
            "{bad}: {error}"
        );
    }
}
