-- +goose Up

-- Authorisation (issue 6): principals hold policies and authenticate with
-- bearer tokens. A token is stored only as the SHA-256 of its text: tokens
-- are 32 random bytes, so a plain hash is enough to make a stolen table
-- useless, and lookup is one index probe.
CREATE TABLE auth_principals (
    id         text PRIMARY KEY CHECK (id <> '' AND length(id) <= 200),
    created_at timestamptz NOT NULL
);

CREATE TABLE auth_policies (
    principal_id text NOT NULL REFERENCES auth_principals (id) ON DELETE CASCADE,
    action       text NOT NULL CHECK (action IN ('READ', 'WRITE', 'RESPOND', 'CLOSE', 'ADMIN')),
    resource     text NOT NULL,
    PRIMARY KEY (principal_id, action, resource)
);

CREATE TABLE auth_tokens (
    id           uuid PRIMARY KEY,
    principal_id text NOT NULL REFERENCES auth_principals (id) ON DELETE CASCADE,
    hash         bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);
CREATE INDEX auth_tokens_principal ON auth_tokens (principal_id);

-- +goose Down
DROP TABLE auth_tokens;
DROP TABLE auth_policies;
DROP TABLE auth_principals;
