//! The only place that spawns processes: explicit cwd, filtered env, own process group killed on drop, stderr drained.
