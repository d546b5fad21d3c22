//! Re-indents raw JSON text the way Go's `json.MarshalIndent` writes it (two spaces, HTML-safe escapes), keeping key order.

/// Writes `raw` (valid JSON) compacted and re-indented by `indent` per level, starting at
/// `depth`. Inside strings `<`, `>`, `&`, U+2028 and U+2029 become `\u` escapes, as Go's encoder
/// writes them.
pub(crate) fn indent_into(out: &mut String, raw: &str, depth: usize, indent: &str) {
    let mut level = depth;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
                continue;
            }
            match c {
                '\\' => {
                    escaped = true;
                    out.push(c);
                }
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                '<' => out.push_str("\\u003c"),
                '>' => out.push_str("\\u003e"),
                '&' => out.push_str("\\u0026"),
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                _ => out.push(c),
            }
            continue;
        }
        match c {
            ' ' | '\t' | '\n' | '\r' => {}
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                skip_ws(&mut chars);
                if matches!(chars.peek(), Some('}') | Some(']')) {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    level += 1;
                    newline(out, level, indent);
                }
            }
            '}' | ']' => {
                level = level.saturating_sub(1);
                newline(out, level, indent);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(out, level, indent);
            }
            ':' => out.push_str(": "),
            _ => out.push(c),
        }
    }
}

fn skip_ws(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while matches!(chars.peek(), Some(' ' | '\t' | '\n' | '\r')) {
        chars.next();
    }
}

fn newline(out: &mut String, level: usize, indent: &str) {
    out.push('\n');
    for _ in 0..level {
        out.push_str(indent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indents_like_go() {
        let mut out = String::new();
        indent_into(
            &mut out,
            r#"{"b":1, "a":[ ],"c":{"x":"<&>"},"d":[1,2]}"#,
            0,
            "  ",
        );
        assert_eq!(
            out,
            "{\n  \"b\": 1,\n  \"a\": [],\n  \"c\": {\n    \"x\": \"\\u003c\\u0026\\u003e\"\n  },\n  \"d\": [\n    1,\n    2\n  ]\n}"
        );
    }
}
