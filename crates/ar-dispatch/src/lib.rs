//! Seed 000: the Runtime trait for CLI coding agents, the subscription lane, composites and remote nodes.
