//! Seed 003: the studio control plane, runtime registry, command state machine, SSE command stream, acks and the link client.
