//! The workspace tools' definitions: the contract's names, arguments, limits and mutating
//! flags, described in our own words.

use ar_core::tool::ToolDefinition;
use serde_json::{json, Value};

use crate::Access;

/// Lines `read_file` returns by default, and at most.
pub const READ_FILE_DEFAULT_LINES: usize = 120;
pub const READ_FILE_MAX_LINES: usize = 240;
/// `read_files`: files per call, lines per file by default and at most, lines in all.
pub const READ_FILES_MAX_FILES: usize = 4;
pub const READ_FILES_DEFAULT_LINES: usize = 60;
pub const READ_FILES_MAX_LINES: usize = 120;
pub const READ_FILES_TOTAL_LINES: usize = 320;
/// `ripgrep` and `grep` results by default and at most; `ripgrep` context lines at most.
pub const SEARCH_DEFAULT_RESULTS: usize = 50;
pub const SEARCH_MAX_RESULTS: usize = 200;
pub const SEARCH_MAX_CONTEXT: usize = 5;

/// The names of the tools this crate offers, read tools first.
pub const TOOL_NAMES: &[&str] = &[
    "read_file",
    "read_files",
    "read_file_range",
    "list_directory",
    "search_files",
    "ripgrep",
    "grep",
    "list_symbols",
    "write_file",
    "edit_file",
    "apply_patch",
    "run_command",
];

/// Tools that change the workspace (all but `run_command` are left out of a read-only
/// workspace's catalogue; `run_command` stays, in its read-only variant).
pub(crate) const FILE_MUTATIONS: &[&str] = &["write_file", "edit_file", "apply_patch"];

fn def(name: &str, description: &str, mutating: bool, schema: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_string(),
        description: description.to_string(),
        category: "Workspace".to_string(),
        input_schema: schema,
        mutating,
        risk_level: None,
        supported_target_types: Vec::new(),
    }
}

fn path_prop(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what} relative to the workspace root")})
}

fn repository_prop() -> Value {
    json!({"type": "string", "description": "Repository alias when several are checked out; leave out for the workspace itself."})
}

/// The catalogue for a workspace of this access mode.
pub(crate) fn definitions(access: Access) -> Vec<ToolDefinition> {
    let mut out = read_definitions();
    out.extend(search_definitions());
    if access == Access::ReadWrite {
        out.extend(mutation_definitions());
    }
    out.push(run_command_definition(access));
    out
}

fn read_definitions() -> Vec<ToolDefinition> {
    vec![
        def(
            "read_file",
            "Read numbered lines of a text file. Reads 120 lines from offset_line by default (at most 240); when more remain, the output says which offset_line to continue from.",
            false,
            json!({"type": "object", "properties": {
                "path": path_prop("File path"),
                "offset_line": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Defaults to 1."},
                "limit_lines": {"type": "integer", "minimum": 1, "maximum": READ_FILE_MAX_LINES, "description": "Lines to read. Defaults to 120, at most 240."},
                "repository": repository_prop()
            }, "required": ["path"]}),
        ),
        def(
            "read_files",
            "Read numbered excerpts of up to 4 files in one call: 60 lines each by default, at most 120 each and 320 in all. Continue a file from its next_start_line when has_more is true.",
            false,
            json!({"type": "object", "properties": {
                "files": {"type": "array", "minItems": 1, "maxItems": READ_FILES_MAX_FILES, "items": {
                    "type": "object", "properties": {
                        "path": path_prop("File path"),
                        "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based). Defaults to 1."},
                        "limit_lines": {"type": "integer", "minimum": 1, "maximum": READ_FILES_MAX_LINES, "description": "Lines to read from this file. Defaults to 60, at most 120."},
                        "repository": repository_prop()
                    }, "required": ["path"]}}
            }, "required": ["files"]}),
        ),
        def(
            "read_file_range",
            "Read the numbered lines start_line through end_line of a text file (at most 240 lines).",
            false,
            json!({"type": "object", "properties": {
                "path": path_prop("File path"),
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
                "repository": repository_prop()
            }, "required": ["path", "start_line", "end_line"]}),
        ),
        def(
            "list_directory",
            "List a directory's entries: directories end with '/', symbolic links with '@'.",
            false,
            json!({"type": "object", "properties": {
                "path": path_prop("Directory path (empty for the root)"),
                "repository": repository_prop()
            }, "required": ["path"]}),
        ),
        def(
            "list_symbols",
            "Outline a source file: its functions, methods, types and classes with their line ranges (Rust, Go, Python, JavaScript/TypeScript, Java, C-like languages).",
            false,
            json!({"type": "object", "properties": {
                "path": path_prop("File path"),
                "repository": repository_prop()
            }, "required": ["path"]}),
        ),
    ]
}

