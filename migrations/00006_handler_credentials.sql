-- +goose Up

-- Handler credentials (T10): while a turn runs, its handler holds a bearer
-- credential that reads its own session and nothing else. Only the SHA-256
-- of the credential is kept. A credential is good while its expiry has not
-- passed AND the session still holds the lease it was minted under (same
-- lease_token, lease not expired): committing, failing or cancelling the
-- turn clears the lease, and a lost lease bumps or expires it, so the
-- credential dies with the turn even before its row is deleted.
CREATE TABLE handler_credentials (
    hash         bytea PRIMARY KEY,
    sid          bigint NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
    lease_token  bigint NOT NULL,
    execution_id uuid NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX handler_credentials_sid ON handler_credentials (sid);
CREATE INDEX handler_credentials_expiry ON handler_credentials (expires_at);

-- +goose Down
DROP TABLE handler_credentials;
