-- Sealed secrets of an app that outlive any run: a Codex ChatGPT sign-in, one per connection.
CREATE TABLE app_secrets (
    app_id     TEXT NOT NULL,
    name       TEXT NOT NULL,
    ciphertext BYTEA NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (app_id, name)
);
