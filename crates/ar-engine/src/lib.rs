//! Run engine: admission, run state machine, native agent loop, pause/approve/resume, cancel, checkpoints, ownership and recovery.
