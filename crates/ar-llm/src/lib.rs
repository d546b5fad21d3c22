//! Model providers behind the domain ModelClient trait: OpenAI Chat Completions (and the seam for Responses and Anthropic Messages).
