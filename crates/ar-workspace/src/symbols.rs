//! `list_symbols`: an outline of a source file's declarations with their line ranges.
//!
//! Declarations are found line by line with a few patterns per language family; a range
//! ends at the brace that closes the declaration's first `{` (brace languages) or where the
//! indentation returns to the declaration's (Python). It is an outline for reading, not a
//! parser: braces inside strings are skipped only for plain `"…"` strings and `//` comments.

use std::sync::LazyLock;

use ar_core::tool::ToolOutput;
use regex::Regex;
use serde::Deserialize;
use serde_json::json;

use crate::error::{ToolError, ToolResult};
use crate::fs::display;
use crate::host::{single_repository, Inner};
use crate::read::looks_binary;

/// Declarations listed at most.
const MAX_SYMBOLS: usize = 500;

#[derive(Deserialize)]
pub(crate) struct SymbolsInput {
    #[serde(default)]
    path: String,
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rust,
    Go,
    Python,
    Script,
    CLike,
}

struct Pattern {
    regex: Regex,
    kind: &'static str,
}

fn patterns(list: &[(&'static str, &str)]) -> Vec<Pattern> {
    list.iter()
        .filter_map(|(kind, source)| Regex::new(source).ok().map(|regex| Pattern { regex, kind }))
        .collect()
}

static RUST: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let vis = r"^\s*(?:pub(?:\([^)]*\))?\s+)?";
    patterns(&[
        (
            "function",
            &format!(
                r#"{vis}(?:default\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+(?P<name>\w+)"#
            ),
        ),
        ("struct", &format!(r"{vis}struct\s+(?P<name>\w+)")),
        ("enum", &format!(r"{vis}enum\s+(?P<name>\w+)")),
        (
            "trait",
            &format!(r"{vis}(?:unsafe\s+)?trait\s+(?P<name>\w+)"),
        ),
        ("type", &format!(r"{vis}type\s+(?P<name>\w+)")),
        ("module", &format!(r"{vis}mod\s+(?P<name>\w+)")),
        (
            "impl",
            r"^\s*(?:unsafe\s+)?impl(?:<[^{]*?>)?\s+(?P<name>[\w:<>, ]+?)\s*(?:\{|where|$)",
        ),
        ("macro", r"^\s*macro_rules!\s*(?P<name>\w+)"),
    ])
});

static GO: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    patterns(&[
        ("method", r"^func\s+\([^)]*\)\s*(?P<name>\w+)"),
        ("function", r"^func\s+(?P<name>\w+)"),
        ("type", r"^type\s+(?P<name>\w+)"),
    ])
});

static PYTHON: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    patterns(&[
        ("function", r"^\s*(?:async\s+)?def\s+(?P<name>\w+)"),
        ("class", r"^\s*class\s+(?P<name>\w+)"),
    ])
});

static SCRIPT: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let export = r"^\s*(?:export\s+)?(?:default\s+)?";
    patterns(&[
        (
            "function",
            &format!(r"{export}(?:async\s+)?function\s*\*?\s*(?P<name>\w+)"),
        ),
        (
            "class",
            &format!(r"{export}(?:abstract\s+)?class\s+(?P<name>\w+)"),
        ),
        ("interface", &format!(r"{export}interface\s+(?P<name>\w+)")),
        ("type", &format!(r"{export}(?:type|enum)\s+(?P<name>\w+)")),
        (
            "function",
            &format!(
                r"{export}(?:const|let|var)\s+(?P<name>\w+)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|\w+\s*=>)"
            ),
        ),
        (
            "method",
            r"^\s+(?:(?:public|private|protected|static|async|readonly|override|get|set)\s+)*(?P<name>\w+)\s*\([^)]*\)\s*(?::[^{]+)?\{\s*$",
        ),
    ])
});

static CLIKE: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let modifiers = r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|sealed|partial|open|override|virtual|inline|extern|export|data)\s+)*";
    patterns(&[
        ("class", &format!(r"{modifiers}class\s+(?P<name>\w+)")),
        (
            "interface",
            &format!(r"{modifiers}interface\s+(?P<name>\w+)"),
        ),
        (
            "enum",
            &format!(r"{modifiers}enum\s+(?:class\s+)?(?P<name>\w+)"),
        ),
        ("struct", &format!(r"{modifiers}struct\s+(?P<name>\w+)")),
        (
            "function",
            &format!(r"{modifiers}(?:fun|func)\s+(?P<name>\w+)"),
        ),
        (
            "function",
            &format!(
                r"{modifiers}(?:synchronized\s+|native\s+|const\s+|unsigned\s+)*[\w:<>\[\],*&]+[\s*&]+(?P<name>\w+)\s*\([^;]*$"
            ),
        ),
    ])
});

const CONTROL_WORDS: &[&str] = &[
    "if", "for", "while", "switch", "catch", "return", "else", "do", "new", "sizeof", "elif",
];

fn family(path: &str) -> Option<Family> {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "rs" => Family::Rust,
        "go" => Family::Go,
        "py" | "pyi" => Family::Python,
        "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts" => Family::Script,
        "java" | "kt" | "kts" | "cs" | "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh"
        | "swift" | "scala" | "dart" => Family::CLike,
        _ => return None,
    })
}

struct Symbol {
    kind: &'static str,
    name: String,
    start: usize,
    end: usize,
}

