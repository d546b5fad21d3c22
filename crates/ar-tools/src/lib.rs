//! Tool catalog, host command tools and the context tool behind the domain ToolHost trait.
