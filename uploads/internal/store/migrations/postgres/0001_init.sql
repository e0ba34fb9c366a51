CREATE TABLE uploads (
    id              TEXT PRIMARY KEY,
    status          TEXT    NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    files_total     BIGINT,
    files_processed BIGINT NOT NULL DEFAULT 0,
    error_count     BIGINT NOT NULL DEFAULT 0,
    bytes_used      BIGINT NOT NULL DEFAULT 0,
    file_count      BIGINT NOT NULL DEFAULT 0,
    owner           TEXT    NOT NULL DEFAULT '',
    lease_until     BIGINT NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX uploads_by_created ON uploads (created_at, id);
CREATE INDEX uploads_by_work ON uploads (status, lease_until);
CREATE TABLE upload_errors (
    upload_id TEXT    NOT NULL,
    seq       BIGINT NOT NULL,
    file      TEXT    NOT NULL,
    message   TEXT    NOT NULL,
    PRIMARY KEY (upload_id, seq)
);
