//! `apply_patch`: several file changes in the `*** Begin Patch` format.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path        followed by '+' lines (the new file's content)
//! *** Delete File: path
//! *** Update File: path
//! *** Move to: new/path     (optional)
//! @@ optional header        hunks of ' ' context, '-' removed and '+' added lines
//! *** End Patch
//! ```
//!
//! The whole patch is parsed and planned first: every path resolved, every file to change
//! read through the stale-file checks, every hunk's old lines found exactly once in the file
//! (as changed by the hunks before it). Only then is anything written, so a patch that does
//! not check out changes nothing.

use std::collections::HashSet;

use ar_core::tool::ToolOutput;
use serde::Deserialize;

use crate::error::{ToolError, ToolResult};
use crate::fs::display;
use crate::host::Inner;
use crate::read::looks_binary;
use crate::state::{key, Need};
use crate::write::{diff, replaceable};

#[derive(Deserialize)]
pub(crate) struct PatchInput {
    #[serde(default)]
    patch: String,
}

#[derive(Debug, PartialEq)]
enum Op {
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

#[derive(Debug, Default, PartialEq)]
struct Hunk {
    old: Vec<String>,
    new: Vec<String>,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

fn is_boundary(line: &str) -> bool {
    line == END || line.starts_with(ADD) || line.starts_with(DELETE) || line.starts_with(UPDATE)
}

fn named(line: &str, prefix: &str, what: &str) -> ToolResult<String> {
    let path = line[prefix.len()..].trim();
    if path.is_empty() {
        return Err(ToolError::new(format!("{what} needs a path")));
    }
    Ok(path.to_string())
}

fn parse(text: &str) -> ToolResult<Vec<Op>> {
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.trim().lines().collect();
    if lines.first().map(|l| l.trim_end()) != Some(BEGIN) {
        return Err(ToolError::new(format!("a patch starts with {BEGIN}")));
    }
    let mut ops = Vec::new();
    let mut at = 1;
    while at < lines.len() {
        let line = lines[at].trim_end();
        if line.is_empty() {
            at += 1;
        } else if line == END {
            return if ops.is_empty() {
                Err(ToolError::new("the patch has no file operations"))
            } else {
                Ok(ops)
            };
        } else if line.starts_with(ADD) {
            let path = named(line, ADD, "*** Add File")?;
            let (added, next) = parse_added(&lines, at + 1, &path)?;
            ops.push(Op::Add { path, lines: added });
            at = next;
        } else if line.starts_with(DELETE) {
            ops.push(Op::Delete {
                path: named(line, DELETE, "*** Delete File")?,
            });
            at += 1;
        } else if line.starts_with(UPDATE) {
            let (op, next) = parse_update(&lines, at)?;
            ops.push(op);
            at = next;
        } else {
            return Err(ToolError::new(format!(
                "unexpected line {} in the patch",
                at + 1
            )));
        }
    }
    Err(ToolError::new(format!("the patch does not end with {END}")))
}

fn parse_added(lines: &[&str], mut at: usize, path: &str) -> ToolResult<(Vec<String>, usize)> {
    let mut added = Vec::new();
    while at < lines.len() && !is_boundary(lines[at].trim_end()) {
        let line = lines[at];
        if let Some(rest) = line.strip_prefix('+') {
            added.push(rest.to_string());
        } else if line.trim_end() != END_OF_FILE && !line.trim().is_empty() {
            return Err(ToolError::new(format!(
                "the content of an added file is '+' lines (line {} for {path})",
                at + 1
            )));
        }
        at += 1;
    }
    Ok((added, at))
}

fn parse_update(lines: &[&str], at: usize) -> ToolResult<(Op, usize)> {
    let path = named(lines[at].trim_end(), UPDATE, "*** Update File")?;
    let mut at = at + 1;
    let mut move_to = None;
    if let Some(line) = lines.get(at).filter(|l| l.starts_with(MOVE)) {
        move_to = Some(named(line.trim_end(), MOVE, "*** Move to")?);
        at += 1;
    }
    let mut hunks: Vec<Hunk> = Vec::new();
    while at < lines.len() && !is_boundary(lines[at].trim_end()) {
        let line = lines[at];
        at += 1;
        if line.starts_with("@@") {
            hunks.push(Hunk::default());
            continue;
        }
        if line.trim_end() == END_OF_FILE {
            continue;
        }
        let Some(hunk) = hunks.last_mut() else {
            if line.trim().is_empty() {
                continue;
            }
            return Err(ToolError::new(format!(
                "expected an @@ hunk header for {path} at line {at}"
            )));
        };
        match line.chars().next() {
            // A blank line is an empty context line (models often drop its space).
            None => push_both(hunk, ""),
            Some(' ') => push_both(hunk, &line[1..]),
            Some('-') => hunk.old.push(line[1..].to_string()),
            Some('+') => hunk.new.push(line[1..].to_string()),
            Some(_) => {
                return Err(ToolError::new(format!(
                    "line {at} of the hunk for {path} must start with ' ', '-' or '+'"
                )))
            }
        }
    }
    for hunk in &mut hunks {
        // Blank lines between operations are not context.
        while hunk.old.last().is_some_and(String::is_empty)
            && hunk.new.last().is_some_and(String::is_empty)
        {
            hunk.old.pop();
            hunk.new.pop();
        }
    }
    if hunks.is_empty() {
        return Err(ToolError::new(format!(
            "the update of {path} has no @@ hunk"
        )));
    }
    if hunks.iter().any(|h| h.old.is_empty()) {
        return Err(ToolError::new(format!(
            "every hunk for {path} needs context or removed lines to find its place"
        )));
    }
    Ok((
        Op::Update {
            path,
            move_to,
            hunks,
        },
        at,
    ))
}

fn push_both(hunk: &mut Hunk, line: &str) {
    hunk.old.push(line.to_string());
    hunk.new.push(line.to_string());
}

/// Applies hunks in order; each one's old lines must occur exactly once.
fn apply_hunks(content: &str, path: &str, hunks: &[Hunk]) -> ToolResult<String> {
    let crlf = content.contains("\r\n");
    let trailing_newline = content.ends_with('\n');
    let body = content.strip_suffix('\n').unwrap_or(content);
    let mut lines: Vec<String> = if content.is_empty() {
        Vec::new()
    } else {
        body.split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
            .collect()
    };
    for (n, hunk) in hunks.iter().enumerate() {
        let places: Vec<usize> = (0..=lines.len().saturating_sub(hunk.old.len()))
            .filter(|&at| {
                at + hunk.old.len() <= lines.len() && lines[at..at + hunk.old.len()] == hunk.old[..]
            })
            .take(2)
            .collect();
        let at = match places.as_slice() {
            [at] => *at,
            [] => {
                return Err(ToolError::new(format!(
                "hunk {} does not match {}; read the file again and refresh the patch's context",
                n + 1,
                display(path)
            )))
            }
            _ => {
                return Err(ToolError::new(format!(
                    "hunk {} matches several places in {}; add context lines so it matches one",
                    n + 1,
                    display(path)
                )))
            }
        };
        lines.splice(at..at + hunk.old.len(), hunk.new.iter().cloned());
    }
    let newline = if crlf { "\r\n" } else { "\n" };
    let mut out = lines.join(newline);
    if trailing_newline && !out.is_empty() {
        out.push_str(newline);
    }
    Ok(out)
}

/// One planned change, checked and ready to write.
enum Planned {
    Write {
        path: String,
        content: String,
        old: Option<String>,
    },
    Remove {
        path: String,
    },
    Move {
        from: String,
        to: String,
        content: String,
        old: String,
    },
}

fn claim(seen: &mut HashSet<String>, path: &str) -> ToolResult<()> {
    if !seen.insert(key(path)) {
        return Err(ToolError::new(format!(
            "the patch changes {} more than once",
            display(path)
        )));
    }
    Ok(())
}

fn read_checked(inner: &Inner, path: &str) -> ToolResult<String> {
    if !replaceable(inner.root.lstat_kind(path)?, path)? {
        return Err(ToolError::new(format!("{} does not exist", display(path))));
    }
    let (data, meta) = inner.root.read_all(path)?;
    inner.reads.check(path, &meta, &data, Need::Read)?;
    if looks_binary(&data) {
        return Err(ToolError::new(format!(
            "{} appears to be binary; it is not patched",
            display(path)
        )));
    }
    String::from_utf8(data)
        .map_err(|_| ToolError::new(format!("{} is not UTF-8 text", display(path))))
}

fn plan(inner: &Inner, ops: Vec<Op>) -> ToolResult<Vec<Planned>> {
    let mut seen = HashSet::new();
    let mut planned = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Op::Add { path, lines } => {
                claim(&mut seen, &path)?;
                if inner.root.lstat_kind(&path)?.is_some() {
                    return Err(ToolError::new(format!(
                        "cannot add {}: it already exists",
                        display(&path)
                    )));
                }
                let mut content = lines.join("\n");
                if !lines.is_empty() {
                    content.push('\n');
                }
                planned.push(Planned::Write {
                    path,
                    content,
                    old: None,
                });
            }
            Op::Delete { path } => {
                claim(&mut seen, &path)?;
                read_checked(inner, &path)?;
                planned.push(Planned::Remove { path });
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                claim(&mut seen, &path)?;
                let old = read_checked(inner, &path)?;
                let content = apply_hunks(&old, &path, &hunks)?;
                match move_to.filter(|to| key(to) != key(&path)) {
                    None => planned.push(Planned::Write {
                        path,
                        content,
                        old: Some(old),
                    }),
                    Some(to) => {
                        claim(&mut seen, &to)?;
                        if inner.root.lstat_kind(&to)?.is_some() {
                            return Err(ToolError::new(format!(
                                "cannot move {} to {}: it already exists",
                                display(&path),
                                display(&to)
                            )));
                        }
                        planned.push(Planned::Move {
                            from: path,
                            to,
                            content,
                            old,
                        });
                    }
                }
            }
        }
    }
    Ok(planned)
}