fn search_definitions() -> Vec<ToolDefinition> {
    vec![
        def(
            "search_files",
            "Find files whose path matches a glob (for example **/*.rs; * stays within one directory). With query, list the lines of those files that contain it literally.",
            false,
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "Glob over paths relative to the workspace root."},
                "query": {"type": "string", "description": "Optional text the matching files' lines must contain."},
                "path": path_prop("Optional directory to search in"),
                "repository": repository_prop()
            }, "required": ["pattern"]}),
        ),
        def(
            "ripgrep",
            "Search file contents with a regular expression, the way ripgrep does: .gitignore rules and hidden files respected, binary files skipped. Results are path:line:text, context lines path-line-text.",
            false,
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "Regular expression (or literal text with fixed_strings)."},
                "path": path_prop("Optional file or directory to search"),
                "file_type": {"type": "string", "description": "Optional ripgrep file type, such as rust, go, py, ts, java."},
                "context_lines": {"type": "integer", "minimum": 0, "maximum": SEARCH_MAX_CONTEXT, "description": "Lines of context around each match, 0-5."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX_RESULTS, "description": "Result lines returned. Defaults to 50, at most 200."},
                "case_insensitive": {"type": "boolean"},
                "fixed_strings": {"type": "boolean", "description": "Treat pattern as literal text."},
                "repository": repository_prop()
            }, "required": ["pattern"]}),
        ),
        def(
            "grep",
            "Search file contents with a regular expression in every file (hidden and ignored files too, but not .git, node_modules, vendor, dist or __pycache__), optionally only files whose name matches include.",
            false,
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "Regular expression."},
                "path": path_prop("Optional file or directory to search"),
                "include": {"type": "string", "description": "Optional glob on file names, such as *.go."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX_RESULTS, "description": "Defaults to 50, at most 200."},
                "repository": repository_prop()
            }, "required": ["pattern"]}),
        ),
    ]
}

fn mutation_definitions() -> Vec<ToolDefinition> {
    vec![
        def(
            "write_file",
            "Create a file, or replace a whole file this run has read completely. Parent directories are created. Prefer edit_file or apply_patch for changes to part of a file.",
            true,
            json!({"type": "object", "properties": {
                "path": path_prop("File path"),
                "content": {"type": "string", "description": "The file's full new content."}
            }, "required": ["path", "content"]}),
        ),
        def(
            "edit_file",
            "Replace one exact occurrence of old_string in a file this run has read. old_string must match exactly once (whitespace included); give enough context to make it unique.",
            true,
            json!({"type": "object", "properties": {
                "path": path_prop("File path"),
                "old_string": {"type": "string", "description": "Text to replace; must occur exactly once."},
                "new_string": {"type": "string", "description": "Replacement text (empty deletes)."}
            }, "required": ["path", "old_string", "new_string"]}),
        ),
        def(
            "apply_patch",
            "Apply edits to several files at once in the *** Begin Patch / *** End Patch format: *** Add File, *** Delete File, *** Update File (optionally *** Move to) with @@ hunks of ' ' context, '-' removed and '+' added lines. Each hunk's context must match exactly one place. Nothing is changed unless every operation checks out.",
            true,
            json!({"type": "object", "properties": {
                "patch": {"type": "string", "description": "The patch text, from *** Begin Patch to *** End Patch."}
            }, "required": ["patch"]}),
        ),
    ]
}

fn run_command_definition(access: Access) -> ToolDefinition {
    let description = match access {
        Access::ReadWrite => "Run an allow-listed program with arguments in the workspace (no shell: pipes, redirections and other shell syntax are refused). The command can write only inside the workspace; its output is cut to its last 50,000 bytes.",
        Access::ReadOnly => "Run an allow-listed read-only program with arguments in the workspace (no shell). The workspace is read-only: the kernel refuses any write to it.",
    };
    def(
        "run_command",
        description,
        true,
        json!({"type": "object", "properties": {
            "program": {"type": "string", "description": "Program name from the allow-list, such as cargo, go, npm, git, python3."},
            "args": {"type": "array", "items": {"type": "string"}, "description": "Arguments, one string each."},
            "working_directory": path_prop("Optional directory to run in"),
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 900, "description": "Defaults to 120."},
            "command": {"type": "string", "description": "Deprecated: a plain command line without shell operators; use program and args."}
        }}),
    )
}
