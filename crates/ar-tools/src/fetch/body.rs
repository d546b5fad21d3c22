//! What `fetch_url` makes of a response body: HTML as readable text, JSON and other text as
//! they are, anything else refused (it can only go to an `output_path`); text for the model cut
//! at a cap.

/// How a body is handled, by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Html,
    Json,
    Text,
    Binary,
}

impl Kind {
    pub(crate) fn of(content_type: &str) -> Kind {
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match mime.as_str() {
            "text/html" | "application/xhtml+xml" => Kind::Html,
            "application/json" => Kind::Json,
            m if m.ends_with("+json") => Kind::Json,
            "" => Kind::Text,
            m if m.starts_with("text/") => Kind::Text,
            "application/xml" | "application/javascript" | "application/x-yaml" => Kind::Text,
            m if m.ends_with("+xml") => Kind::Text,
            _ => Kind::Binary,
        }
    }
}

/// `text` cut to at most `cap` bytes on a character boundary, and whether it was cut.
pub(crate) fn cap_text(text: String, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let mut cut = cap;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    (text[..cut].to_string(), true)
}

/// The readable text of an HTML page: no tags, comments, scripts or styles; block elements on
/// lines of their own; the common entities decoded; runs of blanks collapsed.
pub(crate) fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        push_text(&mut out, &rest[..open]);
        rest = &rest[open..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(close) = rest.find('>') else {
            rest = "";
            break;
        };
        let closing = rest[1..close].starts_with('/');
        let tag = rest[1..close].trim_start_matches('/').to_ascii_lowercase();
        let name = tag
            .split(|c: char| c.is_whitespace() || c == '/')
            .next()
            .unwrap_or("");
        rest = &rest[close + 1..];
        if !closing && matches!(name, "script" | "style" | "noscript" | "template" | "head") {
            let end = format!("</{name}");
            let lower = rest.to_ascii_lowercase();
            rest = lower.find(&end).map_or("", |at| &rest[at..]);
            continue;
        }
        if is_block(name) {
            out.push('\n');
        }
    }
    push_text(&mut out, rest);
    tidy(&out)
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "br"
            | "li"
            | "ul"
            | "ol"
            | "tr"
            | "table"
            | "section"
            | "article"
            | "header"
            | "footer"
            | "nav"
            | "main"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "pre"
            | "blockquote"
            | "hr"
            | "title"
            | "dt"
            | "dd"
    )
}

fn push_text(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let entity = rest[1..]
            .find(';')
            .filter(|end| *end <= 8)
            .and_then(|end| decode(&rest[1..=end]).map(|c| (c, end + 2)));
        match entity {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
}

fn decode(entity: &str) -> Option<char> {
    match entity {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => {
            let number = entity.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

/// Blanks collapsed within lines, blank lines dropped.
fn tidy(text: &str) -> String {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_readable_text() {
        let html = "<html><head><title>T</title><style>p{color:red}</style></head><body>\
            <h1>Hello &amp; welcome</h1><script>alert('x<p>')</script><!-- hidden -->\
            <p>One   <b>bold</b>&nbsp;word &#x263A; &lt;ok&gt;</p><ul><li>a</li><li>b</li></ul></body></html>";
        assert_eq!(
            html_to_text(html),
            "Hello & welcome\nOne bold word \u{263A} <ok>\na\nb"
        );
        assert_eq!(html_to_text("fish & chips <"), "fish & chips");
    }

    #[test]
    fn kinds_follow_the_content_type() {
        assert_eq!(Kind::of("text/html; charset=utf-8"), Kind::Html);
        assert_eq!(Kind::of("application/problem+json"), Kind::Json);
        assert_eq!(Kind::of("text/plain"), Kind::Text);
        assert_eq!(Kind::of("image/png"), Kind::Binary);
        assert_eq!(Kind::of("application/octet-stream"), Kind::Binary);
    }

    #[test]
    fn text_is_cut_on_a_character_boundary() {
        assert_eq!(cap_text("héllo".into(), 2), ("h".to_string(), true));
        assert_eq!(cap_text("abc".into(), 3), ("abc".to_string(), false));
    }
}
