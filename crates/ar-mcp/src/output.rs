//! An MCP tool result as the model reads it ([`tool_output`]): text contents joined, other
//! contents named in one line each, structured content kept, the whole bounded so a huge
//! result cannot blow up the transcript.

use ar_core::tool::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The most text of one result the model sees; the rest is cut with a marker.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// The model's view of a tool result.
pub fn tool_output(result: CallToolResult) -> ToolOutput {
    let mut text = BoundedText::new(MAX_OUTPUT_BYTES);
    for block in &result.content {
        text.push_part(&describe(block));
    }
    let (content, structured) = finish_with_structured(text, result.structured_content);
    ToolOutput {
        content,
        structured,
        is_error: result.is_error.unwrap_or(false),
    }
}

/// The text, and the structured content when it fits the limit (otherwise it is left out and
/// the text says so).
pub(crate) fn finish_with_structured(
    mut text: BoundedText,
    structured: Option<serde_json::Value>,
) -> (String, Option<serde_json::Value>) {
    let structured = structured.and_then(|value| {
        let size = serde_json::to_vec(&value).map(|bytes| bytes.len()).unwrap_or(0);
        if size > MAX_OUTPUT_BYTES {
            text.push_part(&format!(
                "[structured content left out: {size} bytes, over the {MAX_OUTPUT_BYTES} byte limit]"
            ));
            None
        } else {
            Some(value)
        }
    });
    (text.finish(), structured)
}

/// One content block as text.
fn describe(block: &ContentBlock) -> std::borrow::Cow<'_, str> {
    match block {
        ContentBlock::Text(text) => text.text.as_str().into(),
        ContentBlock::Image(image) => format!("[image: {}]", image.mime_type).into(),
        ContentBlock::Audio(audio) => format!("[audio: {}]", audio.mime_type).into(),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.as_str().into(),
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                "[resource: {uri} ({})]",
                mime_type.as_deref().unwrap_or("binary")
            )
            .into(),
            _ => "[resource]".into(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri).into(),
        _ => "[content of an unknown type]".into(),
    }
}

/// Text parts joined with new lines, kept to a byte budget.
pub(crate) struct BoundedText {
    text: String,
    budget: usize,
    cut: usize,
    first: bool,
}

impl BoundedText {
    pub(crate) fn new(budget: usize) -> Self {
        BoundedText {
            text: String::new(),
            budget,
            cut: 0,
            first: true,
        }
    }

    pub(crate) fn push_part(&mut self, part: &str) {
        if !std::mem::take(&mut self.first) {
            self.push("\n");
        }
        self.push(part);
    }

    fn push(&mut self, part: &str) {
        let room = self.budget - self.text.len();
        if self.cut > 0 || part.len() > room {
            let mut end = room.min(part.len());
            while !part.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&part[..end]);
            self.budget = self.text.len();
            self.cut += part.len() - end;
        } else {
            self.text.push_str(part);
        }
    }

    fn finish(mut self) -> String {
        if self.cut > 0 {
            self.text
                .push_str(&format!("\n[… output cut: {} bytes more]", self.cut));
        }
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{EmbeddedResource, Resource};

    #[test]
    fn contents_are_joined_and_described() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                "inline", "mem://a",
            ))),
            ContentBlock::ResourceLink(Resource::new("mem://b", "b")),
            ContentBlock::text("last"),
        ]);
        result.structured_content = Some(serde_json::json!({"sum": 3}));
        let output = tool_output(result);
        assert_eq!(
            output.content,
            "first\n[image: image/png]\ninline\n[resource link: mem://b]\nlast"
        );
        assert_eq!(output.structured, Some(serde_json::json!({"sum": 3})));
        assert!(!output.is_error);
        let failed = tool_output(CallToolResult::error(vec![ContentBlock::text("boom")]));
        assert!(failed.is_error);
        assert_eq!(failed.content, "boom");
    }

    #[test]
    fn huge_text_is_cut_with_a_marker() {
        let huge = "é".repeat(5 * 1024 * 1024);
        let result = CallToolResult::success(vec![
            ContentBlock::text(huge.clone()),
            ContentBlock::text("tail"),
        ]);
        let output = tool_output(result);
        let (kept, marker) = output.content.split_once("\n[… output cut: ").unwrap();
        assert!(kept.len() <= MAX_OUTPUT_BYTES && kept.len() > MAX_OUTPUT_BYTES - 2);
        let more = huge.len() + "\ntail".len() - kept.len();
        assert_eq!(marker, format!("{more} bytes more]"));
    }

    #[test]
    fn huge_structured_content_is_left_out() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("ok")]);
        result.structured_content = Some(serde_json::json!({"blob": "x".repeat(MAX_OUTPUT_BYTES)}));
        let output = tool_output(result);
        assert!(output.structured.is_none());
        assert!(output
            .content
            .starts_with("ok\n[structured content left out: "));
    }
}
