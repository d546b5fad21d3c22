//! Per-run event fan-out (in-process bus), gap-free replay stitching, SSE framing and the durable callback outbox.