pub(crate) fn list_symbols(inner: &Inner, input: SymbolsInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    // Opened first: a path that leads outside is refused as such, whatever its extension.
    let (data, _) = inner.root.read_all(&input.path)?;
    let Some(family) = family(&input.path) else {
        return Err(ToolError::new(format!(
            "list_symbols does not know the language of {}; it reads .rs, .go, .py, .js/.ts, .java, .kt, .cs, .c/.cpp/.h, .swift",
            display(&input.path)
        )));
    };
    if looks_binary(&data) {
        return Err(ToolError::new(format!(
            "{} appears to be binary",
            display(&input.path)
        )));
    }
    let text = String::from_utf8_lossy(&data);
    let lines: Vec<&str> = text.lines().collect();
    let symbols = outline(family, &lines);
    if symbols.is_empty() {
        return Ok(ToolOutput::text(format!(
            "No declarations found in {}.",
            display(&input.path)
        )));
    }
    let mut out: Vec<String> = symbols
        .iter()
        .take(MAX_SYMBOLS)
        .map(|s| format!("{} {} (lines {}-{})", s.kind, s.name, s.start, s.end))
        .collect();
    if symbols.len() > MAX_SYMBOLS {
        out.push(format!(
            "[{} more declarations not shown]",
            symbols.len() - MAX_SYMBOLS
        ));
    }
    let structured: Vec<_> = symbols
        .iter()
        .take(MAX_SYMBOLS)
        .map(|s| json!({"kind": s.kind, "name": s.name, "start_line": s.start, "end_line": s.end}))
        .collect();
    let mut output = ToolOutput::text(out.join("\n"));
    output.structured = Some(json!({"path": input.path, "symbols": structured}));
    Ok(output)
}

fn outline(family: Family, lines: &[&str]) -> Vec<Symbol> {
    let table: &[Pattern] = match family {
        Family::Rust => &RUST,
        Family::Go => &GO,
        Family::Python => &PYTHON,
        Family::Script => &SCRIPT,
        Family::CLike => &CLIKE,
    };
    let mut out = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") || (trimmed.starts_with('#') && family != Family::Python) {
            continue;
        }
        let Some((kind, name)) = table.iter().find_map(|p| {
            let found = p.regex.captures(line)?;
            let name = found.name("name")?.as_str().trim().to_string();
            // `if (…) {` looks like a declaration to the C-like and script patterns.
            let control = matches!(family, Family::CLike | Family::Script)
                && CONTROL_WORDS.contains(&name.as_str());
            (!control).then_some((p.kind, name))
        }) else {
            continue;
        };
        let end = match family {
            Family::Python => indented_end(lines, index),
            _ => braced_end(lines, index),
        };
        out.push(Symbol {
            kind,
            name,
            start: index + 1,
            end: end + 1,
        });
    }
    out
}

/// The line of the brace closing the first `{` at or after `start` (the start line itself
/// when a `;` ends the declaration first).
fn braced_end(lines: &[&str], start: usize) -> usize {
    let mut depth = 0usize;
    let mut opened = false;
    for (index, line) in lines.iter().enumerate().skip(start) {
        let mut in_string = false;
        let mut previous = '\0';
        for c in line.chars() {
            match c {
                '"' if previous != '\\' => in_string = !in_string,
                '/' if !in_string && previous == '/' => break,
                '{' if !in_string => {
                    depth += 1;
                    opened = true;
                }
                '}' if !in_string && depth > 0 => {
                    depth -= 1;
                    if opened && depth == 0 {
                        return index;
                    }
                }
                ';' if !in_string && !opened => return index,
                _ => {}
            }
            previous = c;
        }
        if index > start + 5000 {
            break;
        }
    }
    start
}

/// The last line of a Python block: before the next non-blank line indented no deeper
/// than the declaration.
fn indented_end(lines: &[&str], start: usize) -> usize {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let own = indent(lines[start]);
    let mut end = start;
    for (index, line) in lines.iter().enumerate().skip(start + 1) {
        if line.trim().is_empty() {
            continue;
        }
        if indent(line) <= own {
            break;
        }
        end = index;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_outline_has_ranges() {
        let src = "pub struct A {\n    x: u8,\n}\n\nimpl A {\n    pub fn new() -> Self {\n        A { x: 0 }\n    }\n}\n";
        let lines: Vec<&str> = src.lines().collect();
        let found: Vec<_> = outline(Family::Rust, &lines)
            .into_iter()
            .map(|s| (s.kind, s.name, s.start, s.end))
            .collect();
        assert_eq!(
            found,
            vec![
                ("struct", "A".to_string(), 1, 3),
                ("impl", "A".to_string(), 5, 9),
                ("function", "new".to_string(), 6, 8),
            ]
        );
    }

    #[test]
    fn python_blocks_end_with_their_indentation() {
        let src = "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        pass\nx = 1\n";
        let lines: Vec<&str> = src.lines().collect();
        let found: Vec<_> = outline(Family::Python, &lines)
            .into_iter()
            .map(|s| (s.name, s.start, s.end))
            .collect();
        assert_eq!(
            found,
            vec![
                ("A".to_string(), 1, 6),
                ("f".to_string(), 2, 3),
                ("g".to_string(), 5, 6)
            ]
        );
    }

    #[test]
    fn every_pattern_compiles() {
        let tables = [
            (&*RUST, 8),
            (&*GO, 3),
            (&*PYTHON, 2),
            (&*SCRIPT, 6),
            (&*CLIKE, 6),
        ];
        for (table, expected) in tables {
            assert_eq!(table.len(), expected);
        }
    }

    #[test]
    fn go_methods_and_functions() {
        let src = "package x\n\nfunc (s *S) Run() error {\n\treturn nil\n}\n\nfunc main() {\n}\n";
        let lines: Vec<&str> = src.lines().collect();
        let found: Vec<_> = outline(Family::Go, &lines)
            .into_iter()
            .map(|s| (s.kind, s.name, s.start, s.end))
            .collect();
        assert_eq!(
            found,
            vec![
                ("method", "Run".to_string(), 3, 5),
                ("function", "main".to_string(), 7, 8)
            ]
        );
    }
}
