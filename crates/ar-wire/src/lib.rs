//! The wire contract of the service: /v1 and /v2 bodies, event envelopes and payloads, host-callback bodies, with exact JSON names.
