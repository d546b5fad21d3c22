//! HTTP face of the service (axum), auth, SSE, wire conversion, and the composition root.