fn apply_one(inner: &Inner, change: &Planned, report: &mut Vec<String>) -> ToolResult<()> {
    match change {
        Planned::Write { path, content, old } => {
            let meta = inner.root.write_replace(path, content.as_bytes())?;
            inner
                .reads
                .record_write(path, &meta, content.as_bytes(), "apply_patch");
            report.push(match old {
                None => format!("A {path}"),
                Some(old) => format!("M {path}\n{}", diff(path, old, content)),
            });
        }
        Planned::Remove { path } => {
            inner.root.remove_file(path)?;
            inner.reads.forget(path);
            report.push(format!("D {path}"));
        }
        Planned::Move {
            from,
            to,
            content,
            old,
        } => {
            inner.root.rename_new(from, to)?;
            inner.reads.forget(from);
            let meta = inner.root.write_replace(to, content.as_bytes())?;
            inner
                .reads
                .record_write(to, &meta, content.as_bytes(), "apply_patch");
            report.push(format!("R {from} -> {to}\n{}", diff(to, old, content)));
        }
    }
    Ok(())
}

pub(crate) fn apply_patch(inner: &Inner, input: PatchInput) -> ToolResult<ToolOutput> {
    if input.patch.trim().is_empty() {
        return Err(ToolError::new("patch is required"));
    }
    let ops = parse(&input.patch)?;
    let _guard = inner.mutation_guard();
    let planned = plan(inner, ops)?;
    let mut report = Vec::with_capacity(planned.len());
    for change in &planned {
        if let Err(error) = apply_one(inner, change, &mut report) {
            let done: Vec<&str> = report
                .iter()
                .map(|r| r.lines().next().unwrap_or(""))
                .collect();
            return Err(ToolError::new(if done.is_empty() {
                format!("the patch was not applied: {error}")
            } else {
                format!(
                    "the patch was applied in part ({}), then failed: {error}",
                    done.join(", ")
                )
            }));
        }
    }
    Ok(ToolOutput::text(format!(
        "Applied the patch to {} file(s):\n{}",
        report.len(),
        report.join("\n")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operation() {
        let text = "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: d.txt\n@@ fn x\n context\n-old\n+new\n*** End of File\n*** End Patch\n";
        let ops = parse(text).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            Op::Add {
                path: "a.txt".into(),
                lines: vec!["one".into(), "two".into()]
            }
        );
        assert_eq!(
            ops[1],
            Op::Delete {
                path: "b.txt".into()
            }
        );
        assert_eq!(
            ops[2],
            Op::Update {
                path: "c.txt".into(),
                move_to: Some("d.txt".into()),
                hunks: vec![Hunk {
                    old: vec!["context".into(), "old".into()],
                    new: vec!["context".into(), "new".into()]
                }],
            }
        );
    }

    #[test]
    fn refuses_bad_patches() {
        assert!(parse("nothing").is_err());
        assert!(parse("*** Begin Patch\n*** Update File: a\n-x\n*** End Patch").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: a\n+x\n").is_err());
        assert!(parse("*** Begin Patch\n*** End Patch").is_err());
    }

    #[test]
    fn hunks_need_a_unique_place() {
        let hunk = |old: &[&str], new: &[&str]| Hunk {
            old: old.iter().map(|s| s.to_string()).collect(),
            new: new.iter().map(|s| s.to_string()).collect(),
        };
        let out = apply_hunks("a\nb\nc\n", "f", &[hunk(&["b"], &["B"])]).unwrap();
        assert_eq!(out, "a\nB\nc\n");
        let crlf = apply_hunks("a\r\nb\r\n", "f", &[hunk(&["a"], &["A", "A2"])]).unwrap();
        assert_eq!(crlf, "A\r\nA2\r\nb\r\n");
        assert!(apply_hunks("x\nx\n", "f", &[hunk(&["x"], &["y"])])
            .unwrap_err()
            .0
            .contains("several"));
        assert!(apply_hunks("x\n", "f", &[hunk(&["z"], &["y"])])
            .unwrap_err()
            .0
            .contains("does not match"));
    }
}
